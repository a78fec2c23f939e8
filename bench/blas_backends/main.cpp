// Which BLAS for poslab's products (issue 15, item 2): OpenBLAS, BLIS and libxsmm on every
// matrix product of one training step, at the shapes, transposes, leading dimensions, alphas,
// betas and threading the model uses (src/nn/attention.hpp, src/nn/linear.hpp,
// src/model/transformer.hpp; the list of src/model/products.hpp). Usage: see run.sh.
//
// Arrangement, as in the model with 2 OpenMP threads:
//   per-head products   B H independent calls in one `omp parallel for schedule(static)`, each
//                       a single-threaded call (attention.hpp)
//   other products      parallel_multiply (src/core/blas.cpp): C's rows split over the threads,
//                       one single-threaded call each (one call when m n k < 64^3 or m < 4)
// Every timing is interleaved: in one repetition each product runs its step's worth of calls
// once per backend, back to back, the backends' order rotating, so a change in the machine's
// load hits them all; a backend's step time is the sum over the products in that repetition,
// and its speedup is openblas_time / its time within each repetition.
// Every backend's result is checked against OpenBLAS first (max |C - C_openblas| / max
// |C_openblas| over each product), so a wrong call cannot look fast.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends.hpp"

namespace {

using bb::Gemm;

struct Call {
  char ta, tb;
  int m, n, k;
  long oa, ob, oc;  // offsets into the product's A, B, C buffers
  int lda, ldb, ldc;
  float alpha, beta;
};

struct Product {
  std::string name, id, text;  // products.hpp's name; a key without spaces; the model's call
  bool per_head;
  long instances;          // per training step
  std::vector<Call> calls; // one instance: B H calls (per head), 1 or B calls (others)
  std::vector<float> a, b, c, c0;
  double flops() const {  // per step
    double f = 0;
    for (const Call& x : calls) f += 2.0 * x.m * x.n * x.k;
    return f * instances;
  }
};

// The extent of a stored matrix (rows x cols, row stride ld) from offset o.
long extent(long o, int rows, int cols, int ld) { return o + long(rows - 1) * ld + cols; }

void allocate(Product& p, std::mt19937& rng) {
  long na = 0, nb = 0, nc = 0;
  for (const Call& x : p.calls) {
    na = std::max(na, x.ta == 'T' ? extent(x.oa, x.k, x.m, x.lda) : extent(x.oa, x.m, x.k, x.lda));
    nb = std::max(nb, x.tb == 'T' ? extent(x.ob, x.n, x.k, x.ldb) : extent(x.ob, x.k, x.n, x.ldb));
    nc = std::max(nc, extent(x.oc, x.m, x.n, x.ldc));
  }
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  p.a.resize(na);
  p.b.resize(nb);
  p.c0.resize(nc);
  for (float& v : p.a) v = u(rng);
  for (float& v : p.b) v = u(rng);
  for (float& v : p.c0) v = u(rng);
  p.c = p.c0;
}

struct Shape {
  std::string name;
  int d, H, dh, di, V, L, M, B, layers;
};

// The products of one training step of the model with the encoding `none` (no positional
// products), forward and backward, as the model calls them.
std::vector<Product> step_products(const Shape& s) {
  const int d = s.d, H = s.H, dh = s.dh, L = s.L, M = s.M, B = s.B, K = M + L, N = s.layers;
  const float scale = 1.0f / std::sqrt(float(dh));
  std::vector<Product> out;
  // linear.hpp: y = x W [rows, in] x [in, out]; dx += dy W^T; dW += x^T dy. `calls` row blocks of
  // `rows` rows each, the b-th reading x from row x_row(b) and y from row b rows.
  auto linear = [&](const std::string& name, const std::string& id, int rows, int in, int o,
                    long instances, int calls, auto x_row, bool fwd_per_row) {
    Product f{name, id, "y = x W", false, instances, {}, {}, {}, {}, {}};
    const int fwd_calls = fwd_per_row ? calls : 1, fwd_rows = fwd_per_row ? rows : rows * calls;
    for (int b = 0; b < fwd_calls; ++b)
      f.calls.push_back({'N', 'N', fwd_rows, o, in, long(x_row(b)) * in, 0, long(b) * fwd_rows * o,
                         in, o, o, 1.0f, 0.0f});
    Product dA{name + " dA", id + "_dA", "dx += dy W^T", false, instances, {}, {}, {}, {}, {}};
    Product dB{name + " dB", id + "_dB", "dW += x^T dy", false, instances, {}, {}, {}, {}, {}};
    for (int b = 0; b < calls; ++b) {
      dA.calls.push_back({'N', 'T', rows, in, o, long(b) * rows * o, 0, long(x_row(b)) * in, o, o,
                          in, 1.0f, 1.0f});
      dB.calls.push_back({'T', 'N', in, o, rows, long(x_row(b)) * in, long(b) * rows * o, 0, in, o,
                          o, 1.0f, 1.0f});
    }
    out.push_back(f);
    out.push_back(dA);
    out.push_back(dB);
  };
  // Queries: rows M..K-1 of each batch row; one call over B L rows without memory (attention.hpp
  // segment_rows_gemm), B calls of L rows with memory; the backward is always B calls of L rows.
  linear("q projection", "q", L, d, d, N, B, [&](int b) { return b * K + M; }, M > 0);
  linear("k, v projections", "kv", B * K, d, d, 2L * N, 1, [](int) { return 0; }, false);
  // Per head: q, k, v, ctx, dq, dk, dv, dctx are [B, rows, d] with head h at column h dh (row
  // stride d); scores, P, dP [B, H, L, K] contiguous.
  auto per_head = [&](const std::string& name, const std::string& id, const std::string& text,
                      char ta, char tb, int m, int n, int k, auto oa, int lda, auto ob, int ldb,
                      auto oc, int ldc, float alpha) {
    Product p{name, id, text, true, N, {}, {}, {}, {}, {}};
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      p.calls.push_back(
          {ta, tb, m, n, k, oa(b, h), ob(b, h), oc(b, h), lda, ldb, ldc, alpha, 0.0f});
    }
    out.push_back(p);
  };
  auto q_head = [&](int b, int h) { return long(b) * L * d + h * dh; };
  auto k_head = [&](int b, int h) { return long(b) * K * d + h * dh; };
  auto score = [&](int b, int h) { return (long(b) * H + h) * L * K; };
  per_head("scores q_h k_h^T", "scores", "S = scale q_h k_h^T", 'N', 'T', L, K, dh, q_head, d,
           k_head, d, score, K, scale);
  per_head("scores q_h k_h^T dA", "scores_dA", "dq_h = scale dS k_h", 'N', 'N', L, dh, K, score,
           K, k_head, d, q_head, d, scale);
  per_head("scores q_h k_h^T dB", "scores_dB", "dk_h = scale dS^T q_h", 'T', 'N', K, dh, L,
           score, K, q_head, d, k_head, d, scale);
  per_head("P_h v_h", "pv", "z_h = P_h v_h", 'N', 'N', L, dh, K, score, K, k_head, d, q_head, d,
           1.0f);
  per_head("P_h v_h dA", "pv_dA", "dP_h = dz_h v_h^T", 'N', 'T', L, K, dh, q_head, d, k_head, d,
           score, K, 1.0f);
  per_head("P_h v_h dB", "pv_dB", "dv_h = P_h^T dz_h", 'T', 'N', K, dh, L, score, K, q_head, d,
           k_head, d, 1.0f);
  linear("out projection", "out", B * L, d, d, N, 1, [](int) { return 0; }, false);
  linear("feed-forward in", "ff_in", B * L, d, s.di, N, 1, [](int) { return 0; }, false);
  linear("feed-forward out", "ff_out", B * L, s.di, d, N, 1, [](int) { return 0; }, false);
  linear("output layer", "output", B * L, d, s.V, 1, 1, [](int) { return 0; }, false);
  return out;
}

void call(Gemm g, const Product& p, const Call& x, float* c, int row0, int rows) {
  const long a_off = x.ta == 'T' ? row0 : long(row0) * x.lda;
  g(x.ta, x.tb, rows, x.n, x.k, x.alpha, p.a.data() + x.oa + a_off, x.lda, p.b.data() + x.ob, x.ldb,
    x.beta, c + x.oc + long(row0) * x.ldc, x.ldc);
}

// One instance of a product, arranged as the model arranges it.
void run_instance(Gemm g, Product& p) {
  float* c = p.c.data();
  if (p.per_head) {
    const long n = long(p.calls.size());
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) call(g, p, p.calls[i], c, 0, p.calls[i].m);
    return;
  }
  const int threads = omp_get_max_threads();
  for (const Call& x : p.calls) {
    const bool small = double(x.m) * x.n * x.k < 64.0 * 64 * 64;  // as parallel_multiply
    if (threads == 1 || small || x.m < 2 * threads) {
      call(g, p, x, c, 0, x.m);
      continue;
    }
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const int begin = int(long(x.m) * t / threads), end = int(long(x.m) * (t + 1) / threads);
      if (end > begin) call(g, p, x, c, begin, end - begin);
    }
  }
}

// The calls as they reach the BLAS (after the row split), to ask libxsmm which get a kernel.
struct Recorded {
  char ta, tb;
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
};
std::vector<Recorded> g_recorded;
std::mutex g_record_mutex;
void record_gemm(char ta, char tb, int m, int n, int k, float alpha, const float*, int lda,
                 const float*, int ldb, float beta, float*, int ldc) {
  std::lock_guard<std::mutex> lock(g_record_mutex);
  g_recorded.push_back({ta, tb, m, n, k, lda, ldb, ldc, alpha, beta});
}

struct Backend {
  std::string name;
  Gemm gemm;
  int jit;  // 0: not libxsmm; 1: libxsmm_sgemm's policy; 2: a kernel at any size
};

struct Spread {
  double min, median, max;
};
Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {v.front(), med, v.back()};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  std::string csv_path, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--csv" && i + 1 < argc) csv_path = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::cerr << "usage: blas_backends [--reps N] [--csv PATH] [--only reference|xl_mem64]\n";
      return 2;
    }
  }
  bb::openblas_init();
  bb::blis_init();
  bb::xsmm_init();
  const std::vector<Backend> backends = {{"openblas", bb::openblas_gemm, 0},
                                         {"blis", bb::blis_gemm, 0},
                                         {"libxsmm", bb::xsmm_gemm, 1},
                                         {"libxsmm_jit", bb::xsmm_jit_gemm, 2}};
  std::cout << "OpenBLAS " << bb::openblas_version() << "\nBLIS " << bb::blis_version()
            << "\nlibxsmm " << bb::xsmm_version() << "\n" << omp_get_max_threads()
            << " OpenMP threads, " << reps << " repetitions, interleaved\n";
  const std::vector<Shape> shapes = {{"reference", 128, 4, 32, 512, 256, 64, 0, 16, 4},
                                     {"xl_mem64", 128, 4, 32, 512, 256, 64, 64, 16, 4}};
  std::ostringstream csv;
  csv << "config,id,product,call,m,n,k,ta,tb,lda,ldb,ldc,alpha,beta,arrangement,calls_per_instance,"
         "instances_per_step,mflop_per_step,backend,ms_median,ms_min,ms_max,gflops_median,"
         "gflops_min,gflops_max,speedup_median,speedup_min,speedup_max,jit_flop_fraction,"
         "max_rel_diff\n";
  std::mt19937 rng(15);
  bool all_ok = true;
  for (const Shape& s : shapes) {
    if (!only.empty() && s.name != only) continue;
    std::vector<Product> products = step_products(s);
    double step_flops = 0;
    for (Product& p : products) {
      allocate(p, rng);
      step_flops += p.flops();
    }
    const std::size_t nb = backends.size(), np = products.size();
    // Correctness: every backend against OpenBLAS, one instance from the same C.
    std::vector<std::vector<double>> rel(nb, std::vector<double>(np, 0.0));
    for (std::size_t i = 0; i < np; ++i) {
      Product& p = products[i];
      p.c = p.c0;
      run_instance(bb::openblas_gemm, p);
      const std::vector<float> ref = p.c;
      double scale = 0;
      for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
      for (std::size_t b = 1; b < nb; ++b) {
        p.c = p.c0;
        run_instance(backends[b].gemm, p);
        double diff = 0;
        for (std::size_t j = 0; j < ref.size(); ++j)
          diff = std::max(diff, double(std::fabs(p.c[j] - ref[j])));
        rel[b][i] = diff / scale;
        if (!(rel[b][i] < 1e-5)) {
          all_ok = false;
          std::cerr << "WRONG: " << backends[b].name << " on " << s.name << " " << p.name
                    << ": max relative difference " << rel[b][i] << "\n";
        }
      }
      p.c = p.c0;
    }
    // Which calls libxsmm runs as JIT kernels (flop fraction per product).
    std::vector<std::vector<double>> jit(nb, std::vector<double>(np, 0.0));
    for (std::size_t i = 0; i < np; ++i) {
      g_recorded.clear();
      run_instance(record_gemm, products[i]);
      products[i].c = products[i].c0;
      double all = 0;
      std::vector<double> kernel(nb, 0.0);
      for (const Recorded& r : g_recorded) {
        const double f = 2.0 * r.m * r.n * r.k;
        all += f;
        for (std::size_t b = 0; b < nb; ++b)
          if (backends[b].jit &&
              bb::xsmm_uses_jit(r.ta, r.tb, r.m, r.n, r.k, r.alpha, r.lda, r.ldb, r.ldc, r.beta,
                                backends[b].jit == 2))
            kernel[b] += f;
      }
      for (std::size_t b = 0; b < nb; ++b) jit[b][i] = kernel[b] / all;
    }
    // Timing: per repetition, each product's instances of one step run once per backend, back
    // to back, the backends' order rotating; a backend's step time is the sum over products.
    // 2 warm-up repetitions.
    std::vector<std::vector<std::vector<double>>> t(
        nb, std::vector<std::vector<double>>(np, std::vector<double>()));
    std::vector<std::vector<double>> total(nb);
    for (int r = -2; r < reps; ++r) {
      std::vector<double> sum(nb, 0.0);
      for (std::size_t i = 0; i < np; ++i) {
        Product& p = products[i];
        for (std::size_t j = 0; j < nb; ++j) {
          const std::size_t b = (std::size_t(r + 2) + i + j) % nb;
          const auto t0 = std::chrono::steady_clock::now();
          for (long n = 0; n < p.instances; ++n) run_instance(backends[b].gemm, p);
          const double dt = seconds_since(t0);
          sum[b] += dt;
          if (r >= 0) t[b][i].push_back(dt);
        }
      }
      if (r >= 0)
        for (std::size_t b = 0; b < nb; ++b) total[b].push_back(sum[b]);
      for (Product& p : products) p.c = p.c0;  // keep the accumulating (beta 1) outputs bounded
    }
    // Report.
    auto ratio_spread = [&](const std::vector<double>& base, const std::vector<double>& x) {
      std::vector<double> q(x.size());
      for (std::size_t r = 0; r < x.size(); ++r) q[r] = base[r] / x[r];
      return spread(q);
    };
    char line[512];
    std::cout << "\n" << s.name << " (d " << s.d << ", " << s.layers << " layers, " << s.H
              << " heads, d_inner " << s.di << ", vocab " << s.V << ", segment " << s.L
              << ", memory " << s.M << ", batch " << s.B << "): " << step_flops / 1e9
              << " GFLOP per step\n";
    std::snprintf(line, sizeof line, "%-22s %-15s %-6s", "product", "m x n x k", "calls");
    std::cout << line;
    for (const Backend& be : backends) {
      std::snprintf(line, sizeof line, " %18s", (be.name + " GF/s").c_str());
      std::cout << line;
    }
    std::cout << "\n";
    for (std::size_t i = 0; i < np; ++i) {
      const Product& p = products[i];
      const Call& x = p.calls.front();
      const long calls = long(p.calls.size());
      std::snprintf(line, sizeof line, "%-22s %4dx%4dx%4d %6ld", p.name.c_str(), x.m, x.n, x.k,
                    calls * p.instances);
      std::cout << line;
      for (std::size_t b = 0; b < nb; ++b) {
        const Spread ms = spread(t[b][i]);
        const Spread sp = ratio_spread(t[0][i], t[b][i]);
        const double f = p.flops();
        std::snprintf(line, sizeof line, " %8.1f (x%5.2f)", f / ms.median / 1e9, sp.median);
        std::cout << line;
        csv << s.name << "," << p.id << ",\"" << p.name << "\",\"" << p.text << "\"," << x.m
            << "," << x.n << "," << x.k << "," << x.ta << "," << x.tb << "," << x.lda << ","
            << x.ldb << "," << x.ldc << "," << x.alpha << "," << x.beta << ","
            << (p.per_head ? "per_head" : "rows_split") << "," << calls << "," << p.instances
            << "," << f / 1e6 << "," << backends[b].name << "," << ms.median * 1e3 << ","
            << ms.min * 1e3 << "," << ms.max * 1e3 << "," << f / ms.median / 1e9 << ","
            << f / ms.max / 1e9 << "," << f / ms.min / 1e9 << "," << sp.median << "," << sp.min
            << "," << sp.max << "," << jit[b][i] << "," << rel[b][i] << "\n";
      }
      std::cout << "\n";
    }
    std::cout << "step total (ms, median (min, max); speedup over OpenBLAS per repetition):\n";
    for (std::size_t b = 0; b < nb; ++b) {
      const Spread ms = spread(total[b]);
      const Spread sp = ratio_spread(total[0], total[b]);
      double jf = 0, worst = 0;
      for (std::size_t i = 0; i < np; ++i) {
        jf += jit[b][i] * products[i].flops();
        worst = std::max(worst, rel[b][i]);
      }
      jf /= step_flops;
      std::snprintf(line, sizeof line,
                    "  %-12s %7.2f ms (%.2f, %.2f)  %6.1f GFLOP/s  speedup %.2f (%.2f, %.2f)  "
                    "jit flops %.2f  max rel diff %.1e\n",
                    backends[b].name.c_str(), ms.median * 1e3, ms.min * 1e3, ms.max * 1e3,
                    step_flops / ms.median / 1e9, sp.median, sp.min, sp.max, jf, worst);
      std::cout << line;
      csv << s.name << ",step_total,step total,\"\",,,,,,,,,,,all,,1," << step_flops / 1e6 << ","
          << backends[b].name << "," << ms.median * 1e3 << "," << ms.min * 1e3 << ","
          << ms.max * 1e3 << "," << step_flops / ms.median / 1e9 << ","
          << step_flops / ms.max / 1e9 << "," << step_flops / ms.min / 1e9 << "," << sp.median
          << "," << sp.min << "," << sp.max << "," << jf << "," << worst << "\n";
    }
  }
  if (!csv_path.empty()) std::ofstream(csv_path) << csv.str();
  if (!all_ok) {
    std::cerr << "a backend's result differs from OpenBLAS's\n";
    return 1;
  }
  return 0;
}
