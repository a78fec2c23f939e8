// `poslab bench`: training throughput at a given configuration, against what BLAS alone can do
// on this machine; the encodings side by side (--compare, --scaling); evaluation speed with and
// without state reuse (--reuse); evaluation's peak memory (--eval-memory). The measurements are
// in src/bench/ (training_speed, reuse_speed, eval_memory); this file checks the request, prints
// the tables and writes the CSV files.
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench/eval_memory.hpp"
#include "bench/reuse_speed.hpp"
#include "bench/training_speed.hpp"
#include "cli/commands.hpp"
#include "core/blas.hpp"
#include "core/provenance.hpp"
#include "encodings/registry.hpp"
#include "eval/memory_estimate.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

std::string format_spread(const Spread& s, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << s.median << " (min " << s.min << ", max "
    << s.max << ")";
  return o.str();
}

// "FLAGS at COMMIT[-dirty], BLAS NAME": which build measured (speeds compare within one build).
std::string build_description() {
  return std::string(build_flags()) + " at " + build_commit() + (build_dirty() ? "-dirty" : "") + ", BLAS " +
         blas_backend();
}

// cfg with one registered encoding, at its default options.
Config with_encoding(const Config& base, const EncodingInfo& info) {
  Config cfg = base;
  cfg.encoding.type = info.name;
  cfg.encoding.options = Options::defaults(info.options);
  return cfg;
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
            << "build:     " << build_description() << " (compare speeds within one build)\n";
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
            << " timed steps each\nbuild: " << build_description() << "\n\n"
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
      Config cfg = with_encoding(base, info);
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

namespace {

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
constexpr int kScalingRepetitions = 5, kLongestNaive = 128;

// The rows of --scaling: every encoding with its defaults, then the variants.
std::vector<ScalingVariant> scaling_rows() {
  std::vector<ScalingVariant> rows;
  for (const EncodingInfo& info : registered_encodings()) rows.push_back({info.name, info.name, {}});
  rows.insert(rows.end(), kScalingVariants.begin(), kScalingVariants.end());
  return rows;
}

// Every segment divides the tokens per step, and each fits in memory (checked before any work).
void check_scaling_segments(const Config& base, const std::vector<int>& segments,
                            int tokens_per_step) {
  for (int L : segments) {
    if (L <= 0 || tokens_per_step % L != 0)
      throw std::invalid_argument("bench --scaling: every segment must divide --tokens " +
                                  std::to_string(tokens_per_step) + "; got " + std::to_string(L));
    Config cfg = base;
    cfg.train.batch_size = tokens_per_step / L;
    check_memory(cfg, cfg.train.batch_size, L, L, /*training=*/true,
                 "bench --scaling " + std::to_string(L));
  }
}

void print_scaling_header(const Config& base, int steps, const std::vector<int>& segments,
                          int tokens_per_step) {
  std::cout << "poslab bench --scaling: every encoding (default options; also its naive reference "
               "path where it has one; rope[yarn] and rope[dynamic_ntk]: factor 4, original_len "
               "16) at segments";
  for (int L : segments) std::cout << " " << L;
  std::cout << ", batch x segment = " << tokens_per_step << " tokens, memory = segment\n  d_model "
            << base.model.d_model << ", " << base.model.n_layers << " layers, " << base.model.n_heads
            << " heads, d_inner " << base.model.d_inner << ", " << omp_get_max_threads()
            << " threads; median of 5 repetitions of " << steps << " steps\n  build "
            << build_description() << "\n\n"
            << std::left << std::setw(26) << "encoding" << std::right << std::setw(8) << "segment"
            << std::setw(12) << "tokens/s" << std::setw(12) << "MFLOP/tok" << std::setw(10)
            << "GFLOP/s" << std::setw(12) << "vs none" << "\n";
}

// The configuration of one row at segment L: batch x L = tokens_per_step, memory L.
Config scaling_config(const Config& base, const ScalingVariant& variant, bool naive, int L,
                      int tokens_per_step) {
  Config cfg = with_encoding(base, *find_encoding(variant.encoding));
  for (const auto& [key, value] : variant.values) cfg.encoding.options.set(key, value);
  if (naive) cfg.encoding.options.set("naive", true);
  cfg.train.seq_len = L;
  cfg.train.batch_size = tokens_per_step / L;
  cfg.memory.mem_len = L;
  return cfg;
}

// Prints one row of the --scaling table; returns its CSV line.
std::string scaling_row(const ScalingVariant& variant, bool naive, const Config& cfg,
                        const BenchResult& r, double vs_none, double best_vs_none) {
  const int L = cfg.train.seq_len;
  const std::string label = variant.label + (naive ? " (naive)" : "");
  std::cout << std::left << std::setw(26) << label << std::right << std::setw(8) << L
            << std::fixed << std::setprecision(0) << std::setw(12) << r.tokens_per_second.median
            << std::setprecision(2) << std::setw(12) << r.flops_per_token / 1e6
            << std::setprecision(1) << std::setw(10) << r.gflops.median << std::setprecision(2)
            << std::setw(12) << vs_none << std::endl;
  std::ostringstream row;
  row << variant.label << "," << (naive ? "naive" : "fast")
      << "," << L << "," << cfg.train.batch_size << "," << L << "," << r.tokens_per_second.median
      << "," << r.tokens_per_second.min << "," << r.tokens_per_second.max << ","
      << r.flops_per_token << "," << r.model_flops_per_token << "," << r.gflops.median << ","
      << r.gflops.max << "," << vs_none << "," << best_vs_none << "\n";
  return row.str();
}

}  // namespace

int run_bench_scaling(const Config& base, int steps, const std::vector<int>& segments,
                      int tokens_per_step, const std::string& csv_path) {
  check_scaling_segments(base, segments, tokens_per_step);
  set_threads(base.train.threads);
  print_scaling_header(base, steps, segments, tokens_per_step);
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
  const std::vector<ScalingVariant> rows = scaling_rows();
  for (const int L : segments) {
    double none_gflops = 0, none_best = 0;
    for (const ScalingVariant& variant : rows) {
      const EncodingInfo& info = *find_encoding(variant.encoding);
      const bool has_naive = std::any_of(info.options.begin(), info.options.end(),
                                         [](const OptionSpec& o) { return o.key == "naive"; });
      for (const bool naive : {false, true}) {
        // The naive paths cost O(L K d^2) per layer (Transformer-XL's: a minute a step at
        // segment 512): measured up to segment 128, where they are the tests' oracle anyway,
        // one repetition of one step.
        if (naive && (!has_naive || L > kLongestNaive || !variant.values.empty())) continue;
        const Config cfg = scaling_config(base, variant, naive, L, tokens_per_step);
        const BenchResult r =
            bench_training(cfg, naive ? 1 : steps, naive ? 1 : kScalingRepetitions);
        if (info.name == "none") none_gflops = r.gflops.median, none_best = r.gflops.max;
        csv += scaling_row(variant, naive, cfg, r,
                           none_gflops > 0 ? r.gflops.median / none_gflops : 0,
                           none_best > 0 ? r.gflops.max / none_best : 0);
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

namespace {

void print_reuse_header(const Config& cfg, long targets) {
  const int L = cfg.train.seq_len;
  std::cout << "poslab bench --reuse: evaluation speed with and without state reuse (Dai et al. "
               "2019, Table 9)\n  d_model "
            << cfg.model.d_model << ", " << cfg.model.n_layers << " layers, encoding '"
            << cfg.encoding.type << "', " << omp_get_max_threads() << " threads; median of 3 "
            << "timed passes each, " << targets << " predicted tokens for vanilla, more for the "
            << "faster modes\n  build " << build_description() << "\n"
            << "  vanilla:     a forward pass over the A tokens ending at every predicted token\n"
            << "  per-segment: the window moves by " << L << " tokens and scores its last " << L
            << "\n  reuse:       segments of " << L << " tokens with memory A - " << L
            << " (cached states)\n\n"
            << std::right << std::setw(6) << "A" << std::setw(14) << "vanilla t/s" << std::setw(16)
            << "per-segment t/s" << std::setw(12) << "reuse t/s" << std::setw(12) << "speedup"
            << "\n";
}

}  // namespace

int run_bench_reuse(const Config& cfg, const std::vector<int>& attn_lens, long targets,
                    const std::string& csv_path) {
  for (int a : attn_lens)  // the vanilla mode runs one segment of the whole attention length
    check_memory(cfg, 1, a, 0, /*training=*/false, "bench --reuse " + std::to_string(a));
  set_threads(cfg.train.threads);
  const int L = cfg.train.seq_len;
  print_reuse_header(cfg, targets);
  ReuseSpeedBench bench(cfg, *std::max_element(attn_lens.begin(), attn_lens.end()), targets);
  std::string csv = "attn_len,segment,vanilla_tokens_per_second,per_segment_tokens_per_second,"
                    "reuse_tokens_per_second,speedup_vs_vanilla,speedup_vs_per_segment\n";
  for (int A : attn_lens) {
    const ReuseSpeed speed = bench.measure(A);
    std::cout << std::setw(6) << A << std::fixed << std::setprecision(1) << std::setw(14)
              << speed.vanilla << std::setw(16) << speed.per_segment << std::setw(12)
              << speed.reuse << std::setw(11) << speed.reuse / speed.vanilla << "x" << std::endl;
    std::ostringstream row;
    row << A << "," << L << "," << speed.vanilla << "," << speed.per_segment << ","
        << speed.reuse << "," << speed.reuse / speed.vanilla << ","
        << speed.reuse / speed.per_segment << "\n";
    csv += row.str();
  }
  if (!csv_path.empty()) {
    write_file_atomically(csv_path, csv);
    std::cout << "wrote " << csv_path << "\n";
  }
  return 0;
}

// `poslab bench --eval-memory M,...` (bench/eval_memory.hpp): one row per memory length M,
// through the evaluation-only forward (the default; scores in chunks of at most
// --eval-memory-budget MiB, 256 by default as in evaluation) or, with --eval-memory-path
// training, through the training forward.
int run_bench_eval_memory(const Config& cfg, const std::vector<int>& mem_lens,
                          const std::string& path, double score_budget_mb,
                          const std::string& csv_path) {
  if (path != "inference" && path != "training")
    throw std::invalid_argument("--eval-memory-path must be 'inference' or 'training', got '" +
                                path + "'");
  const int L = cfg.train.seq_len;
  const bool inference = path == "inference";
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
    const EvalMemoryPeak m = measure_eval_memory(cfg, M, inference, score_budget_mb * (1 << 20));
    std::ostringstream row;
    row << path << ',';
    if (inference) row << score_budget_mb;  // empty for the training path: no budget
    row << ',' << cfg.encoding.type << ',' << cfg.model.d_model << ',' << cfg.model.n_layers << ','
        << cfg.model.n_heads << ",1," << L << ',' << M << ',' << (M + L) << ',' << m.chunk_heads
        << ',' << std::fixed << std::setprecision(1) << m.estimate_mb << ',' << m.baseline_mb
        << ',' << m.peak_mb << '\n';
    csv += row.str();
    std::cout << "  context " << std::setw(6) << M + L << " (memory " << std::setw(6) << M
              << "): peak RSS " << std::fixed << std::setprecision(1) << m.peak_mb
              << " MB (baseline " << m.baseline_mb << " MB, estimate " << m.estimate_mb
              << " MB)\n";
  }
  if (!csv_path.empty()) {
    std::ofstream out(csv_path);
    out << csv;
    if (!out) throw std::runtime_error("cannot write " + csv_path);
  }
  return 0;
}

}  // namespace poslab
