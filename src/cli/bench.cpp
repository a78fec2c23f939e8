// `poslab bench`: training throughput at a given configuration, against what BLAS alone can do
// on this machine.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/blas.hpp"
#include "core/memory_usage.hpp"
#include "core/provenance.hpp"
#include "core/rng.hpp"
#include "data/pose_batcher.hpp"
#include "model/flops.hpp"
#include "model/products.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "train/run_dir.hpp"
#include "eval/sliding_window.hpp"
#include "eval/memory_estimate.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

// Repeated measurements, summarized: the machine is shared and single figures move by 10%.
Spread spread_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values.front(), values[values.size() / 2], values.back()};
}

// Random tokens for `steps` training steps of batch B and segment L (speed does not depend on
// the text).
std::vector<std::int32_t> random_tokens(const Config& cfg, int steps) {
  Rng rng(cfg.train.seed);
  std::vector<std::int32_t> tokens(std::size_t(cfg.train.batch_size) *
                                   (std::size_t(cfg.train.seq_len) * (steps + 4) + 1));
  for (auto& t : tokens) t = std::int32_t(rng.below(cfg.model.vocab_size));
  return tokens;
}

// Trains `model` for `steps` steps (memory reset at the start, as every training starts).
// With train.pose_target_len, on PoSE's rows (data/pose_batcher.hpp) cut from the same tokens,
// so that PoSE's cost (the draws, the copies, positions that skip) is measured too.
TrainReport train_steps(TransformerLM<float>& model, Config cfg, int steps,
                        const std::vector<std::int32_t>& tokens) {
  std::ostringstream quiet;
  cfg.train.log_every = 0;
  cfg.train.eval_every = 0;
  cfg.train.steps = steps;
  if (cfg.train.pose_target_len > 0) {
    PoseBatcher rows(std::make_shared<const std::vector<std::int32_t>>(tokens),
                     cfg.train.batch_size, cfg.train.seq_len, cfg.train.pose_target_len,
                     pose_variant_from_name(cfg.train.pose_variant), cfg.train.seed);
    return train_model(model, cfg, rows, nullptr, nullptr, quiet);
  }
  return train_model(model, cfg, tokens, {}, nullptr, quiet);
}

}  // namespace

BenchResult bench_training(const Config& cfg, int steps, int repetitions) {
  const int B = cfg.train.batch_size, L = cfg.train.seq_len;
  const std::vector<std::int32_t> tokens = random_tokens(cfg, steps);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  train_steps(model, cfg, 3, tokens);  // warm-up: buffers are allocated on the first steps

  // The FLOPs of one step with its memory full: two steps counted, minus one (a training
  // starts without memory).
  count_gemm_flops(true);
  train_steps(model, cfg, 2, tokens);
  const std::uint64_t two_steps = counted_gemm_flops();
  count_gemm_flops(true);
  train_steps(model, cfg, 1, tokens);
  const std::uint64_t first_step = counted_gemm_flops();
  count_gemm_flops(false);

  BenchResult out;
  out.flops_per_token = double(two_steps - first_step) / (double(B) * L);
  out.model_flops_per_token = training_flops_per_token(cfg.model, L, cfg.memory.mem_len);
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r)
    rates.push_back(train_steps(model, cfg, steps, tokens).tokens_per_second);
  out.tokens_per_second = spread_of(rates);
  out.gflops = {out.tokens_per_second.min * out.flops_per_token / 1e9,
                out.tokens_per_second.median * out.flops_per_token / 1e9,
                out.tokens_per_second.max * out.flops_per_token / 1e9};
  return out;
}

Spread measure_ceiling(const Config& cfg, int repetitions) {
  const std::vector<MatrixProduct> products = training_products(
      cfg.model, cfg.train.batch_size, cfg.train.seq_len, cfg.memory.mem_len);
  const int threads = omp_get_max_threads();
  // Operands of each product, filled with small values (speed does not depend on them); the
  // per-head products get one output per thread.
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<Operands> operands;
  double flops = 0;
  for (const MatrixProduct& p : products) {
    const std::size_t outputs = p.per_head ? threads : 1;
    operands.push_back({std::vector<float>(std::size_t(p.m) * p.k, 0.01f),
                        std::vector<float>(std::size_t(p.k) * p.n, 0.01f),
                        std::vector<float>(std::size_t(p.m) * p.n * outputs, 0.0f)});
    flops += p.flops();
  }
  auto run_all = [&] {
    for (std::size_t i = 0; i < products.size(); ++i) {
      const MatrixProduct& p = products[i];
      Operands& o = operands[i];
      // C [m, n] = A [m, k] B [k, n]
      const auto A = matrix(o.a.data(), p.m, p.k), B = matrix(o.b.data(), p.k, p.n);
      if (p.per_head) {
#pragma omp parallel for schedule(static)
        for (long r = 0; r < p.count; ++r)
          multiply(matrix(o.c.data() + std::size_t(omp_get_thread_num()) * p.m * p.n, p.m, p.n),
                   A, B);
      } else {
        for (long r = 0; r < p.count; ++r) parallel_multiply(matrix(o.c.data(), p.m, p.n), A, B);
      }
    }
  };
  run_all();  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run_all();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(flops / s / 1e9);
  }
  return spread_of(rates);
}

namespace {
std::string format_spread(const Spread& s, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << s.median << " (min " << s.min << ", max "
    << s.max << ")";
  return o.str();
}
}  // namespace

int run_bench(const Config& cfg, int steps) {
  check_memory(cfg, cfg.train.batch_size, cfg.train.seq_len, cfg.memory.mem_len,
               /*training=*/true, "bench (train.batch_size, train.seq_len, memory.mem_len)");
  set_threads(cfg.train.threads);
  const ModelConfig& m = cfg.model;
  constexpr int kRepetitions = 5;
  std::cout << "poslab bench: d_model " << m.d_model << ", " << m.n_layers << " layers, "
            << m.n_heads << " heads, d_inner " << m.d_inner << ", vocab " << m.vocab_size
            << ", segment " << cfg.train.seq_len << ", batch " << cfg.train.batch_size
            << ", memory " << cfg.memory.mem_len << ", encoding '" << cfg.encoding.type << "', "
            << omp_get_max_threads() << " threads\n"
            << "build:     " << build_flags() << " at " << build_commit()
            << (build_dirty() ? "-dirty" : "") << ", BLAS " << blas_backend()
            << " (compare speeds within one build)\n";
  const BenchResult r = bench_training(cfg, steps, kRepetitions);
  const Spread ceiling = measure_ceiling(cfg, 7);
  const double model_gflops = r.tokens_per_second.median * r.model_flops_per_token / 1e9;
  std::cout << "training:  " << format_spread(r.tokens_per_second, 0) << " tokens/s, "
            << kRepetitions << " repetitions of " << steps << " steps\n"
            << std::fixed << std::setprecision(2)
            << "FLOPs:     " << r.flops_per_token / 1e6 << " MFLOP per training token, counted in "
            << "the step's sgemm calls (the model's own products, src/model/products.hpp: "
            << r.model_flops_per_token / 1e6 << "; the rest is the encoding's)\n"
            << "achieved:  " << format_spread(r.gflops, 1) << " GFLOP/s\n"
            << "ceiling:   " << format_spread(ceiling, 1) << " GFLOP/s, 7 repetitions: the "
            << "model's products alone, each in its batched form (src/model/products.hpp)\n"
            << "ratio:     " << std::setprecision(2) << model_gflops / ceiling.median
            << " of the ceiling (medians; the model's products over the step's time: the rest "
               "is time outside them)\n";
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
            << (build_dirty() ? "-dirty" : "") << ", BLAS " << blas_backend() << "\n\n"
            << std::left << std::setw(24) << "encoding" << std::right << std::setw(14)
            << "memory 0" << std::setw(10) << "vs none" << std::setw(14)
            << ("memory " + std::to_string(mem_len)) << std::setw(10) << "vs none" << "\n";
  // The first measurement of a process ran slow (about 10% here, whatever came first), so one
  // untimed pass of the first configuration comes before the table.
  bench_training(base, steps, 1);
  double none[2] = {0, 0};
  for (const EncodingInfo& info : registered_encodings()) {
    std::cout << std::left << std::setw(24) << info.name << std::right << std::flush;
    for (int m = 0; m < 2; ++m) {
      Config cfg = base;
      cfg.encoding.type = info.name;
      cfg.encoding.options = Options::defaults(info.options);
      cfg.memory.mem_len = m == 0 ? 0 : mem_len;
      const double tok_s = bench_training(cfg, steps, 3).tokens_per_second.median;
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

// Option sets measured beside every encoding's defaults: rope's context-extension scalings
// (rope_scaling.hpp) must cost no more per step than plain rope (their tables are cached the
// same way). original_len 16 is below every segment, so dynamic_ntk is active.
struct ScalingVariant {
  std::string encoding, label;
  std::vector<std::pair<std::string, OptionValue>> values;
};
const std::vector<ScalingVariant> kScalingVariants = {
    {"rope", "rope[yarn]",
     {{"scaling", std::string("yarn")}, {"factor", 4.0}, {"original_len", std::int64_t(16)}}},
    {"rope", "rope[dynamic_ntk]",
     {{"scaling", std::string("dynamic_ntk")}, {"factor", 4.0},
      {"original_len", std::int64_t(16)}}},
};

int run_bench_scaling(const Config& base, int steps, const std::vector<int>& segments,
                      int tokens_per_step, const std::string& csv_path) {
  constexpr int kRepetitions = 5, kLongestNaive = 128;
  for (int L : segments) {
    if (L <= 0 || tokens_per_step % L != 0)
      throw std::invalid_argument("bench --scaling: every segment must divide --tokens " +
                                  std::to_string(tokens_per_step) + "; got " + std::to_string(L));
    Config cfg = base;
    cfg.train.batch_size = tokens_per_step / L;
    check_memory(cfg, cfg.train.batch_size, L, L, /*training=*/true,
                 "bench --scaling " + std::to_string(L));
  }
  set_threads(base.train.threads);
  std::cout << "poslab bench --scaling: every encoding (default options; also its naive reference "
               "path where it has one; rope[yarn] and rope[dynamic_ntk]: factor 4, original_len "
               "16) at segments";
  for (int L : segments) std::cout << " " << L;
  std::cout << ", batch x segment = " << tokens_per_step << " tokens, memory = segment\n  d_model "
            << base.model.d_model << ", " << base.model.n_layers << " layers, " << base.model.n_heads
            << " heads, d_inner " << base.model.d_inner << ", " << omp_get_max_threads()
            << " threads; median of 5 repetitions of " << steps << " steps\n  build "
            << build_flags() << " at " << build_commit() << (build_dirty() ? "-dirty" : "")
            << ", BLAS " << blas_backend() << "\n\n"
            << std::left << std::setw(26) << "encoding" << std::right << std::setw(8) << "segment"
            << std::setw(12) << "tokens/s" << std::setw(12) << "MFLOP/tok" << std::setw(10)
            << "GFLOP/s" << std::setw(12) << "vs none" << "\n";
  std::string csv = "encoding,path,segment,batch,mem_len,tokens_per_second,tokens_per_second_min,"
                    "tokens_per_second_max,flops_per_token,model_flops_per_token,gflops,"
                    "gflops_best,gflops_vs_none,gflops_best_vs_none\n";
  {  // The first measurement of a process runs slow: one untimed pass first (as --compare).
    Config first = base;
    first.train.seq_len = segments.front();
    first.train.batch_size = tokens_per_step / segments.front();
    first.memory.mem_len = segments.front();
    bench_training(first, steps, 1);
  }
  // Every encoding with its defaults, then the variants (label, encoding, option values).
  std::vector<ScalingVariant> rows;
  for (const EncodingInfo& info : registered_encodings()) rows.push_back({info.name, info.name, {}});
  rows.insert(rows.end(), kScalingVariants.begin(), kScalingVariants.end());
  for (const int L : segments) {
    double none_gflops = 0, none_best = 0;
    for (const ScalingVariant& variant : rows) {
      const EncodingInfo& info = *find_encoding(variant.encoding);
      const bool has_naive = std::any_of(info.options.begin(), info.options.end(),
                                         [](const OptionSpec& o) { return o.key == "naive"; });
      for (const bool naive : {false, true}) {
        // The naive paths cost O(L K d^2) per layer (Transformer-XL's: a minute a step at
        // segment 512): measured up to segment 128, where they are the tests' oracle anyway.
        if (naive && (!has_naive || L > kLongestNaive || !variant.values.empty())) continue;
        Config cfg = base;
        cfg.encoding.type = info.name;
        cfg.encoding.options = Options::defaults(info.options);
        for (const auto& [key, value] : variant.values) cfg.encoding.options.set(key, value);
        if (naive) cfg.encoding.options.set("naive", true);
        cfg.train.seq_len = L;
        cfg.train.batch_size = tokens_per_step / L;
        cfg.memory.mem_len = L;
        // The naive paths cost O(L K d^2) per layer: one repetition of one step is plenty.
        const BenchResult r = bench_training(cfg, naive ? 1 : steps, naive ? 1 : kRepetitions);
        if (info.name == "none") none_gflops = r.gflops.median, none_best = r.gflops.max;
        const std::string label = variant.label + (naive ? " (naive)" : "");
        const double vs_none = none_gflops > 0 ? r.gflops.median / none_gflops : 0;
        const double best_vs_none = none_best > 0 ? r.gflops.max / none_best : 0;
        std::cout << std::left << std::setw(26) << label << std::right << std::setw(8) << L
                  << std::fixed << std::setprecision(0) << std::setw(12)
                  << r.tokens_per_second.median << std::setprecision(2) << std::setw(12)
                  << r.flops_per_token / 1e6 << std::setprecision(1) << std::setw(10)
                  << r.gflops.median << std::setprecision(2) << std::setw(12) << vs_none
                  << std::endl;
        std::ostringstream row;
        row << variant.label << "," << (naive ? "naive" : "fast") << "," << L << ","
            << cfg.train.batch_size << "," << L << "," << r.tokens_per_second.median << ","
            << r.tokens_per_second.min << "," << r.tokens_per_second.max << ","
            << r.flops_per_token << "," << r.model_flops_per_token << "," << r.gflops.median
            << "," << r.gflops.max << "," << vs_none << "," << best_vs_none << "\n";
        csv += row.str();
      }
    }
  }
  std::cout << "\nFLOPs are counted in every sgemm call of a training step (the encoding's own "
               "products included); 'vs none': median GFLOP/s over the median of 'none' at the same "
               "segment (the CSV also has the best of the 5 repetitions); naive paths up to "
               "segment "
            << kLongestNaive << ", one repetition of one step.\n";
  if (!csv_path.empty()) {
    write_file_atomically(csv_path, csv);
    std::cout << "wrote " << csv_path << "\n";
  }
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
            << (build_dirty() ? "-dirty" : "") << ", BLAS " << blas_backend() << "\n"
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

namespace poslab {

// `poslab bench --eval-memory M,...`: peak resident memory of evaluating one batch row with a
// memory of M tokens (segment train.seq_len), through the evaluation-only forward (the default;
// scores in chunks of (rows, heads) of at most --eval-memory-budget MiB, 256 by default as in
// evaluation) or, with --eval-memory-path training, through the training forward that keeps
// every layer's attention weights (what evaluation did before). The model is freshly initialized (memory use
// does not depend on the weights); ceil(M / L) + 1 segments fill the memory, so the last one
// attends over K = M + L keys. One process per measurement gives clean peaks (glibc may keep
// freed memory); the peak includes the process's baseline, printed alongside.
int run_bench_eval_memory(const Config& cfg, const std::vector<int>& mem_lens,
                          const std::string& path, double score_budget_mb,
                          const std::string& csv_path) {
  if (path != "inference" && path != "training")
    throw std::invalid_argument("--eval-memory-path must be 'inference' or 'training', got '" +
                                path + "'");
  const int L = cfg.train.seq_len;
  const bool inference = path == "inference";
  const double budget_bytes = score_budget_mb * (1 << 20);
  for (int m : mem_lens)
    check_memory(cfg, 1, L, m, /*training=*/false, "bench --eval-memory " + std::to_string(m));
  set_threads(cfg.train.threads);
  std::string csv = "path,score_budget_mb,encoding,d_model,n_layers,n_heads,batch,segment,"
                    "memory,context,score_chunk_heads,estimated_mb,baseline_rss_mb,peak_rss_mb\n";
  std::cout << "poslab bench --eval-memory (" << path << " forward";
  if (inference) std::cout << ", score budget " << score_budget_mb << " MiB";
  std::cout << "): d_model "
            << cfg.model.d_model << ", " << cfg.model.n_layers << " layers, " << cfg.model.n_heads
            << " heads, encoding '" << cfg.encoding.type << "', batch 1, segment " << L << "\n";
  for (int M : mem_lens) {
    const double mb = 1 << 20;
    const double baseline = double(current_memory_bytes()) / mb;
    reset_peak_memory();
    {
      MemoryConfig memory = cfg.memory;
      memory.mem_len = M;
      TransformerLM<float> model(cfg.model, cfg.encoding, memory);
      model.init(cfg.train.seed);
      model.set_inference_only(inference);
      model.inference_scratch().score_budget_bytes = budget_bytes;
      Rng rng(cfg.train.seed);
      std::vector<std::int32_t> inputs(L), targets(L);
      const int segments = (M + L - 1) / L + 1;
      for (int s = 0; s < segments; ++s) {
        for (int i = 0; i < L; ++i) {
          inputs[i] = std::int32_t(rng.below(cfg.model.vocab_size));
          targets[i] = std::int32_t(rng.below(cfg.model.vocab_size));
        }
        model.forward(inputs.data(), targets.data(), nullptr, 1, L, 0, true);
      }
    }
    const double peak = double(peak_memory_bytes()) / mb;
    // The training path keeps [B, H, L, K] per layer (its estimate is the evaluation one's,
    // what a budget-respecting pass needs); the inference path's chunk holds Hc heads.
    const InferenceChunk chunk = inference_chunk(1, cfg.model.n_heads, L, M + L, sizeof(float),
                                                 inference ? budget_bytes
                                                           : kInferenceScoreBudgetBytes);
    const double estimate =
        estimated_bytes(cfg, 1, L, M, /*training=*/false,
                        inference ? budget_bytes : kInferenceScoreBudgetBytes) / mb;
    std::ostringstream row;
    row << path << ',';
    if (inference) row << score_budget_mb;  // empty for the training path: no budget
    row << ',' << cfg.encoding.type << ',' << cfg.model.d_model << ',' << cfg.model.n_layers << ','
        << cfg.model.n_heads << ",1," << L << ',' << M << ',' << (M + L) << ','
        << (inference ? chunk.heads : cfg.model.n_heads) << ',' << std::fixed
        << std::setprecision(1) << estimate << ',' << baseline << ',' << peak << '\n';
    csv += row.str();
    std::cout << "  context " << std::setw(6) << M + L << " (memory " << std::setw(6) << M
              << "): peak RSS " << std::fixed << std::setprecision(1) << peak << " MB (baseline "
              << baseline << " MB, estimate " << estimate << " MB)\n";
  }
  if (!csv_path.empty()) {
    std::ofstream out(csv_path);
    out << csv;
    if (!out) throw std::runtime_error("cannot write " + csv_path);
  }
  return 0;
}

}  // namespace poslab
