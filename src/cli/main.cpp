// `poslab`, the command line. This file only parses arguments and reports errors; the work of
// each subcommand is elsewhere: train/run.hpp (train), train/evaluate_run.hpp (eval),
// train/longrope_search_run.hpp (longrope-search), train/run_sinks.hpp (sinks), commands.hpp
// (the others), except `encodings` and `tasks`, which are listings of the registries and live
// here.
//
//   poslab train --config experiments/quickstart.toml --set encoding.type=shaw --out runs/shaw
//   poslab eval --run runs/shaw --seq-len 256
//   poslab bench --steps 20 --set model.d_model=256
//   poslab encodings
//   poslab encodings --describe rope --set encoding.scaling=yarn --set encoding.factor=4 ...
//   poslab tasks
//   poslab run experiments/state_reuse.toml --jobs 2
//   poslab plot results/state_reuse
//   poslab attention --run runs/quickstart --input "hello world" --mem-text "once upon a time"
//   poslab sinks --run runs/rope64 --windows 100
//   poslab report results/xl_terms
//   poslab explore runs/sinusoidal runs/alibi --out runs/explorer
//   poslab longrope-search --run runs/rope64 --target 256 --out runs/rope64_longrope256
//
// Exit codes: 0 success, 1 an error while running (a bad config, a missing file: one line
// "poslab: error: ..." on stderr), 2 a usage error (an unknown option, a missing argument).
// A config is loaded and checked completely before a subcommand starts, so a config error
// never leaves a half-made run directory behind.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "config/load.hpp"
#include "config/toml_text.hpp"
#include "encodings/log_n_scaling.hpp"
#include "encodings/registry.hpp"
#include "nn/inference_scratch.hpp"
#include "tasks/task.hpp"
#include "study/runner.hpp"
#include "train/evaluate_run.hpp"
#include "train/longrope_search_run.hpp"
#include "train/registered_choices.hpp"
#include "train/run.hpp"
#include "train/run_sinks.hpp"

namespace poslab {
namespace {

// ---------------------------------------------------------------------------------------------
// `poslab encodings`
// ---------------------------------------------------------------------------------------------

std::string format_number(double x) {
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
}

// "integer in [1, 1024]", "float >= 0", "string, one of sum, concat", "boolean".
std::string describe_values(const OptionSpec& o) {
  std::string text = option_type_name(o.default_value);
  if (!o.choices.empty()) {
    text += ", one of";
    for (std::size_t i = 0; i < o.choices.size(); ++i) text += (i ? ", " : " ") + o.choices[i];
    return text;
  }
  const bool has_min = std::isfinite(o.min), has_max = std::isfinite(o.max);
  if (has_min && has_max) return text + " in [" + format_number(o.min) + ", " + format_number(o.max) + "]";
  if (has_min) return text + " >= " + format_number(o.min);
  if (has_max) return text + " <= " + format_number(o.max);
  return text;
}

// The options of an encoding or a task, as both listings print them:
//   options:
//     KEY = DEFAULT    (TYPE, RANGE)
//         HELP
// or "  options: none".
void print_options(std::ostream& out, const std::vector<OptionSpec>& options) {
  if (options.empty()) {
    out << "  options: none\n";
    return;
  }
  out << "  options:\n";
  for (const OptionSpec& o : options) {
    out << "    " << o.key << " = " << option_to_string(o.default_value) << "    ("
        << describe_values(o) << ")\n";
    if (!o.help.empty()) out << "        " << o.help << "\n";
  }
}

int list_encodings(std::ostream& out) {
  out << "Positional encodings (choose one with `[encoding] type = \"NAME\"` in a config, or\n"
         "--set encoding.type=NAME; set its options as `encoding.OPTION`):\n";
  // The options every encoding has (registry.cpp) are listed once, after the encodings.
  const std::vector<OptionSpec> shared = log_n_options();
  auto is_shared = [&shared](const OptionSpec& o) {
    return std::any_of(shared.begin(), shared.end(), [&o](const OptionSpec& s) { return s.key == o.key; });
  };
  for (const EncodingInfo& e : registered_encodings()) {
    out << "\n" << e.name << "  (" << family_name(e.family) << ")  " << e.paper << "\n";
    out << "  " << e.description << "\n";
    std::vector<OptionSpec> own;
    for (const OptionSpec& o : e.options)
      if (!is_shared(o)) own.push_back(o);
    print_options(out, own);
  }
  out << "\nEvery encoding also has (docs/05, \"Log-n scaling\"):\n";
  print_options(out, shared);
  return 0;
}

// `poslab tasks`: what a run can be trained and evaluated on (tasks/task.hpp).
int list_tasks(std::ostream& out) {
  out << "Tasks (choose one with `[task] name = \"NAME\"` in a config, or --set task.name=NAME;\n"
         "set its options as `task.OPTION`). Generated tasks score only their answer tokens.\n";
  for (const TaskInfo& t : registered_tasks()) {
    out << "\n" << t.name << "\n  " << t.description << "\n  layout: " << t.layout << "\n";
    print_options(out, t.options);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The command line
// ---------------------------------------------------------------------------------------------

// Everything the subcommands can be given.
struct Arguments {
  std::string config_path;
  std::vector<std::string> overrides;  // --set, in order
  std::string out_dir;
  std::string run_dir;
  int seq_len = 0;   // eval: 0 = as the run was configured
  int mem_len = -1;  // eval: -1 = as the run was configured
  int steps = 20;    // bench
  int compare_mem_len = -1;  // bench --compare: -1 = off
  std::vector<int> reuse_attn_lens;  // bench --reuse: attention lengths
  long reuse_targets = 64;           // bench --reuse: scored tokens per measurement
  std::string csv_path;              // bench --reuse, --scaling: where to write the table
  std::vector<int> eval_memory_lens;  // bench --eval-memory: memory lengths
  std::string eval_memory_path = "inference";  // bench --eval-memory-path
  double eval_memory_budget_mb = kInferenceScoreBudgetBytes / (1 << 20);  // --eval-memory-budget
  std::vector<int> scaling_segments; // bench --scaling: segment lengths
  int scaling_tokens = 1024;         // bench --scaling: batch x segment
  bool force = false;                // train: move an existing run aside
  bool resume = false;               // train: finish (or skip) the same experiment
  int wait_for_trainer_seconds = 0;  // train --resume: wait for another trainer of the run
  std::string init_from;             // train: a finished run to start from (train.init_from)
  bool init_optimizer = false;       // train: with its Adam moments (train.init_optimizer)
  std::string token_losses_file;     // eval: per-token losses (.npy)
  bool passkey = false;              // eval: the passkey grid instead of one setting
  bool stream = false;               // eval: the streaming cache's modes instead
  std::string describe;              // encodings --describe: the encoding
  long describe_length = 0;          // encodings --length: keys of the call (0: the config's)
  bool describe_csv = false;         // encodings --csv
};

void add_overrides(CLI::App* command, Arguments& args) {
  command
      ->add_option("--set", args.overrides,
                   "Override one config key, applied after the file (repeatable). The value is "
                   "read as TOML; plain words are strings: --set encoding.type=shaw")
      ->type_name("SECTION.KEY=VALUE")
      ->expected(1)
      ->allow_extra_args(false)  // one KEY=VALUE per --set
      ->take_all();
}

// A training started by `poslab run` dies with it (see kRunnerPidVariable in study/runner.hpp).
void die_with_runner() {
  const char* runner = std::getenv(kRunnerPidVariable);
  if (!runner) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The runner may have died before the line above: then our parent is someone else already.
  if (std::to_string(::getppid()) != runner)
    throw std::runtime_error("the `poslab run` that started this training (pid " +
                             std::string(runner) + ") has exited; not training");
}

// Reports a config or runtime error as one line; exit code 1. A message quotes what the user
// wrote (`--set KEY=VALUE`, a path), which may hold a line break: control characters are
// written as escapes (\n, \x01), so that the error stays on one line.
int report_error(const std::string& message) {
  std::string line;
  for (unsigned char c : message) {
    if (c == '\n') line += "\\n";
    else if (c == '\r') line += "\\r";
    else if (c == '\t') line += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\x%02x", c);
      line += code;
    } else line += static_cast<char>(c);
  }
  std::cerr << "poslab: error: " << line << "\n";
  return 1;
}

// What `poslab train --help` says after its options.
constexpr const char* kTrainFooter =
    "Writes into the run directory (out_dir): config.toml (the fully resolved config),\n"
    "metrics.csv (one row per logged step), checkpoint/ (parameters as .npy files) and\n"
    "eval.json (the final validation loss; written last, so it marks a finished run).\n"
    "The config is checked completely before anything is written. A directory that already\n"
    "holds a run is refused (nothing is overwritten); --force moves the old run aside;\n"
    "--resume finishes the same experiment (what `poslab run --export` uses). A directory\n"
    "being written by another poslab process (it holds the directory's lock) is never\n"
    "touched.\n"
    "Stopping: the training state (parameters, Adam's moments, memory, random generator) is\n"
    "saved to resume/ every train.save_state_every steps (default 1000) and when SIGTERM or\n"
    "SIGINT arrives (the step in progress finishes first; exit code 128 + signal). --resume\n"
    "continues from it to the same result as an uninterrupted run (same thread count).\n"
    "Passkey retrieval (language models; docs/06): eval.passkey_length_factors = [1, 2, 4]\n"
    "adds a grid of rows (kind \"passkey\") to eval.json: a 5-digit key at each of\n"
    "eval.passkey_depths inside filler (eval.passkey_filler = \"corpus\": text of eval.split,\n"
    "\"sentence\", or \"sentence_shifted\"), eval.passkey_instances per cell (default 100), scored teacher-forced and\n"
    "greedy. An instance needs at least 103 bytes with the paper's prompt, 27 with\n"
    "eval.passkey_format = \"compact\". train.passkey_fraction = 0.02 mixes such instances\n"
    "(same prompt and filler) into that fraction of the training rows (the same rows for\n"
    "every arm).\n"
    "Fine-tuning (--init-from RUN, docs/06): RUN must be finished (eval.json); a parameter\n"
    "whose shape or name would differ (d_model, vocab_size, learned's max_len, ...) is\n"
    "refused before anything is written, naming it and both shapes. The run records its\n"
    "parent in init_from.json and eval.json (path, SHA-256 of its config.toml and\n"
    "checkpoint); --resume continues a fine-tuned run from its own saved state.\n"
    "Example:\n"
    "  poslab train --config experiments/quickstart.toml --set encoding.type=shaw --set "
    "encoding.clip_k=8 --out runs/shaw-k8\n"
    "  poslab train --config experiments/quickstart.toml --set encoding.type=shaw --set "
    "encoding.clip_k=8 --init-from runs/shaw-k8 --set train.seq_len=128 --set "
    "train.steps=200 --out runs/shaw-k8-128";

// `poslab train` (train/run.hpp).
CLI::App* add_train_command(CLI::App& app, Arguments& args) {
  CLI::App* train = app.add_subcommand(
      "train", "Train a model as the config says and evaluate it on the validation split.");
  train->add_option("--config", args.config_path, "TOML config file (every key: src/config/config.hpp, or docs/06)")
      ->type_name("FILE")
      ->required();
  add_overrides(train, args);
  train->add_option("--out", args.out_dir, "Run directory to write (replaces out_dir)")
      ->type_name("DIR");
  CLI::Option* force = train->add_flag(
      "--force", args.force,
      "If the run directory already holds a run, move it aside to DIR.replaced-<time> instead "
      "of refusing");
  train->add_flag("--resume", args.resume,
                  "If the run directory holds a run of the same config: finished, do nothing "
                  "(exit 0); unfinished, continue from its saved training state (resume/, "
                  "bit-identical to an uninterrupted run), or train it again from step 0 if it "
                  "has none. Another config is refused")
      ->excludes(force);
  train->add_option("--wait-for-trainer", args.wait_for_trainer_seconds,
                    "With --resume: if another process is training this run now, wait for it "
                    "(at most SECONDS) and exit by its outcome: 0 if it finished the run, 1 if "
                    "not (what exported study commands use, so that a Slurm dependency sees "
                    "whether the run is done). Default 0: refuse at once")
      ->type_name("SECONDS")
      ->check(CLI::Range(0, 30 * 24 * 3600))
      ->needs("--resume");
  train->add_option("--init-from", args.init_from,
                    "Fine-tune: start from the parameters of this finished run instead of a "
                    "random initialisation (sets train.init_from). The config may change "
                    "anything but a parameter's shape: segment, batch, steps, lr and schedule, "
                    "data, the encoding's non-parameter options (rope's scaling)")
      ->type_name("RUN_DIR");
  train->add_flag("--init-optimizer", args.init_optimizer,
                  "With --init-from: also start from its Adam moments, their bias correction "
                  "continuing from its step count (sets train.init_optimizer; default: fresh)");
  train->footer(kTrainFooter);
  return train;
}

// `poslab eval` (train/evaluate_run.hpp).
CLI::App* add_eval_command(CLI::App& app, Arguments& args) {
  CLI::App* eval = app.add_subcommand(
      "eval", "Evaluate the checkpoint of a finished run, possibly at another length or memory.");
  eval->add_option("--run", args.run_dir, "Run directory written by `poslab train`")
      ->type_name("DIR")
      ->required();
  add_overrides(eval, args);
  eval->add_option("--seq-len", args.seq_len, "Evaluation segment length (default: as trained)")
      ->type_name("N")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  eval->add_option("--mem-len", args.mem_len, "Memory length (default: as trained)")
      ->type_name("N")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  eval->add_option("--token-losses", args.token_losses_file,
                   "Also write the loss of every scored token, in reading order, to FILE (.npy, "
                   "float32): the input of notebooks/recl.py (relative effective context length)")
      ->type_name("FILE");
  eval->add_flag("--passkey", args.passkey,
                 "Evaluate the passkey grid instead (eval.passkey_length_factors x "
                 "eval.passkey_depths, from the run's config or --set) and write "
                 "DIR/eval_passkey.json")
      ->excludes("--seq-len", "--mem-len", "--token-losses");
  eval->add_flag("--stream", args.stream,
                 "Evaluate the streaming cache instead (StreamingLLM's attention sinks and its "
                 "baselines: eval.stream_*, from the run's config or --set) and write "
                 "DIR/eval_stream.json and DIR/eval_stream.csv")
      ->excludes("--seq-len", "--mem-len", "--token-losses", "--passkey");
  eval->footer(
      "Reads DIR/config.toml (with --set applied) and DIR/checkpoint/, evaluates on eval.split\n"
      "(validation unless --set eval.split=test) and writes DIR/eval_L<seq-len>_M<mem-len>.json.\n"
      "Each file records its --set; an evaluation that would replace one made with other --set\n"
      "is refused before it runs (move the file away, or evaluate a copy of DIR).\n"
      "With --passkey: one row per (length, depth) cell of the passkey grid (docs/06, 'Passkey\n"
      "retrieval'), in DIR/eval_passkey.json; e.g. for a run trained without a grid:\n"
      "  poslab eval --run runs/rope --passkey --set 'eval.passkey_length_factors=[2, 4]'\n"
      "With --stream (language models, relative encodings; docs/06, 'Streaming evaluation'):\n"
      "the first eval.stream_length bytes of eval.split read token by token with a cache of\n"
      "eval.stream_sinks first tokens (default 4) + eval.stream_recent recent ones (default\n"
      "0 = train.seq_len - 1 - sinks), at eval.stream_positions = \"cache\" (StreamingLLM's\n"
      "pos-shift: indices in the cache) or \"text\" (stream positions), beside the baselines of\n"
      "eval.stream_modes (default [\"sinks\", \"window\", \"recompute\", \"dense\"]; also\n"
      "\"memory\": Transformer-XL's state reuse, segments of train.seq_len bytes reading the\n"
      "cached states of the sinks + recent bytes before them); every mode\n"
      "scores the bytes after the first sinks + recent + 1. One row per mode in\n"
      "DIR/eval_stream.json (mean loss, tokens/s), the loss by stream position in buckets of\n"
      "train.seq_len bytes in DIR/eval_stream.csv; e.g.\n"
      "  poslab eval --run runs/rope --stream --set eval.stream_length=6400\n"
      "Example:\n"
      "  poslab eval --run runs/shaw-k8 --seq-len 256 --mem-len 256");
  return eval;
}

// What `poslab bench --help` says after its options.
constexpr const char* kBenchFooter =
    "Trains on random bytes, 5 times --steps steps, and prints tokens/s (median, min, max),\n"
    "the FLOPs per token counted in the step's sgemm calls, the GFLOP/s reached, and the\n"
    "ceiling: the model's own products timed alone in their batched form (docs/09).\n"
    "The defaults are the reference configuration: d_model 128, 4 layers, 4 heads,\n"
    "d_inner 512, segment 64, batch 16, 256 symbols. Measure on an otherwise idle machine.\n"
    "Writes nothing, except the --csv file of --reuse, --scaling or --eval-memory.\n"
    "Example:\n"
    "  poslab bench --steps 20 --set model.d_model=256 --set encoding.type=shaw\n"
    "  poslab bench --compare 64        # every encoding, memory 0 and 64\n"
    "  poslab bench --scaling 64,128,256,512 --steps 5 --csv results/bench/scaling.csv\n"
    "  poslab bench --eval-memory 512,2048 --set train.seq_len=512 --set model.n_layers=2\n"
    "  poslab bench --eval-memory 15872 --eval-memory-budget 32 --set train.seq_len=512\n"
    "  poslab bench --reuse 128,256,512,1024,2048 --set encoding.type=transformer_xl "
    "--csv results/bench/reuse_speed.csv";

// `poslab bench` (bench.cpp).
CLI::App* add_bench_command(CLI::App& app, Arguments& args) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Measure training throughput (tokens/s and GFLOP/s) for a model size.");
  bench->add_option("--steps", args.steps, "Timed training steps (after a warm-up)")
      ->type_name("N")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  bench->add_option("--config", args.config_path, "TOML config file (default: the defaults)")
      ->type_name("FILE");
  bench->add_option("--compare", args.compare_mem_len,
                    "Benchmark every registered encoding, without memory and with memory M, and "
                    "print a table of tokens/s and overhead against 'none'")
      ->type_name("M")
      ->check(CLI::Range(0, 1 << 16));
  bench->add_option("--reuse", args.reuse_attn_lens,
                    "Evaluation speed with and without state reuse at each attention length A "
                    "(Dai et al. 2019, Table 9): a forward pass per predicted token over the A "
                    "tokens before it, the same moving by a segment, and segments with memory")
      ->type_name("A,A,...")
      ->delimiter(',')
      ->check(CLI::Range(2, 1 << 16));
  bench->add_option("--targets", args.reuse_targets,
                    "--reuse: predicted tokens timed per measurement of the vanilla mode "
                    "(8x and 16x as many for the faster modes)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  bench->add_option("--scaling", args.scaling_segments,
                    "Every encoding (and its naive path; and rope with yarn and dynamic_ntk scaling) "
                    "at each segment length S, with batch x S = --tokens and memory S: tokens/s, "
                    "FLOPs per token, GFLOP/s, ratio to 'none'")
      ->type_name("S,S,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  bench->add_option("--eval-memory", args.eval_memory_lens,
                    "Peak resident memory of evaluating one row with each memory length M "
                    "(segment train.seq_len)")
      ->type_name("M,M,...")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  bench->add_option("--eval-memory-path", args.eval_memory_path,
                    "--eval-memory: 'inference' (evaluation-only forward, the default) or "
                    "'training' (the forward that keeps every layer's weights)")
      ->type_name("PATH");
  bench->add_option("--eval-memory-budget", args.eval_memory_budget_mb,
                    "--eval-memory, inference path: score budget in MiB; above it the scores are "
                    "made one row and as many heads as fit at a time (default 256, what "
                    "evaluation uses)")
      ->type_name("MB")
      ->check(CLI::Range(0.0, 1e9));
  bench->add_option("--tokens", args.scaling_tokens, "--scaling: tokens per step (batch x segment)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 24));
  bench->add_option("--csv", args.csv_path,
                    "--reuse, --scaling, --eval-memory: also write the table to this CSV file")
      ->type_name("FILE");
  add_overrides(bench, args);
  bench->footer(kBenchFooter);
  return bench;
}

// `poslab encodings` (list_encodings above; --describe: describe.cpp).
CLI::App* add_encodings_command(CLI::App& app, Arguments& args) {
  CLI::App* encodings = app.add_subcommand(
      "encodings", "List the positional encodings and their options.");
  CLI::Option* describe =
      encodings
          ->add_option("--describe", args.describe,
                       "Print the per-pair frequency table of an encoding's configuration "
                       "instead (rope: inverse frequency, wavelength, rotations over "
                       "original_len, interpolation weight, attention factor)")
          ->type_name("NAME");
  encodings
      ->add_option("--length", args.describe_length,
                   "--describe: the number of keys K a call covers (dynamic_ntk's length; "
                   "default train.seq_len + memory.mem_len)")
      ->type_name("N")
      ->check(CLI::Range(1L, long(1) << 40))
      ->needs(describe);
  encodings->add_flag("--csv", args.describe_csv, "--describe: print CSV (exact numbers)")
      ->needs(describe);
  add_overrides(encodings, args);
  encodings->footer(
      "Prints each registered encoding: its name (the value of encoding.type), its family\n"
      "(none, absolute, relative or relative_normalized, FIRE's: relative up to a threshold),\n"
      "the paper, and every option with its type, default and range. Writes nothing.\n"
      "--describe rope prints, per rotation pair, what the config's RoPE (and its scaling) does\n"
      "(docs/05-beyond.md); --set sets its options and the model's size (d_h = d_model / n_heads).\n"
      "Example:\n"
      "  poslab encodings\n"
      "  poslab encodings --describe rope --set model.d_model=64 --set model.n_heads=4 \\\n"
      "      --set encoding.scaling=yarn --set encoding.factor=4 --set encoding.original_len=64");
  return encodings;
}

// `poslab tasks` (list_tasks above).
CLI::App* add_tasks_command(CLI::App& app) {
  CLI::App* tasks = app.add_subcommand(
      "tasks", "List the tasks (the corpus and the generated tasks) and their options.");
  tasks->footer(
      "Prints each task: its name (the value of task.name), what it tests, the tokens of one\n"
      "instance, and every option with its type, default and range. Writes nothing.\n"
      "Example:\n"
      "  poslab tasks");
  return tasks;
}

// `poslab plot` (notebooks/poslab_plots.py, through python_script.cpp).
CLI::App* add_plot_command(CLI::App& app, std::vector<std::string>& plot_dirs) {
  CLI::App* plot = app.add_subcommand(
      "plot", "Draw the standard figures of one or more studies (results of `poslab run`).");
  plot->add_option("STUDY_DIR", plot_dirs, "A study's results directory (holds summary.csv)")
      ->required()
      ->expected(-1);
  plot->footer(
      "Runs /usr/bin/python3 notebooks/poslab_plots.py on each STUDY_DIR: reads its summary.csv\n"
      "(and loss_by_position.csv) and writes, as PNG and SVG, every figure the study's columns\n"
      "allow into STUDY_DIR/figures/ (docs/06, 'Figures'):\n"
      "  loss_vs_length, loss_by_position_length  language models (task lm) with length factors\n"
      "  length_generalization_{accuracy,loss,exact_match}  tasks (copy, ...) with length "
      "factors\n"
      "  randomized_vs_plain_exact_match          a *_randomized study, beside its plain study\n"
      "  extension_{loss_vs_length,budget,scale,loss_by_position}  two-stage studies (from =)\n"
      "  loss_vs_memory, loss_by_position         studies with memory factors\n"
      "  shaw_clip                                variants x encoding.clip_k\n"
      "  xl_terms                                 variants that switch Transformer-XL's terms\n"
      "  passkey_{exact_match,greedy_exact_match,digit_accuracy}  studies with a passkey grid\n"
      "  pilot_{gate,memory,budget,conditions}    pilots (study names pilot_*)\n"
      "each as .png and .svg, and summary_ci.csv (mean and 95% interval per condition).\n"
      "For results/bench: the benchmark figures. Prints the paths written. Needs Debian's\n"
      "python3-pandas and python3-matplotlib. The same figures, interactive: poslab report.\n"
      "Example:\n"
      "  poslab plot results/state_reuse results/xl_terms");
  return plot;
}

// `poslab attention` (attention.cpp).
CLI::App* add_attention_command(CLI::App& app, AttentionOptions& attention_options) {
  CLI::App* attention = app.add_subcommand(
      "attention", "Dump a trained run's attention weights on a text, for plots.");
  attention->add_option("--run", attention_options.run_dir, "Run directory written by `poslab train`")
      ->type_name("DIR")
      ->required();
  attention->add_option("--input", attention_options.input, "The text to attend over (bytes)")
      ->type_name("TEXT")
      ->required();
  attention
      ->add_option("--mem-text", attention_options.mem_text,
                   "Text run through the model first, to fill its memory (runs with "
                   "memory.mem_len > 0 only)")
      ->type_name("TEXT");
  attention->add_option("--out", attention_options.out_dir, "Output directory (default: DIR/attention)")
      ->type_name("OUT");
  attention->footer(
      "Loads DIR/config.toml and DIR/checkpoint/, runs --mem-text (if given and the run has a\n"
      "memory) and then --input through the model, batch 1, one segment each, and writes into OUT:\n"
      "  layer{n}.npy  float32 [H, L, K]: the attention weights of layer n, query i (row) over\n"
      "                key j (column), the M memory keys first (K = M + L); 0 on masked keys\n"
      "  tokens.json   {\"input\", \"memory\", \"mem_len\": M, \"keys\": one label per column, ...}\n"
      "Example:\n"
      "  poslab attention --run runs/quickstart --input \"hello world\" --mem-text \"once upon a time\"");
  return attention;
}

// `poslab sinks` (train/run_sinks.hpp).
CLI::App* add_sinks_command(CLI::App& app, SinksOptions& sinks_options) {
  CLI::App* sinks = app.add_subcommand(
      "sinks", "Measure attention sinks: each layer's and head's attention mass on the first key.");
  sinks->add_option("--run", sinks_options.run_dir, "Run directory written by `poslab train`")
      ->type_name("DIR")
      ->required();
  sinks->add_option("--split", sinks_options.split, "valid or test (default: the run's eval.split)")
      ->type_name("SPLIT");
  sinks->add_option("--window", sinks_options.window, "Tokens per window (default: train.seq_len)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  sinks->add_option("--windows", sinks_options.windows,
                    "Windows read from the split's start (0: all it holds)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sinks->add_option("--first-query", sinks_options.first_query,
                    "Summaries over queries FIRST..window-1 (default: window / 2)")
      ->type_name("FIRST");
  sinks->add_option("--threshold", sinks_options.threshold,
                    "Count a head as a sink if its mean mass on key 0 is at least this")
      ->type_name("MASS")
      ->capture_default_str();
  sinks->add_option("--out", sinks_options.out_dir, "Output directory (default: DIR/sinks)")
      ->type_name("OUT");
  sinks->footer(
      "Loads DIR/config.toml and DIR/checkpoint/, cuts the split's first windows x window bytes\n"
      "into windows, reads each as a fresh segment (positions 0..window-1, no memory, 1 thread;\n"
      "with model.sink_token: [SINK, window] at 0..window, key 0 is the sink token)\n"
      "and writes into OUT:\n"
      "  sink_heads.csv    per (layer, head): mean weight on key 0 over queries FIRST..window-1,\n"
      "                    the same for uniform attention (1 / keys seen), their ratio, sink\n"
      "  sink_profile.csv  per (layer, head, query): mean weight on key 0, uniform 1 / (query + 1)\n"
      "  sinks.json        the settings and the heads' summaries\n"
      "Example:\n"
      "  poslab sinks --run runs/rope64 --windows 100");
  return sinks;
}

// What `poslab longrope-search --help` says after its options.
constexpr const char* kLongRopeSearchFooter =
    "Fitness: the validation loss at --target with rope scaling longrope, factor s, original_len\n"
    "L and long_factor = the candidate (docs/11, 'LongRoPE'). Population, mutation and crossover\n"
    "as microsoft/LongRoPE's dim_mono search (src/eval/longrope_search.hpp). Prints a line per\n"
    "iteration; writes OUT/longrope_factors.toml (an [encoding] snippet), OUT/fitness.csv and\n"
    "OUT/fitness.png, and keeps every evaluation in OUT/evaluations.csv. Ctrl-C (SIGINT) or\n"
    "SIGTERM stops it after the evaluation in progress; the same command then resumes it.\n"
    "OUT is held by one search at a time; a file, or a directory of other files, is refused.\n"
    "Example:\n"
    "  poslab longrope-search --run runs/rope64 --target 256 --out runs/rope64_longrope256";

// `poslab longrope-search` (train/longrope_search_run.hpp).
CLI::App* add_longrope_search_command(CLI::App& app, LongRopeSearchCommand& search,
                                      Arguments& args) {
  CLI::App* longrope_search = app.add_subcommand(
      "longrope-search",
      "Search LongRoPE's per-pair rope factors for a longer context by evolution, on a trained "
      "rope run's validation loss.");
  longrope_search->add_option("--run", search.run_dir, "A finished run of encoding rope")
      ->type_name("DIR")
      ->required();
  longrope_search
      ->add_option("--target", search.target_len,
                   "Target length L' (> the run's train.seq_len L); s = L' / L")
      ->type_name("N")
      ->required()
      ->check(CLI::Range(2, 1 << 24));
  longrope_search->add_option("--out", search.out_dir,
                              "The search's directory (new, or a search of the same settings "
                              "to resume)")
      ->type_name("OUT")
      ->required();
  longrope_search->add_option("--seeds", search.seeds,
                              "The starting vectors, comma-separated among pi, ntk, yarn "
                              "(default: all three)")
      ->type_name("LIST");
  longrope_search->add_option("--cap", search.options.cap,
                              "Largest factor: code (1 + s, the released code) or paper (1.25 s)")
      ->check(CLI::IsMember({"code", "paper"}));
  longrope_search->add_option("--population", search.options.population, "Population (64)")
      ->check(CLI::Range(2, 100000));
  longrope_search->add_option("--iterations", search.options.iterations, "Iterations (40)")
      ->check(CLI::Range(0, 100000));
  longrope_search->add_option("--mutations", search.options.mutations,
                              "Mutants per iteration (16)")
      ->check(CLI::Range(0, 100000));
  longrope_search->add_option("--crossovers", search.options.crossovers,
                              "Crossover children per iteration (16)")
      ->check(CLI::Range(0, 100000));
  longrope_search->add_option("--parents", search.options.parents,
                              "Parents kept per iteration (32; at most the population)")
      ->check(CLI::Range(2, 100000));
  longrope_search->add_option("--seed", search.options.seed, "Random seed of the search (1)")
      ->check(CLI::Validator(
          [](std::string& text) {  // else "-1" reads as 2^64 - 1
            return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos
                       ? std::string()
                       : "must be a whole number >= 0, got '" + text + "'";
          },
          "UINT"));
  longrope_search->add_option("--eval-batches", search.eval_batches,
                              "Validation batches per fitness evaluation (4)")
      ->check(CLI::Range(1, 1 << 20));
  longrope_search->add_option("--eval-rows", search.eval_rows, "Rows per batch (8)")
      ->check(CLI::Range(1, 1 << 20));
  add_overrides(longrope_search, args);
  longrope_search->footer(kLongRopeSearchFooter);
  return longrope_search;
}

// `poslab explore` (explore.cpp).
CLI::App* add_explore_command(CLI::App& app, ExploreOptions& explore_options) {
  CLI::App* explore = app.add_subcommand(
      "explore", "Write the attention explorer of trained runs: a web page that opens from disk.");
  explore->add_option("RUN", explore_options.runs, "Run directories of language models (two: side by side)")
      ->required()
      ->expected(-1);
  explore->add_option("--out", explore_options.out_dir,
                      "Where to write the page (default: explorer/): a new directory, an empty "
                      "one, or an explorer written there before")
      ->type_name("DIR");
  explore->add_option("--text", explore_options.text_file,
                      "A text of yours to show as well (bytes; lengths it is too short for are skipped)")
      ->type_name("FILE");
  explore->add_option("--texts", explore_options.texts,
                      "Windows of the first run's test split to show (default 4)")
      ->check(CLI::Range(0, 16));
  explore->add_option("--factors", explore_options.factors,
                      "Input lengths, as multiples of the training length (default 1,2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  explore->footer(
      "For each run, text and length factor f, runs the memory.mem_len bytes before the input\n"
      "(filling the memory, where the run has one) and then f x train.seq_len bytes through the\n"
      "model, and stores what the page shows (the page computes nothing):\n"
      "  - the attention map of every layer and head (pooled to at most 128 x 128 blocks of\n"
      "    tokens at long lengths: the mass a block of queries gives a block of keys);\n"
      "  - the loss of every token, coloured on the text and as a curve over the position;\n"
      "  - per run, the positional part of the score against distance, per head: biases (T5,\n"
      "    ALiBi, KERPLE, FIRE), Shaw's q.a^K, Transformer-XL's (b)+(d), DeBERTa's c2p, RoPE's\n"
      "    q.k response; none for sinusoidal, learned and none (positions are in the embeddings).\n"
      "Two runs are shown side by side with one set of controls (layer, head, text, length).\n"
      "Writes DIR/index.html, DIR/data/ and DIR/lib/ (Vega-Lite, vendored) into a directory\n"
      "beside DIR, which then replaces DIR whole. DIR must be new, empty, or an explorer poslab\n"
      "wrote (it holds .poslab-explorer); a file, a run, or a directory of other files is\n"
      "refused. What to look for, per encoding: docs/10-explorer.md.\n"
      "Example:\n"
      "  poslab explore runs/sinusoidal runs/alibi --out runs/explorer\n"
      "  xdg-open runs/explorer/index.html");
  return explore;
}

// `poslab report` (report.cpp).
CLI::App* add_report_command(CLI::App& app, ReportOptions& report_options) {
  CLI::App* report = app.add_subcommand(
      "report", "Write a study's results as a web site that opens from disk (no server).");
  report->add_option("STUDY_DIR", report_options.study_dir, "A study's results directory (holds summary.csv)")
      ->required();
  report->add_option("--out", report_options.out_dir,
                     "Where to write the site (default: STUDY_DIR/report): a new directory, an "
                     "empty one, or a report written there before")
      ->type_name("DIR");
  report->add_flag("--debug", report_options.debug,
                   "On an error in the Python part, its traceback instead of one line");
  report->footer(
      "Writes DIR/index.html and what it needs (data/report.js, lib/ with the vendored\n"
      "Vega-Lite, web/vendor/), to open from disk in any browser, offline:\n"
      "  - the claims tables (notebooks/claims.py), the study's tables and its protocol;\n"
      "  - every standard figure of `poslab plot`, interactive: hover for the mean, 95% interval\n"
      "    and runs; click a legend entry to show one curve; drag to pan, scroll to zoom;\n"
      "  - the run table: status (done, running, incomplete, pending, stale), difference from\n"
      "    the study's base, gate, losses, provenance (commit, CPU, threads, time); sortable,\n"
      "    filterable;\n"
      "  - the learning curves (metrics.csv) of the runs ticked in the table.\n"
      "The runs are those STUDY_DIR/study.toml plans (with [smoke] if the name ends in -smoke).\n"
      "A committed study keeps summary.csv but not its run directories: its runs show as done\n"
      "from summary.csv, without provenance beyond the commit, and without learning curves.\n"
      "Built by /usr/bin/python3 notebooks/report.py into a directory beside DIR, which then\n"
      "replaces DIR whole. DIR must be new, empty, or a report poslab wrote (it holds\n"
      ".poslab-report); a file, the study itself, or a directory of other files is refused.\n"
      "Example:\n"
      "  poslab report results/xl_terms\n"
      "  xdg-open results/xl_terms/report/index.html");
  return report;
}

// The command line: every subcommand, and what it was given.
struct CommandLine {
  CLI::App app{
      "poslab: a testbed for positional encodings in small transformer language models, "
      "trained on the CPU.",
      "poslab"};
  Arguments args;
  std::vector<std::string> plot_dirs;
  AttentionOptions attention_options;
  SinksOptions sinks_options;
  LongRopeSearchCommand search;
  ExploreOptions explore_options;
  ReportOptions report_options;
  RunStudyOptions run_options;  // `poslab run`: a study of many runs (study/runner.hpp)
  // In the order `poslab --help` lists them.
  CLI::App* train = add_train_command(app, args);
  CLI::App* eval = add_eval_command(app, args);
  CLI::App* bench = add_bench_command(app, args);
  CLI::App* encodings = add_encodings_command(app, args);
  CLI::App* tasks = add_tasks_command(app);
  CLI::App* plot = add_plot_command(app, plot_dirs);
  CLI::App* attention = add_attention_command(app, attention_options);
  CLI::App* sinks = add_sinks_command(app, sinks_options);
  CLI::App* longrope_search = add_longrope_search_command(app, search, args);
  CLI::App* explore = add_explore_command(app, explore_options);
  CLI::App* report = add_report_command(app, report_options);
  CLI::App* run_command = add_run_command(app, run_options);

  CommandLine() {
    app.require_subcommand(1);
    app.footer(
        "Run `poslab COMMAND --help` for what each command does.\n"
        "Example:\n  poslab encodings\n  poslab train --config experiments/quickstart.toml --set encoding.type=shaw");
  }
};

// A usage error (an unknown option, a missing argument): two lines on stderr, exit code 2.
int usage_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::string message = e.what();
  // CLI11 calls a misspelled command a missing one; name it instead. The commands are read
  // from the app, so a new one is never taken for a misspelling.
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    commands.push_back(command->get_name());
  if (argc > 1 && argv[1][0] != '-' &&
      std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    message = std::string("unknown command '") + argv[1] + "'; the commands are ";
    for (std::size_t i = 0; i < commands.size(); ++i)
      message += (i == 0 ? "" : i + 1 == commands.size() ? " and " : ", ") + commands[i];
  }
  std::cerr << "poslab: usage error: " << message
            << "\nRun `poslab --help` or `poslab COMMAND --help` for usage.\n";
  return 2;
}

// `poslab encodings`: the listing, or --describe NAME's table.
int run_encodings_command(const Arguments& args) {
  if (args.describe.empty()) {
    if (!args.overrides.empty())
      throw std::invalid_argument("encodings: --set needs --describe NAME");
    return list_encodings(std::cout);
  }
  if (!find_encoding(args.describe))
    throw std::invalid_argument("encodings --describe: unknown encoding '" + args.describe +
                                "'");
  // The described encoding first, so that --set can give its options.
  std::vector<std::string> overrides = {"encoding.type=" + args.describe};
  overrides.insert(overrides.end(), args.overrides.begin(), args.overrides.end());
  const Config cfg = config_from_string("", "(defaults)", registered_choices(), overrides);
  if (cfg.encoding.type != args.describe)
    throw std::invalid_argument("encodings --describe " + args.describe +
                                ": --set encoding.type names another encoding ('" +
                                cfg.encoding.type + "')");
  return describe_encoding(cfg, args.describe_length, args.describe_csv, std::cout);
}

// `poslab train`: the config with the command line's settings, then the whole run.
int run_train_command(CLI::App* train, Arguments& args) {
  die_with_runner();
  // --init-from and --init-optimizer are config keys given on the command line: the loader
  // checks them with the rest, and config.toml records them.
  if (train->count("--init-from")) {
    check_path_argument("--init-from", args.init_from);
    args.overrides.push_back("train.init_from=" + toml_string(args.init_from));
  }
  if (args.init_optimizer) args.overrides.push_back("train.init_optimizer=true");
  Config cfg = load_config(args.config_path, registered_choices(), args.overrides);
  if (train->count("--out")) {
    check_path_argument("--out", args.out_dir);
    cfg.out_dir = args.out_dir;
  }
  return run_train(cfg,
                   args.force    ? ExistingRun::force
                   : args.resume ? ExistingRun::resume
                                 : ExistingRun::refuse,
                   args.wait_for_trainer_seconds);
}

// `poslab bench`: one of its measurements (bench.cpp).
int run_bench_command(const Arguments& args) {
  const Config cfg =
      args.config_path.empty()
          ? config_from_string("", "(defaults)", registered_choices(), args.overrides)
          : load_config(args.config_path, registered_choices(), args.overrides);
  if (!args.reuse_attn_lens.empty())
    return run_bench_reuse(cfg, args.reuse_attn_lens, args.reuse_targets, args.csv_path);
  if (!args.eval_memory_lens.empty())
    return run_bench_eval_memory(cfg, args.eval_memory_lens, args.eval_memory_path,
                                 args.eval_memory_budget_mb, args.csv_path);
  if (args.compare_mem_len >= 0)
    return run_bench_comparison(cfg, args.steps, args.compare_mem_len);
  if (!args.scaling_segments.empty())
    return run_bench_scaling(cfg, args.steps, args.scaling_segments, args.scaling_tokens,
                             args.csv_path);
  return run_bench(cfg, args.steps);
}

// `poslab longrope-search`: the search (train/longrope_search_run.hpp), then its figure.
int run_longrope_search(LongRopeSearchCommand& search, const Arguments& args) {
  search.overrides = args.overrides;
  if (const int code = run_longrope_search_command(search, std::cout); code != 0) return code;
  const std::filesystem::path out_dir(search.out_dir);
  return run_python_script("longrope_fitness.py", {(out_dir / "fitness.csv").string(),
                                                   (out_dir / "fitness.png").string()});
}

// The parsed command's work; its exit code.
int run_parsed(CommandLine& c) {
  Arguments& args = c.args;
  if (*c.encodings) return run_encodings_command(args);
  if (*c.tasks) return list_tasks(std::cout);
  if (*c.run_command) return run_study(c.run_options, std::cout);
  if (*c.plot) return run_python_script("poslab_plots.py", c.plot_dirs);
  if (*c.report) return run_report(c.report_options, std::cout);
  if (*c.explore) return run_explore(c.explore_options, std::cout);
  if (*c.longrope_search) return run_longrope_search(c.search, args);
  if (*c.sinks) return run_sinks(c.sinks_options, std::cout);
  if (*c.attention) {
    c.attention_options.mem_text_given = c.attention->count("--mem-text") > 0;
    return run_attention(c.attention_options, std::cout);
  }
  if (*c.train) return run_train_command(c.train, args);
  if (*c.eval)
    return args.passkey  ? run_eval_passkey(args.run_dir, args.overrides)
           : args.stream ? run_eval_stream(args.run_dir, args.overrides)
                         : run_eval(args.run_dir, args.overrides, args.seq_len, args.mem_len,
                                    args.token_losses_file);
  if (*c.bench) return run_bench_command(args);
  return 2;  // not reached: require_subcommand(1)
}

int run(int argc, char** argv) {
  CommandLine c;
  try {
    c.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return usage_error(c.app, e, argc, argv);
  }
  try {
    return run_parsed(c);
  } catch (const std::exception& e) {  // ConfigError, and whatever a command throws
    return report_error(e.what());
  }
}

}  // namespace
}  // namespace poslab

// How OpenMP threads wait for each other. A training step opens a few hundred parallel loops;
// between two of them a thread that finished early waits. libgomp's default spins a long time
// (a busy loop) before it sleeps: on a 2-core machine shared with anything else (a second run, a
// compiler) a spinning thread steals the core the slow one needs, and training was measured 10x
// slower here. Passive waiting (sleep at once) is safe, but every loop then pays a wake-up,
// about a fifth of a step's time at the reference configuration (docs/09). So poslab spins
// briefly, 1,000 rounds (GOMP_SPINCOUNT), then sleeps: measured here, 1.25x passive's
// speed on an idle machine and 0.88x beside one busy process (docs/09, "Waiting threads").
// libgomp reads its environment once, when it is loaded, so poslab sets it and restarts
// itself, unless the user has chosen (OMP_WAIT_POLICY or GOMP_SPINCOUNT set).
static void use_brief_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
    return;
  setenv("GOMP_SPINCOUNT", "1000", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
}

int main(int argc, char** argv) {
  use_brief_openmp_spinning(argv);
  return poslab::run(argc, argv);
}
