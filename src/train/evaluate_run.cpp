// The evaluations of a finished run (`poslab eval`): its config and checkpoint read back, one
// mode evaluated (eval/), its rows written beside the run's own (run.hpp says how a run is made).
#include "train/evaluate_run.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include "config/load.hpp"
#include "core/blas.hpp"
#include "eval/chunked.hpp"
#include "eval/memory_estimate.hpp"
#include "eval/passkey_eval.hpp"
#include "eval/rows.hpp"
#include "eval/streaming_cache.hpp"
#include "model/transformer.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {


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
                       std::cout, token_losses_file.empty() ? nullptr : &token_losses);
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
  const std::vector<nlohmann::json> rows = evaluate_stream_rows(model, cfg, std::cout);
  for (const nlohmann::json& row : rows)  // a mode that cannot run is this command's error
    if (row.contains("error"))
      throw std::runtime_error("eval --run " + run_dir + " --stream, mode " +
                               row["kind"].get<std::string>() + ": " +
                               row["error"].get<std::string>());
  const std::string csv = stream_rows_csv(rows);  // the loss along the stream
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
    rows.push_back(evaluate_passkey(model, cfg, generator, cell, std::cout));
  run.write_json("eval_passkey.json", {{"evaluations", rows}, {"overrides", overrides}});
  std::cout << "wrote " << run.file("eval_passkey.json").string() << " (" << rows.size()
            << " cells)\n";
  return 0;
}

}  // namespace poslab
