// `poslab bench`: training throughput at a given configuration, against what BLAS alone can do
// on this machine.
#include <omp.h>

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/blas.hpp"
#include "core/provenance.hpp"
#include "core/rng.hpp"
#include "model/flops.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "train/run_dir.hpp"
#include "train/sliding_window.hpp"
#include "train/memory_estimate.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

// GFLOP/s of a square sgemm of size n, the practical ceiling for dense work here.
double measure_sgemm_gflops(int n, int repeats) {
  std::vector<float> a(std::size_t(n) * n, 1.0f), b(a), c(a);
  parallel_gemm<float>(Trans::No, Trans::No, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r)
    parallel_gemm<float>(Trans::No, Trans::No, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                n);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * n * n * n * repeats / s / 1e9;
}

}  // namespace

BenchResult bench_training(const Config& base, int steps) {
  Config cfg = base;
  const int B = cfg.train.batch_size, L = cfg.train.seq_len;
  // Random bytes: throughput does not depend on the text.
  Rng rng(cfg.train.seed);
  std::vector<std::int32_t> tokens(std::size_t(B) * (L * (steps + 4) + 1));
  for (auto& t : tokens) t = std::int32_t(rng.below(cfg.model.vocab_size));
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  std::ostringstream quiet;
  cfg.train.log_every = 0;
  cfg.train.eval_every = 0;
  cfg.train.steps = 3;  // warm-up: buffers are allocated on the first step
  train_model(model, cfg, tokens, {}, nullptr, quiet);
  cfg.train.steps = steps;
  const TrainReport r = train_model(model, cfg, tokens, {}, nullptr, quiet);
  BenchResult out;
  out.tokens_per_second = r.tokens_per_second;
  out.flops_per_token = training_flops_per_token(cfg.model, L, cfg.memory.mem_len);
  out.gflops = out.tokens_per_second * out.flops_per_token / 1e9;
  return out;
}

int run_bench(const Config& cfg, int steps) {
  check_memory(cfg, cfg.train.batch_size, cfg.train.seq_len, cfg.memory.mem_len,
               /*training=*/true, "bench (train.batch_size, train.seq_len, memory.mem_len)");
  set_threads(cfg.train.threads);
  const ModelConfig& m = cfg.model;
  std::cout << "poslab bench: d_model " << m.d_model << ", " << m.n_layers << " layers, "
            << m.n_heads << " heads, d_inner " << m.d_inner << ", vocab " << m.vocab_size
            << ", segment " << cfg.train.seq_len << ", batch " << cfg.train.batch_size
            << ", memory " << cfg.memory.mem_len << ", encoding '" << cfg.encoding.type << "', "
            << omp_get_max_threads() << " threads\n"
            << "build:     " << build_flags() << " at " << build_commit()
            << (build_dirty() ? "-dirty" : "") << " (compare speeds within one build)\n";
  const double sgemm = measure_sgemm_gflops(512, 40);
  const BenchResult r = bench_training(cfg, steps);
  std::cout << std::fixed << std::setprecision(0)
            << "training:  " << r.tokens_per_second << " tokens/s over " << steps << " steps\n"
            << "model:     " << std::setprecision(2) << r.flops_per_token / 1e6
            << " MFLOP per training token (matrix products of forward + backward, 2 per "
               "multiply-add; see src/model/flops.hpp)\n"
            << "achieved:  " << std::setprecision(1) << r.gflops << " GFLOP/s\n"
            << "sgemm:     " << sgemm << " GFLOP/s (512x512x512, this machine)\n"
            << "ratio:     " << std::setprecision(2) << r.gflops / sgemm
            << " of the sgemm ceiling\n";
  return 0;
}

int run_bench_comparison(const Config& base, int steps, int mem_len) {
  check_memory(base, base.train.batch_size, base.train.seq_len, mem_len, /*training=*/true,
               "bench --compare (train.batch_size, train.seq_len, --compare M)");
  set_threads(base.train.threads);
  std::cout << "poslab bench --compare: d_model " << base.model.d_model << ", "
            << base.model.n_layers << " layers, segment " << base.train.seq_len << ", batch "
            << base.train.batch_size << ", " << omp_get_max_threads() << " threads, " << steps
            << " timed steps each\nbuild: " << build_flags() << " at " << build_commit()
            << (build_dirty() ? "-dirty" : "") << "\n\n"
            << std::left << std::setw(24) << "encoding" << std::right << std::setw(14)
            << "memory 0" << std::setw(10) << "vs none" << std::setw(14)
            << ("memory " + std::to_string(mem_len)) << std::setw(10) << "vs none" << "\n";
  double none[2] = {0, 0};
  for (const EncodingInfo& info : registered_encodings()) {
    std::cout << std::left << std::setw(24) << info.name << std::right << std::flush;
    for (int m = 0; m < 2; ++m) {
      Config cfg = base;
      cfg.encoding.type = info.name;
      cfg.encoding.options = Options::defaults(info.options);
      cfg.memory.mem_len = m == 0 ? 0 : mem_len;
      const double tok_s = bench_training(cfg, steps).tokens_per_second;
      if (info.name == "none") none[m] = tok_s;
      std::cout << std::setw(10) << std::fixed << std::setprecision(0) << tok_s << " t/s"
                << std::setw(9) << std::showpos << std::setprecision(0)
                << (none[m] > 0 ? 100.0 * (none[m] / tok_s - 1.0) : 0.0) << "%" << std::noshowpos
                << std::flush;
    }
    std::cout << "\n";
  }
  std::cout << "\n'vs none': extra time per token relative to 'none' at the same memory.\n";
  return 0;
}

// Seconds one call of `work` takes (its result is returned through `out`).
template <class Work>
double seconds_of(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run_bench_reuse(const Config& cfg, const std::vector<int>& attn_lens, long targets,
                    const std::string& csv_path) {
  for (int a : attn_lens)  // the vanilla mode runs one segment of the whole attention length
    check_memory(cfg, 1, a, 0, /*training=*/false, "bench --reuse " + std::to_string(a));
  set_threads(cfg.train.threads);
  const int L = cfg.train.seq_len;
  std::cout << "poslab bench --reuse: evaluation speed with and without state reuse (Dai et al. "
               "2019, Table 9)\n  d_model "
            << cfg.model.d_model << ", " << cfg.model.n_layers << " layers, encoding '"
            << cfg.encoding.type << "', " << omp_get_max_threads() << " threads; median of 3 "
            << "timed passes each, " << targets << " predicted tokens for vanilla, more for the "
            << "faster modes\n  build " << build_flags() << " at " << build_commit()
            << (build_dirty() ? "-dirty" : "") << "\n"
            << "  vanilla:     a forward pass over the A tokens ending at every predicted token\n"
            << "  per-segment: the window moves by " << L << " tokens and scores its last " << L
            << "\n  reuse:       segments of " << L << " tokens with memory A - " << L
            << " (cached states)\n\n"
            << std::right << std::setw(6) << "A" << std::setw(14) << "vanilla t/s" << std::setw(16)
            << "per-segment t/s" << std::setw(12) << "reuse t/s" << std::setw(12) << "speedup"
            << "\n";
  // Random tokens: speed does not depend on the text, nor on the weights.
  // Enough for the longest window plus every timed target of the three modes.
  const long longest = *std::max_element(attn_lens.begin(), attn_lens.end());
  Rng rng(cfg.train.seed);
  std::vector<std::int32_t> tokens(
      std::size_t(longest + std::max(64 * targets, 256L * L) + 4L * L));
  for (auto& t : tokens) t = std::int32_t(rng.below(cfg.model.vocab_size));
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);

  std::string csv = "attn_len,segment,vanilla_tokens_per_second,per_segment_tokens_per_second,"
                    "reuse_tokens_per_second,speedup_vs_vanilla,speedup_vs_per_segment\n";
  for (int A : attn_lens) {
    if (A <= L) throw std::invalid_argument("bench --reuse: every attention length must exceed "
                                            "the segment length " + std::to_string(L));
    // Windows per forward pass: at most 8,192 tokens, so that the [B, H, A, A] attention
    // weights of one pass stay bounded.
    SlidingWindowOptions vanilla{.attn_len = A, .stride = 1, .max_targets = targets,
                                 .batch = std::max(1, 8192 / A)};
    SlidingWindowOptions segment = vanilla;
    segment.stride = L;
    segment.max_targets = std::max(targets * 8, 16L * L);  // cheaper per token: time more
    const long reuse_targets = std::max(targets * 64, 256L * L);
    // Each mode: one warm-up pass (buffers of this shape), then the median of 3 timed passes.
    auto median_rate = [](auto&& evaluate_once) {
      evaluate_once();
      std::vector<double> rates;
      for (int r = 0; r < 3; ++r) {
        EvalResult result;
        const double s = seconds_of([&] { result = evaluate_once(); });
        rates.push_back(double(result.tokens) / s);
      }
      std::sort(rates.begin(), rates.end());
      return rates[1];
    };
    const double vanilla_tps =
        median_rate([&] { return evaluate_sliding_window(model, tokens, vanilla); });
    const double segment_tps =
        median_rate([&] { return evaluate_sliding_window(model, tokens, segment); });
    const double reuse_tps =
        median_rate([&] { return evaluate_with_reuse(model, tokens, L, A - L, reuse_targets, 1); });
    std::cout << std::setw(6) << A << std::fixed << std::setprecision(1) << std::setw(14)
              << vanilla_tps << std::setw(16) << segment_tps << std::setw(12) << reuse_tps
              << std::setw(11) << reuse_tps / vanilla_tps << "x" << std::endl;
    std::ostringstream row;
    row << A << "," << L << "," << vanilla_tps << "," << segment_tps << "," << reuse_tps << ","
        << reuse_tps / vanilla_tps << "," << reuse_tps / segment_tps << "\n";
    csv += row.str();
  }
  if (!csv_path.empty()) {
    write_file_atomically(csv_path, csv);
    std::cout << "wrote " << csv_path << "\n";
  }
  return 0;
}

}  // namespace poslab
