// `poslab sinks`: the attention-sink diagnostic of a trained run (eval/sink_diagnostic.hpp):
// the mass of every layer's and head's attention on the first key, over windows of a split.
//
//   poslab sinks --run runs/rope64 --windows 100
//
// What it does, step by step:
//   1. Reads RUN/config.toml and RUN/checkpoint/ (the model exactly as trained).
//   2. Takes the split (--split, default the run's eval.split) as one stream of bytes and cuts
//      its first W * window bytes into W windows (--windows, --window, default train.seq_len).
//   3. Reads each window as a fresh segment at positions 0..window-1 (a model with a sink token,
//      model.sink_token: [SINK, window] at 0..window, key 0 the sink) and averages, per layer,
//      head and query, the weight on key 0 (sink_diagnostic.hpp has the formulas).
//
// Output, in --out (default RUN/sinks/):
//   sink_heads.csv    one line per (layer, head): first_key_mass, uniform_mass, ratio, sink
//                     (first_key_mass >= --threshold), over queries [first_query, window)
//   sink_profile.csv  one line per (layer, head, query): first_key_mass a(i), uniform u(i)
//   sinks.json        the settings, the run's model and encoding, and the heads' summaries
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "train/run_sinks.hpp"

#include "config/load.hpp"
#include "core/blas.hpp"
#include "model/transformer.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "eval/sink_diagnostic.hpp"
#include "train/train.hpp"

namespace poslab {

int run_sinks(const SinksOptions& options, std::ostream& out) {
  RunDirectory run = RunDirectory::open(options.run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), registered_choices());
  require_checkpoint(run.path(), run.path().string());
  const std::string split_name = options.split.empty() ? cfg.eval.split : options.split;
  if (split_name != "valid" && split_name != "test")
    throw std::runtime_error("--split: expected valid or test, got '" + split_name + "'");
  if (options.threshold <= 0 || options.threshold > 1)
    throw std::runtime_error("--threshold: expected a mass in (0, 1], got " +
                             std::to_string(options.threshold));
  set_threads(1);  // short windows: threads would cost more than they save

  SinkDiagnosticOptions o;
  o.window = options.window > 0 ? options.window : cfg.train.seq_len;
  o.windows = options.windows;
  o.first_query = options.first_query;
  const auto tokens = corpus_split_tokens(cfg, split_name == "test" ? Split::test : Split::valid);

  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  const SinkDiagnostic d = attention_sink_diagnostic(model, *tokens, o);

  // sink_heads.csv and sink_profile.csv
  std::ostringstream heads, profile;
  heads << std::setprecision(9)
        << "layer,head,first_key_mass,uniform_mass,ratio,sink,window,first_query,windows\n";
  profile << std::setprecision(9) << "layer,head,query,first_key_mass,uniform_mass\n";
  nlohmann::json head_rows = nlohmann::json::array();
  int sinks = 0;
  for (int n = 0; n < d.layers; ++n)
    for (int h = 0; h < d.heads; ++h) {
      const double mass = d.first_key_mass[n][h];
      const bool sink = mass >= options.threshold;
      sinks += sink;
      heads << n << "," << h << "," << mass << "," << d.uniform_mass << ","
            << mass / d.uniform_mass << "," << (sink ? "true" : "false") << "," << d.window << ","
            << d.first_query << "," << d.windows << "\n";
      for (int i = 0; i < d.window; ++i)
        profile << n << "," << h << "," << i << "," << d.profile[n][h][i] << ","
                << d.uniform[i] << "\n";
      head_rows.push_back({{"layer", n},
                           {"head", h},
                           {"first_key_mass", mass},
                           {"ratio", mass / d.uniform_mass},
                           {"sink", sink}});
    }

  const std::filesystem::path dir =
      options.out_dir.empty() ? run.path() / "sinks" : std::filesystem::path(options.out_dir);
  std::filesystem::create_directories(dir);
  write_file_atomically(dir / "sink_heads.csv", heads.str());
  write_file_atomically(dir / "sink_profile.csv", profile.str());
  const nlohmann::json info = {
      {"run", run.path().string()},
      {"encoding", cfg.encoding.type},
      {"n_layers", d.layers},
      {"n_heads", d.heads},
      {"sink_logit", cfg.model.sink_logit},
      {"sink_token", cfg.model.sink_token},  // then key 0 is the prepended sink token
      {"train_seq_len", cfg.train.seq_len},
      {"split", split_name},
      {"window", d.window},
      {"windows", d.windows},
      {"first_query", d.first_query},
      {"uniform_mass", d.uniform_mass},
      {"threshold", options.threshold},
      {"sink_heads", sinks},
      {"heads", head_rows},
  };
  write_file_atomically(dir / "sinks.json", info.dump(2) + "\n");

  out << "poslab sinks: '" << cfg.encoding.type << "', " << d.layers << " layers x " << d.heads
      << " heads; " << d.windows << " windows of " << d.window << " bytes of the " << split_name
      << " split, queries " << d.first_query << ".." << d.window - 1
      << (cfg.model.sink_token ? " (each window read as [SINK, window]: key 0 is the sink token)"
                               : "")
      << "\n"
      << std::fixed << std::setprecision(3);
  for (int n = 0; n < d.layers; ++n) {
    out << "  layer " << n << ": mass on key 0 by head";
    for (int h = 0; h < d.heads; ++h) out << " " << d.first_key_mass[n][h];
    out << "\n";
  }
  out << "  uniform attention: " << d.uniform_mass << "; heads with mass >= " << options.threshold
      << ": " << sinks << " of " << d.layers * d.heads << "\n  wrote "
      << (dir / "sink_heads.csv").string() << ", sink_profile.csv, sinks.json\n";
  return 0;
}

}  // namespace poslab
