// A study: many runs of `poslab train` that differ in a few settings, described in one TOML file
// and run with `poslab run experiments/NAME.toml` (study/runner.hpp).
//
// The study file
// --------------
//
//   # free comments: what the study shows, how long it takes, the command to reproduce
//   [study]
//   name = "state_reuse"              # results go to results/<name>/ (or --out DIR)
//   description = "..."               # optional
//
//   [base]                            # a run config, same schema as `poslab train` configs
//   out_dir = "ignored"               # (the runner sets out_dir per run)
//   [base.model]
//   d_model = 64
//   [base.encoding]
//   type = "none"
//
//   [sweep]                           # grid axes: every combination is one run
//   "encoding.type" = ["none", "shaw", "transformer_xl"]
//   "train.seed" = [1, 2, 3]
//
//   [[variant]]                       # optional: named override sets crossed with the grid
//   name = "no_a"
//   set = { "encoding.term_a" = false }
//
//   [[variant]]                       # a second stage: fine-tunes the run of variant "no_a"
//   name = "no_a_long"                #   at the same grid point (train.init_from, set by the
//   from = "no_a"                     #   runner); it inherits no_a's `set`, then applies its own
//   set = { "train.seq_len" = 128, "train.steps" = 200 }
//
//   [smoke]                           # overrides applied by --smoke: a tiny version in seconds
//   "train.steps" = 5
//
//   [slurm]                           # optional: for `poslab run --export slurm` (slurm_export.hpp)
//   partition = "cpu"                 # account, time = "2:00:00", mem = "4G", cpus_per_task = 2,
//   array_throttle = 8                # max_array_size, extra = ["--qos=short"]
//
// Keys in [sweep], [smoke] and a variant's `set` are config keys `section.key`, written quoted
// ("train.seed") or as TOML dotted keys (train.seed), which mean the same here. A sweep value is
// any TOML value the key accepts: ["shaw", "none"], [1, 2], [1e-3, 3e-4], [true, false].
//
// Which runs a study has
// ----------------------
// The grid is every combination of the axes' values, the first axis varying slowest (nested loops
// in file order). Variants multiply it: each variant is run at every grid point. With no variant
// the runs are the grid points; with no axis, the variants; with neither, one run called "base".
// A run's settings are applied on top of [base] in this order: its sweep values, its variant's
// `set`, and with --smoke the [smoke] overrides (the last word wins, so --smoke can shrink any
// run). A variant may not set a key that is also a sweep axis: the run would not be what its name
// says. `out_dir` cannot be swept or set: the runner gives every run its own directory.
//
// A run is named by its id ("encoding.type=shaw,train.seed=2", or "no_a,train.seed=1" with a
// variant) and stored in a directory named after it ("encoding.type-shaw__train.seed-2").
//
// Two stages (or more): runs that start from other runs
// -----------------------------------------------------
// A variant with `from = "NAME"` is a stage after variant NAME: at every grid point, its run
// starts from the parameters of NAME's run at the same grid point (same sweep values), as
// `poslab train --init-from` (train/init_from.hpp). Its settings are [base], the sweep values,
// NAME's `set` (and NAME's own parent's before it, for a chain), then its own `set`, so a
// fine-tune variant names only what changes. train.init_from is set by the runner and may not
// be written in [sweep], [smoke] or a variant's `set`. A `from` naming no variant, or variants
// that start from each other in a cycle, is an error at load time (file, line).
// `poslab run` trains a parent before its children (with --jobs N too); a child whose parent
// failed is reported as not run. --export slurm submits the stages as job arrays that depend on
// each other (afterok; slurm_export.hpp).
//
// Checked before anything runs
// ----------------------------
// expand_study resolves the Config of EVERY run (and, so that --smoke cannot fail later, every
// run with [smoke] applied) through the same loader as `poslab train`. A mistake anywhere is one
// ConfigError that names the study file, the line and what caused it, e.g.
//
//   experiments/x.toml:14: in [sweep] axis 'model.d_modle': unknown key 'model.d_modle' (did you
//   mean 'model.d_model'?) (while resolving run 'model.d_modle=32')
//
// so a malformed study never leaves half a results directory behind.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace poslab {

// One value from the study file, in the two spellings the runner needs.
struct StudyValue {
  std::string toml;  // as TOML text, for the config loader: "shaw" -> "\"shaw\"", 2 -> "2"
  std::string text;  // as people read it, for run ids and CSV columns: shaw, 2
};

// One `section.key = value` the study applies on top of [base].
struct StudySetting {
  std::string key;   // "encoding.term_a"
  StudyValue value;
  std::size_t line;  // where in the study file it was written

  // The loader's override form, as for `poslab train --set`: encoding.term_a=false
  std::string override_text() const { return key + "=" + value.toml; }
};

// One grid axis of [sweep]: a key and the values it takes, in file order.
struct SweepAxis {
  std::string key;                 // "train.seed"
  std::vector<StudyValue> values;  // never empty
  std::size_t line;
};

// One [[variant]]: a named set of overrides, crossed with the grid.
struct Variant {
  std::string name;                // letters, digits, '_', '-', '.'
  std::vector<StudySetting> set;   // may be empty (a baseline)
  std::size_t line;
  std::string from = "";           // the parent variant: its runs start from that variant's
  std::size_t from_line = 0;       //   runs at the same grid point ("" = from scratch)
};

// The [slurm] table: how `poslab run --export slurm` asks Slurm for resources. Every field is
// optional; the command line overrides it (--partition, --time, ...). Empty / 0 = not asked for.
struct SlurmOptions {
  std::string partition;            // #SBATCH --partition
  std::string account;              // #SBATCH --account
  std::string time;                 // #SBATCH --time, a Slurm duration: "30", "2:00:00", "1-0"
  std::string mem;                  // #SBATCH --mem, per node: "4G"
  int cpus_per_task = 0;            // #SBATCH --cpus-per-task (train.threads = 0 follows it)
  int array_throttle = 0;           // --array=0-N%T: at most T tasks of an array at once
  int max_array_size = 0;           // tasks per array; 0 = the cluster's MaxArraySize
  std::vector<std::string> extra;   // more options, one #SBATCH line each: "--qos=short"
};

struct Study {
  std::string source;       // the study file, as error messages name it
  std::string name;         // [study] name: the results directory
  std::string description;  // [study] description, optional

  // The [base] table, re-serialized as a standalone config file for config_from_string.
  std::string base_toml;
  // base_lines[i] is the line of the study file that line i+1 of base_toml came from, so that
  // errors the loader finds in [base] point into the study file.
  std::vector<std::size_t> base_lines;
  // The study line of every key [base] sets ("data.path" -> 31), to say where a value came from.
  std::map<std::string, std::size_t> base_key_lines;

  std::vector<SweepAxis> axes;        // [sweep], in file order
  std::vector<Variant> variants;      // [[variant]], in file order
  std::vector<StudySetting> smoke;    // [smoke], in file order
  SlurmOptions slurm;                 // [slurm]
};

// One run of a study, fully resolved.
struct PlannedRun {
  std::string id;        // "encoding.type=shaw,train.seed=2", "no_a,train.seed=1", "base"
  std::string dir_name;  // filesystem-safe: "encoding.type-shaw__train.seed-2"
  std::vector<std::string> overrides;  // applied to [base], in order ("train.seed=2", ...)
  std::map<std::string, std::string> sweep_values;  // axis key -> value text ("train.seed" -> "2")
  std::string variant;   // the variant's name, "" if the study has none
  Config config;         // base + overrides; out_dir is still [base]'s (the runner sets it)
  // The run this one starts from (a variant with `from`): its index in the runs of
  // expand_study, or kNoParent. config.train.init_from is "runs/<parent's dir_name>" until the
  // runner places the runs (place_runs in runner.hpp).
  static constexpr std::size_t kNoParent = static_cast<std::size_t>(-1);
  std::size_t parent = kNoParent;
  std::string parent_id;  // its id, "" without a parent
  int stage = 0;          // 0 for a run from scratch, parent's stage + 1 otherwise
  // Where each key the run's overrides set was written, the last word for that key:
  // "data.path" -> "experiments/x.toml:40: in variant 'fortunes'" (keys of [base] are in
  // Study::base_key_lines).
  std::map<std::string, std::string> set_where;
};

// Parses and checks the structure of a study file (tables, names, axes, variants); the config
// keys themselves are checked by expand_study. Throws ConfigError ("FILE:LINE: ...").
Study parse_study(const std::string& toml_text, const std::string& source_name);

// Reads and parses the study file at `path`.
Study load_study(const std::string& path);

// How many values of a train.seed axis the smoke version keeps (the first ones).
inline constexpr std::size_t kSmokeSeeds = 2;

// Every run of the study, each Config resolved; with `smoke`, the [smoke] overrides applied
// and a train.seed axis cut to its first kSmokeSeeds values;
// then `command_line` ("section.key=value", `poslab run --set`), applied to every run last.
// Throws ConfigError naming the study file, line and the sweep value or variant at fault.
std::vector<PlannedRun> expand_study(const Study& study, bool smoke = false,
                                     const std::vector<std::string>& command_line = {});

// The files a run will read, checked before anything is written (`poslab run`, also with
// --dry-run and --export): today data.path, the corpus of a language model (task "lm"), and that
// eval.stream_length fits in its eval.split (for a later stage too, before its parents train); a
// generated task reads no file. Throws ConfigError naming the key, the study file and line its
// value came from (or that it is the default), the path and what is wrong with it, e.g.
//
//   experiments/x.toml:31: in [base]: data.path = "/home/me/corpus": does not exist (the
//   corpus of run 'encoding.type=rope'; checked before any run starts)
void check_run_inputs(const Study& study, const PlannedRun& run);

}  // namespace poslab
