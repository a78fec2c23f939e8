// What `poslab train`, `poslab eval` and `poslab bench` do. main.cpp parses the command line;
// the work is here.
#include "cli/commands.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include "config/load.hpp"
#include "core/memory_usage.hpp"
#include "core/provenance.hpp"
#include "core/blas.hpp"
#include "data/corpus.hpp"
#include "data/ngram_baseline.hpp"
#include "model/transformer.hpp"
#include "tasks/instance_batcher.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/init_from.hpp"
#include "train/memory_estimate.hpp"
#include "train/passkey_curve.hpp"
#include "train/passkey_eval.hpp"
#include "train/registered_choices.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"
#include "train/sliding_window.hpp"
#include "train/stop_request.hpp"
#include "train/streaming_cache.hpp"
#include "train/train.hpp"
#include "train/training_state.hpp"

namespace poslab {

namespace {

CorpusSplit load_data(const Config& cfg) {
  return load_corpus(cfg.data);
}

// The held-out tokens the final evaluation reads (eval.split).
const std::vector<std::int32_t>& evaluation_tokens(const CorpusSplit& data, const Config& cfg) {
  return cfg.eval.split == "test" ? data.test : data.valid;
}

// One setting of the evaluation plan (see run_train): which data, at which length and memory.
struct EvalSetting {
  std::string kind;     // "main", "gate", "length" or "memory"
  double factor = 1.0;  // of train.seq_len (length) or of the memory (memory)
  int seq_len = 0;
  int mem_len = 0;
  int longer_than = 0;  // tasks, "length": only instances longer than this (0 = train.seq_len)
  bool gate = false;    // tasks: only the largest training sizes
  // Models trained with randomized positions: sample positions at evaluation too (kind
  // "length_sampled"), from a fixed seed so that every run reads the same positions.
  bool sample_positions = false;
  // Sliding-window evaluation (eval.stride; kinds "main_sliding", "length_sliding"): windows of
  // seq_len bytes moving by `stride`, each scoring its last `stride` bytes, no memory. 0 = the
  // usual non-overlapping chunks.
  int stride = 0;
};

// The batches of one evaluation setting, from the split eval.split, eval.batch_size rows each.
int evaluation_batch_size(const Config& cfg) {
  return cfg.eval.batch_size > 0 ? cfg.eval.batch_size : cfg.train.batch_size;
}

// "the main evaluation (eval.split = valid, segment 64, memory 0)": for messages.
std::string main_setting_name(const EvalSetting& s) {
  return "the " + s.kind + " evaluation (segment " + std::to_string(s.seq_len) + ", memory " +
         std::to_string(s.mem_len) + ")";
}

std::unique_ptr<BatchSource> evaluation_source(const Config& cfg, const EvalSetting& s) {
  Config rows = cfg;
  rows.train.batch_size = evaluation_batch_size(cfg);
  SourceSpec spec;
  spec.split = cfg.eval.split == "test" ? Split::test : Split::valid;
  spec.len = s.seq_len;
  spec.longer_than = s.longer_than;
  spec.gate = s.gate;
  return make_batch_source(rows, spec);
}

// Wilson's 95% interval for a proportion of `n` trials (exact match over instances): the
// sampling error of one run's evaluation, to set beside the spread over seeds.
std::pair<double, double> wilson_interval(double p, long n) {
  if (n <= 0) return {0.0, 1.0};
  const double z = 1.959963984540054, z2 = z * z, nn = double(n);
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

// The seed of the positions sampled at evaluation (kind "length_sampled"): fixed, so that every
// run and every setting reads the same sample, whatever its training drew.
constexpr std::uint64_t kEvaluationPositionSeed = 0xE7A1'0A7E;

// A sliding-window setting (train/sliding_window.hpp) on the stream of eval.split: the scored
// bytes of the chunked setting of the same length (eval.batches x rows x seq_len), rounded up to
// whole windows of `stride` bytes; eval.batches = 0: the whole split, less the first
// seq_len - stride bytes, which no window scores. No loss by position: every scored byte is at
// one of the window's last `stride` positions.
nlohmann::json evaluate_sliding_setting(TransformerLM<float>& model, const Config& cfg,
                                        const EvalSetting& s, nlohmann::json row) {
  const auto tokens =
      corpus_split_tokens(cfg, cfg.eval.split == "test" ? Split::test : Split::valid);
  const int rows = evaluation_batch_size(cfg);
  reset_peak_memory();
  const EvalResult r = evaluate_sliding_window(
      model, *tokens,
      SlidingWindowOptions{.attn_len = s.seq_len, .stride = s.stride,
                           .max_targets = cfg.eval.batches > 0
                                              ? long(cfg.eval.batches) * rows * s.seq_len
                                              : 0,
                           .batch = rows});
  row.update({{"loss", r.loss},  // no exact_match: a window's rows are not instances
              {"accuracy", r.accuracy},
              {"tokens", r.tokens},
              {"peak_memory_mb", double(peak_memory_bytes()) / (1 << 20)}});
  std::cout << std::fixed << std::setprecision(4) << "eval " << s.kind << " x"
            << std::setprecision(2) << s.factor << std::setprecision(4) << ": windows of "
            << s.seq_len << ", stride " << s.stride << " | loss " << r.loss << " | accuracy "
            << std::setprecision(3) << r.accuracy << " | " << r.tokens << " scored tokens"
            << std::endl;
  return row;
}

// The streaming evaluation (eval.stream_length; train/streaming_cache.hpp).
//
// The stream: the first eval.stream_length tokens of eval.split. Throws, naming the key, if the
// split is shorter (checked before a run starts).
std::vector<std::int32_t> stream_tokens(const Config& cfg) {
  const auto split =
      corpus_split_tokens(cfg, cfg.eval.split == "test" ? Split::test : Split::valid);
  if (std::int64_t(split->size()) < cfg.eval.stream_length)
    throw std::runtime_error("eval.stream_length = " + std::to_string(cfg.eval.stream_length) +
                             " is longer than the " + cfg.eval.split + " split (eval.split), "
                             "which holds " + std::to_string(split->size()) + " tokens");
  return {split->begin(), split->begin() + cfg.eval.stream_length};
}

StreamOptions stream_options(const Config& cfg) {
  const auto& e = cfg.eval;
  return {.sinks = e.stream_sinks,
          .recent = e.stream_recent > 0 ? e.stream_recent
                                        : cfg.train.seq_len - 1 - e.stream_sinks,
          .positions = stream_positions_from_name(e.stream_positions),
          .dense_segment = cfg.train.seq_len,
          .batch = evaluation_batch_size(cfg)};
}

// The largest evaluation the streaming modes make: dense, one row of train.seq_len queries over
// a memory of the whole stream. Checked before anything is written.
void check_stream_memory(const Config& cfg, const std::string& what) {
  if (cfg.eval.stream_length == 0) return;
  const auto& modes = cfg.eval.stream_modes;
  const bool dense = std::find(modes.begin(), modes.end(), "dense") != modes.end();
  check_memory(cfg, 1, cfg.train.seq_len, dense ? cfg.eval.stream_length : 0,
               /*training=*/false, what + " (eval.stream_length = " +
                                       std::to_string(cfg.eval.stream_length) + ")");
  stream_tokens(cfg);
}

// One row per mode of eval.stream_modes, kind "stream_<mode>": seq_len = the stream's length,
// mem_len = the tokens a prediction sees besides its own (S + R; dense: the stream before it,
// at most stream_length - 1), loss over the same targets (the bytes after the first S + R + 1),
// tokens_per_second = scored targets / wall seconds of the whole pass (shared machine: a
// comparison between the rows of one run, not a benchmark), and the loss along the stream in
// buckets of train.seq_len bytes (loss_by_stream_position). A mode the model cannot run is
// recorded with its error, as evaluate_setting does.
std::vector<nlohmann::json> evaluate_stream_rows(TransformerLM<float>& model, const Config& cfg) {
  const StreamOptions options = stream_options(cfg);
  const std::vector<std::int32_t> tokens = stream_tokens(cfg);
  std::vector<nlohmann::json> rows;
  for (const std::string& name : cfg.eval.stream_modes) {
    const StreamMode mode = stream_mode_from_name(name);
    const int S = mode == StreamMode::sinks ? options.sinks : 0;
    const int kept = mode == StreamMode::dense ? cfg.eval.stream_length - 1  // no eviction
                                               : options.sinks + options.recent;  // S + R
    const std::string positions =
        mode == StreamMode::dense || mode == StreamMode::memory ? "text"
        : mode == StreamMode::recompute                         ? "cache"
                                                                : cfg.eval.stream_positions;
    nlohmann::json row = {{"kind", "stream_" + name},
                          {"factor", 1.0},
                          {"seq_len", cfg.eval.stream_length},
                          {"mem_len", kept},
                          {"split", cfg.eval.split},
                          {"stream_sinks", S},
                          {"stream_recent", kept - S},
                          {"stream_positions", positions}};
    try {
      reset_peak_memory();
      const StreamResult r = evaluate_stream_cache(model, tokens, mode, options);
      nlohmann::json low = nlohmann::json::array(), high = nlohmann::json::array(),
                     scored = nlohmann::json::array(), loss = nlohmann::json::array();
      for (const StreamBucket& b : stream_buckets(r, cfg.train.seq_len)) {
        low.push_back(b.low);
        high.push_back(b.high);
        scored.push_back(b.tokens);
        loss.push_back(b.loss);
      }
      row.update({{"loss", r.loss},
                  {"tokens", r.tokens},
                  {"seconds", r.seconds},
                  {"tokens_per_second", double(r.tokens) / r.seconds},
                  {"peak_memory_mb", double(peak_memory_bytes()) / (1 << 20)},
                  {"loss_by_stream_position",
                   {{"low", low}, {"high", high}, {"tokens", scored}, {"loss", loss}}}});
      const std::string cache =
          mode == StreamMode::dense       ? "no eviction"
          : mode == StreamMode::recompute ? "windows of " + std::to_string(kept + 1) + " recomputed"
                                          : std::to_string(S) + " sinks + " +
                                                std::to_string(kept - S) + " recent";
      std::cout << std::fixed << std::setprecision(4) << "eval stream " << std::setw(9) << name
                << ": " << cache << ", " << positions << " positions | loss " << r.loss << " over " << r.tokens << " bytes of "
                << cfg.eval.stream_length << " | " << std::setprecision(0)
                << double(r.tokens) / r.seconds << " tokens/s" << std::endl;
    } catch (const std::exception& e) {
      row["error"] = e.what();
      row["loss"] = nullptr;
      std::cout << "eval stream " << name << ": not possible: " << e.what() << std::endl;
    }
    rows.push_back(row);
  }
  return rows;
}

// The loss by copy distance of one setting (train/copy_distance.hpp), as eval.json holds it:
// per bucket b its distances [2^b, 2^(b+1)) as distance_low/distance_high (the last bucket ends
// at the segment length), the scored copy bytes in it (`tokens`) and their mean loss (nats/byte,
// null when there are none); the same two numbers for bytes whose match continues otherwise
// (mismatch) and for bytes with no match (the reference).
nlohmann::json copy_distance_json(const CopyDistanceLoss& c, int seq_len) {
  auto mean = [](double sum, double n) { return n > 0 ? nlohmann::json(sum / n) : nlohmann::json(); };
  nlohmann::json low = nlohmann::json::array(), high = nlohmann::json::array(),
                 tokens = nlohmann::json::array(), loss = nlohmann::json::array();
  for (std::size_t b = 0; b < c.bucket_loss.size(); ++b) {
    low.push_back(1L << b);
    high.push_back(std::min(2L << b, long(seq_len)));  // exclusive
    tokens.push_back(long(c.bucket_tokens[b]));
    loss.push_back(mean(c.bucket_loss[b], c.bucket_tokens[b]));
  }
  return {{"min_match", c.min_match},
          {"distance_low", low},
          {"distance_high", high},
          {"tokens", tokens},
          {"loss", loss},
          {"mismatch_tokens", long(c.mismatch_tokens)},
          {"mismatch_loss", mean(c.mismatch_loss, c.mismatch_tokens)},
          {"no_match_tokens", long(c.no_match_tokens)},
          {"no_match_loss", mean(c.no_match_loss, c.no_match_tokens)}};
}

// Evaluates one setting. A setting the model cannot run (a learned table too short for the
// length) is recorded with its error, not dropped. peak_memory_mb is the peak resident memory of
// the process during this setting alone; tokens_per_second the scored tokens over the wall time
// of the setting's evaluation (the loss by copy distance included when eval.copy_distance is on:
// compare the rows of one study on one machine, not a benchmark).
nlohmann::json evaluate_setting(TransformerLM<float>& model, const Config& cfg,
                                const EvalSetting& s, std::vector<float>* token_losses = nullptr) {
  nlohmann::json row = {{"kind", s.kind}, {"factor", s.factor}, {"seq_len", s.seq_len},
                        {"mem_len", s.mem_len}, {"split", cfg.eval.split}};
  if (s.stride > 0) row["stride"] = s.stride;
  try {
    check_memory(cfg, evaluation_batch_size(cfg), s.seq_len, s.mem_len, /*training=*/false,
                 main_setting_name(s));
    const auto start = std::chrono::steady_clock::now();
    const auto add_speed = [&start](nlohmann::json& done) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (done.contains("tokens") && done["tokens"].is_number() && seconds > 0)
        done["tokens_per_second"] = done["tokens"].get<double>() / seconds;
      return done;
    };
    if (s.stride > 0) {
      nlohmann::json sliding = evaluate_sliding_setting(model, cfg, s, row);
      return add_speed(sliding);
    }
    auto source = evaluation_source(cfg, s);
    if (s.sample_positions)
      model.enable_randomized_positions(kEvaluationPositionSeed, cfg.train.max_position);
    std::optional<CopyDistanceLoss> copy_distance;  // eval.copy_distance
    if (cfg.eval.copy_distance) copy_distance.emplace(cfg.eval.copy_min_match, s.seq_len);
    reset_peak_memory();
    const EvalResult r = evaluate(model, *source, cfg.eval.batches, s.mem_len,
                                  cfg.memory.continue_positions, s.sample_positions, token_losses,
                                  copy_distance ? &*copy_distance : nullptr);
    const auto [low, high] = wilson_interval(r.exact_match, r.rows);
    row.update({{"loss", r.loss},
                {"accuracy", r.accuracy},
                {"exact_match", r.exact_match},
                {"exact_match_ci_low", low},
                {"exact_match_ci_high", high},
                {"instances", r.rows},
                {"tokens", r.tokens},
                {"peak_memory_mb", double(peak_memory_bytes()) / (1 << 20)},
                {"loss_by_position", r.loss_by_position}});
    if (copy_distance) row["copy_distance"] = copy_distance_json(*copy_distance, s.seq_len);
    add_speed(row);
    std::cout << std::fixed << std::setprecision(4) << "eval " << std::setw(6) << s.kind
              << " x" << std::setprecision(2) << s.factor << std::setprecision(4) << ": segment "
              << s.seq_len << ", memory " << s.mem_len << " | loss " << r.loss << " | accuracy "
              << std::setprecision(3) << r.accuracy << " | exact match " << r.exact_match
              << " over " << r.rows << " rows | " << r.tokens << " scored tokens" << std::endl;
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["loss"] = nullptr;
    std::cout << "eval " << s.kind << " x" << s.factor << ": segment " << s.seq_len
              << ", memory " << s.mem_len << " | not possible: " << e.what() << std::endl;
  }
  return row;
}

// The passkey grid (train/passkey_eval.hpp), one row per (length, depth) cell, kind "passkey":
// `exact_match` and `accuracy` teacher-forced (all 5 digits; per digit), `loss` the digits' mean
// cross-entropy, `passkey_greedy_exact_match` greedy decoding. A cell the model cannot run is
// recorded with its error, as evaluate_setting does.
nlohmann::json evaluate_passkey(TransformerLM<float>& model, const Config& cfg,
                                const PasskeyGenerator& generator, const PasskeyCell& cell) {
  const Split split = cfg.eval.split == "test" ? Split::test : Split::valid;
  nlohmann::json row = {{"kind", "passkey"},  {"factor", cell.factor},
                        {"seq_len", cell.seq_len}, {"mem_len", 0},
                        {"split", cfg.eval.split}, {"passkey_depth", cell.depth}};
  try {
    reset_peak_memory();
    const PasskeyCellResult r =
        evaluate_passkey_cell(model, generator, cell, cfg.eval.passkey_instances,
                              evaluation_batch_size(cfg), cfg.eval.passkey_seed, split);
    const auto [low, high] = wilson_interval(r.exact_match, r.instances);
    row.update({{"loss", r.loss},
                {"accuracy", r.digit_accuracy},
                {"exact_match", r.exact_match},
                {"exact_match_ci_low", low},
                {"exact_match_ci_high", high},
                {"passkey_greedy_exact_match", r.greedy_exact_match},
                {"instances", r.instances},
                {"tokens", r.instances * kPasskeyDigits},
                {"peak_memory_mb", double(peak_memory_bytes()) / (1 << 20)}});
    std::cout << std::fixed << std::setprecision(2) << "eval passkey x" << cell.factor
              << ": segment " << cell.seq_len << ", depth " << cell.depth << std::setprecision(3)
              << " | exact match " << r.exact_match << " (greedy " << r.greedy_exact_match
              << ") | digits " << r.digit_accuracy << " | over " << r.instances << " instances"
              << std::endl;
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["loss"] = nullptr;
    std::cout << "eval passkey x" << cell.factor << ": segment " << cell.seq_len << ", depth "
              << cell.depth << " | not possible: " << e.what() << std::endl;
  }
  return row;
}

// The passkey grid's instance generator, with everything that can fail checked before a model
// is built (poslab train and poslab eval --passkey): its filler split holds the longest cell's
// filler, and that cell's evaluation fits in memory. `what` names the evaluation in the error.
PasskeyGenerator checked_passkey_generator(const Config& cfg, const std::string& what) {
  PasskeyGenerator generator =
      make_passkey_generator(cfg, cfg.eval.split == "test" ? Split::test : Split::valid);
  int longest = 0;
  for (const PasskeyCell& cell : passkey_cells(cfg)) longest = std::max(longest, cell.seq_len);
  generator.check_length(longest);  // the filler grows with the length
  check_memory(cfg, evaluation_batch_size(cfg), longest, 0, /*training=*/false,
               what + " (segment " + std::to_string(longest) + ")");
  return generator;
}

// The evaluation plan of a run:
//   main    as configured (eval.seq_len, eval.mem_len)
//   gate    tasks of independent sequences: the largest instance sizes seen in training
//   length  segment train.seq_len * f for each length factor, with the trained memory. For a
//           task, each factor tests only instances longer than those of the factor before it
//           (factors taken in increasing order), so no two factors test the same sizes.
//   memory  memory train.seq_len * f for each memory factor, segment train.seq_len
//   gate_sampled, length_sampled   models trained with randomized positions: gate and length
//           again, with positions sampled at evaluation too
std::vector<EvalSetting> evaluation_plan(const Config& cfg, bool independent_rows) {
  const int L = cfg.train.seq_len;
  std::vector<EvalSetting> plan;
  plan.push_back({.kind = "main",
                  .seq_len = cfg.eval.seq_len > 0 ? cfg.eval.seq_len : L,
                  .mem_len = cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len});
  if (independent_rows)
    plan.push_back({.kind = "gate", .seq_len = L, .mem_len = cfg.memory.mem_len, .gate = true});
  std::vector<double> factors = cfg.eval.length_factors;
  std::sort(factors.begin(), factors.end());
  int longest_so_far = L;
  for (double f : factors) {
    const int len = int(std::lround(L * f));
    plan.push_back({.kind = "length", .factor = f, .seq_len = len, .mem_len = cfg.memory.mem_len,
                    .longer_than = longest_so_far});
    longest_so_far = std::max(longest_so_far, len);
  }
  for (double f : cfg.eval.memory_factors)
    plan.push_back({.kind = "memory", .factor = f, .seq_len = L,
                    .mem_len = int(std::lround(L * f))});
  // Randomized positions (Ruoss et al. 2023): the length settings once more, with positions
  // sampled from [0, train.max_position) at evaluation as well, as their reference code does.
  if (cfg.train.randomized_positions) {
    const std::size_t settings = plan.size();
    for (std::size_t i = 0; i < settings; ++i)
      if (plan[i].kind == "length" || plan[i].kind == "gate") {
        EvalSetting sampled = plan[i];
        sampled.kind += "_sampled";
        sampled.sample_positions = true;
        plan.push_back(sampled);
      }
  }
  // Sliding windows (eval.stride; language models): the main length and every length factor
  // again, read as Press et al. and Peng et al. read them, after every chunked row.
  if (cfg.eval.stride > 0) {
    const std::size_t settings = plan.size();
    for (std::size_t i = 0; i < settings; ++i)
      if (plan[i].kind == "main" || plan[i].kind == "length") {
        EvalSetting sliding = plan[i];
        sliding.kind += "_sliding";
        sliding.mem_len = 0;
        sliding.stride = cfg.eval.stride;
        plan.push_back(sliding);
      }
  }
  return plan;
}

// A directory that already holds a run (any of the files `poslab train` writes) is never written
// over silently: that would mix two runs' metrics.csv or replace a finished run's results.
// What happens instead is `existing` (ExistingRun). Called twice: before the directory is locked
// (to fail early) and with `locked` once this process holds its lock (DirectoryLock), when an
// unfinished run of the same experiment is cleared for --resume. Returns true if the run is
// already finished with this very config (--resume: nothing to do).
int outcome_of_other_trainer(const Config& cfg);

bool claim_run_directory(const Config& cfg, ExistingRun existing, bool locked = false,
                         int wait_for_trainer_seconds = 0) {
  namespace fs = std::filesystem;
  const fs::path dir(cfg.out_dir);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return false;
  // --wait-for-trainer: another process that took the run since any earlier look is waited
  // for here too, and its outcome is this call's.
  if (!locked && existing == ExistingRun::resume && wait_for_trainer_seconds > 0 &&
      wait_for_other_trainer(dir, wait_for_trainer_seconds, std::cout))
    return outcome_of_other_trainer(cfg) == 0;
  if (!locked && DirectoryLock::is_held(dir))
    throw std::runtime_error(cfg.out_dir + " is being written by another poslab process (it "
                             "holds the directory's lock); not training it twice");
  // Another machine's trainer is seen by its claim (its flock may not reach us over NFS).
  if (const std::optional<ClaimInfo> claim = read_claim(dir); claim && !locked) {
    if (claim_is_live(*claim))
      throw std::runtime_error(cfg.out_dir + " is being trained by " + claim->describe() +
                               " (its claim.json); not training it twice");
    std::cout << "poslab train: warning: " << cfg.out_dir << " has a stale claim ("
              << claim->describe() << "): its trainer is gone\n";
  }
  std::string held;
  for (const char* name : {"eval.json", "metrics.csv", "config.toml", "checkpoint"})
    if (fs::exists(fs::symlink_status(dir / name, ec)))
      held += std::string(held.empty() ? "" : ", ") + name;
  if (held.empty()) return false;  // an empty directory (or one with unrelated files) is fine
  const bool finished = fs::exists(dir / "eval.json");
  const std::string what = std::string(finished ? "a finished" : "an unfinished") + " run (" +
                           held + ")";
  switch (existing) {
    case ExistingRun::refuse:
      throw std::runtime_error(cfg.out_dir + " already holds " + what +
                               "; choose another --out, add --resume to finish (or skip) the "
                               "same experiment, or --force to move the old run aside");
    case ExistingRun::force: {
      if (locked) return false;  // moved aside before the lock was taken
      std::string stamp = utc_now();
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      const fs::path aside = dir.string() + ".replaced-" + stamp;
      fs::rename(dir, aside);
      std::cout << "poslab train: moved the old run aside to " << aside.string() << "\n";
      return false;
    }
    case ExistingRun::resume: {
      std::string difference = "it has no config.toml";
      if (fs::exists(dir / "config.toml")) {
        try {
          difference = experiment_difference(
              load_config((dir / "config.toml").string(), registered_choices()), cfg);
        } catch (const std::exception& e) {
          difference = std::string("its config.toml cannot be read: ") + e.what();
        }
      }
      if (!difference.empty())
        throw std::runtime_error(cfg.out_dir + " holds " + what + " of another experiment (" +
                                 difference + "); --resume continues only the same config: "
                                 "choose another --out, or --force to move it aside");
      if (finished) {
        std::cout << "poslab train: " << cfg.out_dir
                  << " is finished with this config (eval.json); nothing to do\n";
        return true;
      }
      if (locked && has_training_state(dir)) {  // continued from its saved state
        std::cout << "poslab train: " << cfg.out_dir
                  << " holds an unfinished run of this config with a saved training state; "
                     "continuing it\n";
      } else if (locked) {  // an unfinished run of this experiment: trained again from step 0
        for (const fs::directory_entry& entry : fs::directory_iterator(dir)) fs::remove_all(entry);
        std::cout << "poslab train: " << cfg.out_dir
                  << " held an unfinished run of this config without a saved training state; "
                     "training it again from step 0\n";
      }
      return false;
    }
  }
  return false;
}

// After waiting for another process that was training this very run (--wait-for-trainer):
// its outcome is this call's. Finished with this config: exit 0; otherwise an error, and this
// call does not train it (a Slurm dependency then sees that the run is not done).
int outcome_of_other_trainer(const Config& cfg) {
  if (claim_run_directory(cfg, ExistingRun::resume)) return 0;
  throw std::runtime_error(cfg.out_dir + ": the process that was training it ended before the "
                           "run finished (no eval.json); not training it here: export the study "
                           "again and submit what is unfinished");
}

// `poslab eval` names its file by what it reads (eval_L<seq-len>_M<mem-len>.json,
// eval_passkey.json, eval_stream.json), not by the --set it was given, and records that --set in
// the file ("overrides"). A second evaluation with other --set would replace the first one's
// numbers without a word: it is refused before anything is computed, and nothing is written.
// The same --set again replaces the file (a rerun). Files written before poslab recorded the
// --set count as made without any.
//
// The two --set are compared by what they make of the run's config (config_to_toml of each), not
// as text: the same settings reordered or respelled (0.001, 1e-3) are the same evaluation.
void refuse_to_replace(const RunDirectory& run, const std::string& name,
                       const std::vector<std::string>& overrides) {
  if (!std::filesystem::exists(run.file(name))) return;
  std::vector<std::string> before;
  try {
    before = run.read_json(name).value("overrides", std::vector<std::string>{});
  } catch (const std::exception&) {
    return;  // not an evaluation this command wrote: nothing of ours to keep
  }
  if (before == overrides) return;
  try {
    const std::string config = run.file("config.toml").string();
    if (config_to_toml(load_config(config, registered_choices(), before)) ==
        config_to_toml(load_config(config, registered_choices(), overrides)))
      return;
  } catch (const std::exception&) {
    // The earlier --set no longer loads: they cannot be the same; refused below.
  }
  auto described = [](const std::vector<std::string>& sets) {
    std::string text;
    for (const std::string& s : sets) text += " --set " + s;
    return sets.empty() ? std::string(" no --set") : text;
  };
  throw std::runtime_error(
      run.file(name).string() + " holds an evaluation made with" + described(before) +
      "; this one has" + described(overrides) +
      ", so it would replace those numbers: nothing computed, nothing written. Move that file "
      "away first, or evaluate a copy of the run directory");
}

}  // namespace

int run_train(const Config& cfg, ExistingRun existing, int wait_for_trainer_seconds) {
  const bool wait = existing == ExistingRun::resume && wait_for_trainer_seconds > 0;
  // --resume of a finished run (or, with --wait-for-trainer, one another process finished
  // while this one waited): nothing to do, and nothing to load.
  if (existing == ExistingRun::resume &&
      claim_run_directory(cfg, existing, false, wait ? wait_for_trainer_seconds : 0))
    return 0;
  const std::string started = utc_now();
  const std::string threads_from = set_threads(cfg.train.threads);
  const int L = cfg.train.seq_len;
  // Everything that can fail on bad input happens before the run directory is created: sizes
  // the machine cannot hold, data too short for the lengths, then the model itself.
  check_memory(cfg, cfg.train.batch_size, L, cfg.memory.mem_len, /*training=*/true,
               "training (train.batch_size = " + std::to_string(cfg.train.batch_size) +
                   ", train.seq_len = " + std::to_string(L) +
                   ", memory.mem_len = " + std::to_string(cfg.memory.mem_len) + ")");
  auto train_source = make_batch_source(cfg, SourceSpec{.split = Split::train, .len = L});
  auto valid_source = make_batch_source(cfg, SourceSpec{.split = Split::valid, .len = L});
  const bool independent_rows = dynamic_cast<const InstanceBatcher*>(train_source.get()) != nullptr;
  // The main evaluation decides the run's result (eval.json's loss): it must be possible too.
  const EvalSetting main_setting = evaluation_plan(cfg, independent_rows).front();
  check_memory(cfg, evaluation_batch_size(cfg), main_setting.seq_len, main_setting.mem_len,
               /*training=*/false, main_setting_name(main_setting));
  evaluation_source(cfg, main_setting);  // throws if the split is too short for eval.seq_len
  check_stream_memory(cfg, "the streaming evaluation");  // and the stream, if there is one
  // The passkey grid: its filler split holds every length's filler, and the longest fits.
  std::optional<PasskeyGenerator> passkey;
  if (!cfg.eval.passkey_length_factors.empty())
    passkey = checked_passkey_generator(cfg, "the passkey evaluation");
  // The passkey curve read during training (train.eval_passkey_instances) reads the same grid
  // on the validation split, whatever eval.split says: its filler is checked here too.
  std::optional<PasskeyGenerator> curve_generator;
  if (cfg.train.eval_passkey_instances > 0) {
    curve_generator = make_passkey_generator(cfg, Split::valid);
    for (const PasskeyCell& cell : passkey_cells(cfg)) curve_generator->check_length(cell.seq_len);
  }
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  // Fine-tuning (train/init_from.hpp): the parent is checked and loaded here, before anything is
  // written, so a parameter of another shape is refused with nothing to clean up. A child that
  // continues from its own saved state (--resume) takes the record it wrote when it started and
  // does not read the parent again: the saved state holds its parameters and moments.
  std::optional<ParentRun> parent;
  bool parent_recorded = false;
  if (!cfg.train.init_from.empty()) {
    const std::filesystem::path dir(cfg.out_dir);
    parent_recorded = existing == ExistingRun::resume && has_training_state(dir) &&
                      std::filesystem::exists(dir / kParentRecordFile);
    parent = parent_recorded ? read_parent_record(dir) : initialize_from_parent(cfg, model);
  }
  double unigram = std::nan(""), bigram = std::nan("");
  std::string corpus_description;
  if (cfg.task.name == "lm") {
    const CorpusSplit data = load_data(cfg);
    const std::vector<std::int32_t>& held_out = evaluation_tokens(data, cfg);
    if (held_out.empty())
      throw std::runtime_error("eval.split = \"" + cfg.eval.split + "\" but the corpus " +
                               cfg.data.path + " has no such split (set data.test_fraction)");
    unigram = unigram_cross_entropy(data.train, held_out, cfg.model.vocab_size);
    bigram = bigram_cross_entropy(data.train, held_out, cfg.model.vocab_size);
    corpus_description = describe_corpus(data);
  }

  // --resume of a finished run
  if (claim_run_directory(cfg, existing, false, wait ? wait_for_trainer_seconds : 0)) return 0;
  RunDirectory run = RunDirectory::create(cfg.out_dir);
  // One writer per run directory, for as long as this process lives. Checked again under the
  // lock: another `poslab train` may have taken the directory since claim_run_directory looked.
  std::optional<DirectoryLock> lock = DirectoryLock::try_lock(run.path());
  if (!lock && wait) {  // another trainer took it since the first look
    wait_for_other_trainer(cfg.out_dir, wait_for_trainer_seconds, std::cout);
    return outcome_of_other_trainer(cfg);
  }
  if (!lock)
    throw std::runtime_error(cfg.out_dir + " is being written by another poslab process (it "
                             "holds the directory's lock); not training it twice");
  if (claim_run_directory(cfg, existing, /*locked=*/true)) return 0;
  const RunClaim claim(run.path());  // claim.json, with a heartbeat, until this run ends
  run.write_text("config.toml", config_to_toml(cfg));
  const Provenance provenance = collect_provenance(threads_from);
  std::cout << "poslab train: " << model.arena().count() << " parameters, task '"
            << cfg.task.name << "', encoding '" << cfg.encoding.type << "', memory "
            << cfg.memory.mem_len << "\n  writing to " << run.path().string() << "\n  poslab "
            << provenance.poslab_version << " at " << provenance.commit << ", "
            << provenance.threads << " threads (" << provenance.threads_from << ")\n";
  if (!corpus_description.empty()) std::cout << "  " << corpus_description << "\n";
  if (parent) {
    if (!parent_recorded || !std::filesystem::exists(run.file(kParentRecordFile)))
      run.write_json(kParentRecordFile, parent->to_json());
    std::cout << "  fine-tuning from " << parent->path << " (" << parent->encoding << ", segment "
              << parent->seq_len << ", " << parent->steps << " steps; checkpoint sha256 "
              << parent->checkpoint_sha256.substr(0, 12) << "...), optimizer "
              << (parent->optimizer ? "continued from its Adam moments" : "fresh") << "\n";
  }

  // SIGTERM (Slurm's warning before the time limit, `poslab run` stopping) or SIGINT: the step
  // in progress ends, the training state is saved, and `--resume` continues from it.
  install_stop_handler();
  const Resumable resumable{.run_dir = run.path(),
                            .save_every = cfg.train.save_state_every,
                            .from_saved_state = has_training_state(run.path()),
                            .threads = provenance.threads};
  if (resumable.from_saved_state)  // the rows after the saved step are logged again
    drop_metrics_after(run.file("metrics.csv"), saved_steps_done(run.path()));
  MetricsLog metrics = run.metrics(training_metrics_columns());
  std::optional<PasskeyCurve> curve;
  std::function<void(int)> read_curve;
  double curve_seconds = 0;
  if (curve_generator) {
    curve.emplace(cfg, run.path(), std::move(*curve_generator),
                  resumable.from_saved_state ? saved_steps_done(run.path()) : 0);
    read_curve = [&](int step) {
      const auto begin = std::chrono::steady_clock::now();
      const std::vector<PasskeyCellResult> cells = curve->read(model, step);
      curve_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      std::cout << "  passkey (validation, " << cfg.train.eval_passkey_instances
                << " per cell) at step " << step << ", exact match by length:";
      for (std::size_t i = 0; i < cells.size();) {  // the mean over each length's depths
        double sum = 0;
        std::size_t n = 0;
        for (; i + n < cells.size() && cells[i + n].seq_len == cells[i].seq_len; ++n)
          sum += cells[i + n].exact_match;
        std::cout << " " << cells[i].seq_len << ": " << std::fixed << std::setprecision(2)
                  << sum / double(n);
        i += n;
      }
      std::cout << std::endl;
    };
  }
  TrainReport report;
  nlohmann::json evaluations = nlohmann::json::array();
  try {
    const OptimizerStart optimizer{
        .moment_steps_before = parent && parent->optimizer ? parent->steps : 0};
    report = train_model(model, cfg, *train_source, valid_source.get(), &metrics, std::cout,
                         &resumable, optimizer, read_curve);
    if (curve)
      std::cout << std::fixed << std::setprecision(1) << "passkey curve: " << curve_seconds
                << " s of reads in " << report.seconds << " s of training ("
                << run.file(PasskeyCurve::kFile).string() << ")" << std::endl;
    // Between two evaluations, a stop request saves the trained model, then stops.
    auto stop_if_requested = [&] {
      if (const int signal = stop_requested()) {
        save_training_state(run.path(), model,
                            TrainingProgress{.steps_done = cfg.train.steps,
                                             .logged_loss = report.final_train_loss,
                                             .elapsed_seconds = report.seconds,
                                             .threads = provenance.threads});
        throw TrainingInterrupted(signal, cfg.train.steps,
                                  std::string(strsignal(signal)) + " while evaluating; the "
                                  "trained model is saved in " + run.file("resume").string());
      }
    };
    for (const EvalSetting& setting : evaluation_plan(cfg, independent_rows)) {
      stop_if_requested();
      evaluations.push_back(evaluate_setting(model, cfg, setting));
    }
    if (passkey)
      for (const PasskeyCell& cell : passkey_cells(cfg)) {
        stop_if_requested();
        evaluations.push_back(evaluate_passkey(model, cfg, *passkey, cell));
      }
    if (cfg.eval.stream_length > 0) {
      stop_if_requested();
      for (nlohmann::json& row : evaluate_stream_rows(model, cfg)) evaluations.push_back(row);
    }
  } catch (const TrainingInterrupted& stopped) {
    std::cout << "poslab train: stopped: " << stopped.what() << "\ncontinue with: poslab train "
              << "--config " << run.file("config.toml").string() << " --resume\n";
    return 128 + stopped.signal;  // the shell's code for "ended by this signal"
  }

  // The in-distribution gate: did the model learn what it was trained on?
  // A model trained on randomized positions is gated where it was trained: with sampled ones.
  nlohmann::json gate = nullptr;
  const std::string gate_kind = cfg.train.randomized_positions ? "gate_sampled" : "gate";
  for (const nlohmann::json& e : evaluations)
    if (e["kind"] == gate_kind && e["loss"].is_number())
      gate = e["exact_match"].get<double>() >= cfg.eval.gate_threshold;
  if (!std::isnan(bigram) && evaluations[0]["loss"].is_number())
    gate = evaluations[0]["loss"].get<double>() < bigram;

  const nlohmann::json& main_eval = evaluations[0];
  // The setting was checked before the run started; a NaN loss (a broken model, no scored
  // token) is found only now. nlohmann::json keeps a NaN as a number and writes it as null.
  if (!main_eval["loss"].is_number() || !std::isfinite(main_eval["loss"].get<double>()))
    throw std::runtime_error("the main evaluation gave no loss" +
                             (main_eval.contains("error")
                                  ? ": " + main_eval["error"].get<std::string>()
                                  : std::string(" (NaN): the model is broken")) +
                             "; the run in " + cfg.out_dir + " is left unfinished");
  save_checkpoint(run.path(), model.arena());
  save_optimizer_state(run.path(), model.arena());  // for children with train.init_optimizer
  nlohmann::json result = {{"loss", main_eval["loss"]},
                           {"accuracy", main_eval.value("accuracy", 0.0)},
                           {"exact_match", main_eval.value("exact_match", 0.0)},
                           {"in_distribution_ok", gate},
                           {"train_loss", report.final_train_loss},
                           {"train_tokens_per_second", report.tokens_per_second},
                           {"train_seconds", report.seconds},
                           {"steps", report.steps},
                           {"parameters", model.arena().count()},
                           {"encoding", cfg.encoding.type},
                           {"task", cfg.task.name},
                           {"evaluations", evaluations},
                           {"provenance",
                            {{"poslab_version", provenance.poslab_version},
                             {"commit", provenance.commit},
                             {"compiler", provenance.compiler},
                             {"flags", provenance.flags},
                             {"blas", provenance.blas},
                             {"threads", provenance.threads},
                             {"threads_from", provenance.threads_from},
                             {"host", provenance.host},
                             {"cpu", provenance.cpu},
                             {"started", started},
                             {"finished", utc_now()}}}};
  if (!std::isnan(unigram)) result["unigram_loss"] = unigram;
  if (!std::isnan(bigram)) result["bigram_loss"] = bigram;
  if (!corpus_description.empty()) result["corpus"] = corpus_description;
  if (parent) {  // fine-tuned: from which run, exactly
    result["fine_tuned_from"] = parent->path;
    result["provenance"]["init_from"] = parent->to_json();
  }
  run.write_json("eval.json", result);  // written last: marks the run as finished
  remove_training_state(run.path());     // checkpoint/ holds the trained parameters
  if (!std::isnan(unigram) && main_eval["loss"].is_number())
    std::cout << std::fixed << std::setprecision(4) << "evaluation loss ("
              << cfg.eval.split << ") " << main_eval["loss"].get<double>() << " nats/byte = "
              << main_eval["loss"].get<double>() / std::log(2.0)
              << " bits/byte; unigram baseline " << unigram << ", bigram baseline " << bigram
              << " nats/byte\n";
  std::cout << "trained " << report.steps << " steps in " << std::setprecision(1)
            << report.seconds << " s (" << std::setprecision(0) << report.tokens_per_second
            << " tokens/s)\n";
  return 0;
}

namespace {

// The key an override sets: "eval.length_factors" of "eval.length_factors=[1, 2]".
std::string override_key(const std::string& override_text) {
  std::string key = override_text.substr(0, override_text.find('='));
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!key.empty() && blank(key.back())) key.pop_back();
  while (!key.empty() && blank(key.front())) key.erase(key.begin());
  return key;
}

// `poslab eval` computes one kind of evaluation; a --set it would not read is refused, naming it,
// before anything is computed (issue 51: `--set eval.length_factors=[1,2,8192]` was ignored and
// the command evaluated the training length alone, exit 0). The keys no eval command reads:
// the optimizer's and the training schedule's. The eval.* keys: each command reads its own.
void refuse_unused_overrides(const std::string& command, const std::vector<std::string>& overrides,
                             const std::vector<std::string>& eval_keys_read) {
  static const std::vector<std::string> training_only = {
      "train.steps",         "train.lr",          "train.min_lr_ratio",   "train.warmup_steps",
      "train.weight_decay",  "train.beta1",       "train.beta2",          "train.eps",
      "train.grad_clip",     "train.log_every",   "train.eval_every",     "train.eval_batches",
      "train.save_state_every", "train.init_from", "train.init_optimizer",
      "train.passkey_fraction"};
  auto among = [](const std::string& key, const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  for (const std::string& o : overrides) {
    const std::string key = override_key(o);
    if (among(key, training_only))
      throw std::invalid_argument(command + " --set " + key + ": a training setting, which " +
                                  command + " does not read (nothing was evaluated)");
    if (key.rfind("eval.", 0) == 0 && !among(key, eval_keys_read)) {
      std::string read;
      for (const std::string& k : eval_keys_read) read += (read.empty() ? "" : ", ") + k;
      std::string hint;
      if (key == "eval.length_factors" || key == "eval.memory_factors" || key == "eval.stride")
        hint = "; evaluate each length with --seq-len N (and memory with --mem-len M)";
      else if (key.rfind("eval.passkey_", 0) == 0)
        hint = "; the passkey grid is evaluated by `poslab eval --run DIR --passkey`";
      else if (key.rfind("eval.stream_", 0) == 0)
        hint = "; the streaming evaluation is `poslab eval --run DIR --stream`";
      throw std::invalid_argument(command + " --set " + key + ": not read by this evaluation, "
                                  "which reads " + read + hint + " (nothing was evaluated)");
    }
  }
}

// The eval.* keys each kind of `poslab eval` reads (besides the model, data and encoding).
const std::vector<std::string> kChunkedEvalKeys = {
    "eval.seq_len", "eval.mem_len", "eval.batches", "eval.split", "eval.batch_size",
    "eval.copy_distance", "eval.copy_min_match"};
const std::vector<std::string> kPasskeyEvalKeys = {
    "eval.split", "eval.passkey_length_factors", "eval.passkey_depths",
    "eval.passkey_instances", "eval.passkey_filler", "eval.passkey_format", "eval.passkey_seed"};
const std::vector<std::string> kStreamEvalKeys = {
    "eval.split", "eval.stream_length", "eval.stream_sinks", "eval.stream_recent",
    "eval.stream_positions", "eval.stream_modes", "eval.gate_threshold"};

}  // namespace

int run_eval(const std::string& run_dir, const std::vector<std::string>& overrides, int seq_len,
             int mem_len, const std::string& token_losses_file) {
  refuse_unused_overrides("poslab eval", overrides, kChunkedEvalKeys);
  RunDirectory run = RunDirectory::open(run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), registered_choices(), overrides);
  set_threads(cfg.train.threads);
  // Defaults: the run's own main evaluation setting.
  const int L = seq_len > 0 ? seq_len : (cfg.eval.seq_len > 0 ? cfg.eval.seq_len : cfg.train.seq_len);
  const int M = mem_len >= 0 ? mem_len : (cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len);
  const std::string name = "eval_L" + std::to_string(L) + "_M" + std::to_string(M) + ".json";
  refuse_to_replace(run, name, overrides);
  check_memory(cfg, evaluation_batch_size(cfg), L, M, /*training=*/false,
               "evaluating " + run_dir + " (segment " + std::to_string(L) + ", memory " +
                   std::to_string(M) + ")");
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  std::vector<float> token_losses;
  nlohmann::json result =
      evaluate_setting(model, cfg, EvalSetting{.kind = "main", .seq_len = L, .mem_len = M},
                       token_losses_file.empty() ? nullptr : &token_losses);
  // A setting that cannot be evaluated is an error of this command: nothing is written.
  if (result.contains("error"))
    throw std::runtime_error("eval --run " + run_dir + " at segment " + std::to_string(L) +
                             ", memory " + std::to_string(M) + ": " +
                             result["error"].get<std::string>());
  result["overrides"] = overrides;
  run.write_json(name, result);
  std::cout << "wrote " << run.file(name).string() << "\n";
  if (!token_losses_file.empty()) {
    const xt::xtensor<float, 1> losses = xt::adapt(token_losses, {token_losses.size()});
    write_file_atomically(token_losses_file, xt::dump_npy(losses));
    std::cout << "wrote " << token_losses_file << " (" << token_losses.size()
              << " token losses, float32)\n";
  }
  return 0;
}

int run_eval_stream(const std::string& run_dir, const std::vector<std::string>& overrides) {
  refuse_unused_overrides("poslab eval --stream", overrides, kStreamEvalKeys);
  RunDirectory run = RunDirectory::open(run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), registered_choices(), overrides);
  if (cfg.eval.stream_length == 0)
    throw std::runtime_error("eval --run " + run_dir + " --stream: eval.stream_length is 0 in "
                             "the run's config; give the stream's length with --set, e.g. "
                             "--set eval.stream_length=" + std::to_string(100 * cfg.train.seq_len));
  refuse_to_replace(run, "eval_stream.json", overrides);
  set_threads(cfg.train.threads);
  check_stream_memory(cfg, "the streaming evaluation of " + run_dir);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  const std::vector<nlohmann::json> rows = evaluate_stream_rows(model, cfg);
  for (const nlohmann::json& row : rows)  // a mode that cannot run is this command's error
    if (row.contains("error"))
      throw std::runtime_error("eval --run " + run_dir + " --stream, mode " +
                               row["kind"].get<std::string>() + ": " +
                               row["error"].get<std::string>());
  // eval_stream.csv: the loss along the stream, one line per mode and bucket.
  std::string csv = "kind,stream_sinks,stream_recent,stream_positions,position_low,"
                    "position_high,tokens,loss\n";
  for (const nlohmann::json& row : rows) {
    const nlohmann::json& b = row["loss_by_stream_position"];
    for (std::size_t i = 0; i < b["low"].size(); ++i) {
      std::ostringstream line;
      line << std::setprecision(9) << row["kind"].get<std::string>() << ","
           << row["stream_sinks"].get<int>() << "," << row["stream_recent"].get<int>() << ","
           << row["stream_positions"].get<std::string>() << "," << b["low"][i].get<long>()
           << "," << b["high"][i].get<long>() << "," << b["tokens"][i].get<long>() << ","
           << b["loss"][i].get<double>() << "\n";
      csv += line.str();
    }
  }
  run.write_json("eval_stream.json", {{"evaluations", rows}, {"overrides", overrides}});
  write_file_atomically(run.file("eval_stream.csv"), csv);
  std::cout << "wrote " << run.file("eval_stream.json").string() << " and "
            << run.file("eval_stream.csv").string() << " (" << rows.size() << " modes)\n";
  return 0;
}

int run_eval_passkey(const std::string& run_dir, const std::vector<std::string>& overrides) {
  refuse_unused_overrides("poslab eval --passkey", overrides, kPasskeyEvalKeys);
  RunDirectory run = RunDirectory::open(run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), registered_choices(), overrides);
  if (cfg.eval.passkey_length_factors.empty())
    throw std::runtime_error("eval --run " + run_dir + " --passkey: eval.passkey_length_factors "
                             "is empty in the run's config; give the grid with --set, e.g. "
                             "--set 'eval.passkey_length_factors=[2, 4]'");
  refuse_to_replace(run, "eval_passkey.json", overrides);
  set_threads(cfg.train.threads);
  const PasskeyGenerator generator =
      checked_passkey_generator(cfg, "the passkey evaluation of " + run_dir);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  nlohmann::json rows = nlohmann::json::array();
  for (const PasskeyCell& cell : passkey_cells(cfg))
    rows.push_back(evaluate_passkey(model, cfg, generator, cell));
  run.write_json("eval_passkey.json", {{"evaluations", rows}, {"overrides", overrides}});
  std::cout << "wrote " << run.file("eval_passkey.json").string() << " (" << rows.size()
            << " cells)\n";
  return 0;
}

}  // namespace poslab
