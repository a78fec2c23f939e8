// `poslab run experiments/NAME.toml`: every run of a study (study/study.hpp), N at a time, as
// child processes of `poslab train`; resumable; with one summary table at the end.
//
//   poslab run experiments/state_reuse.toml --jobs 2      run what is not done yet
//   poslab run experiments/state_reuse.toml --dry-run     list the runs and their status
//   poslab run experiments/state_reuse.toml --smoke       the tiny version, in seconds
//   poslab run experiments/state_reuse.toml --export slurm
//
// What it writes (the results directory, results/NAME/ unless --out; results/NAME-smoke/ for
// --smoke, so that smoke results never mix with real ones):
//
//   study.toml                 a copy of the study file, as it was run
//   configs/<run>.toml         each run's resolved config (config_to_toml), out_dir included
//   runs/<run>/                each run's directory, written by `poslab train` (eval.json last)
//   runs/<run>.log             the run's stdout and stderr
//   summary.csv                one row per (finished run, evaluation setting)
//   loss_by_position.csv       one row per (finished run, evaluation setting, position)
//   loss_by_copy_distance.csv  eval.copy_distance: one row per (finished run, setting, class,
//                              distance bucket); only when some run measured it
//   loss_by_stream_position.csv  eval.stream_length: one row per (finished run, streaming mode,
//                              bucket of stream positions); only when some run measured it
//   passkey_curve.csv          train.eval_passkey_instances: every finished run's
//                              RUN/passkey_curve.csv (train/passkey_curve.hpp), each row after
//                              the run's name, axes, variant and parent; only when some run has one
//   commands.txt               --export commands only
//   slurm/<time>/, slurm/header.sh   --export slurm only (slurm_export.hpp)
//
// How it runs:
// - Every run's config is resolved before anything starts; a bad study writes nothing.
// - Resuming: a run whose directory is complete (has eval.json) is skipped; a directory without
//   eval.json is an interrupted run: with the same config it is continued from its saved
//   training state (`train --resume`, resume/), otherwise deleted and run again. A finished run made with a
//   different config than the study now gives is an error (delete it, or use --out), never
//   silently reused.
// - Each child is `POSLAB train --config configs/<run>.toml --set train.threads=T` with
//   T = max(1, cores / jobs), unless the study chose train.threads itself. POSLAB is
//   /proc/self/exe: the very binary that is running, even if it is rebuilt meanwhile.
// - A failed run (non-zero exit) is reported with its log and the study goes on; the exit code
//   is 1 at the end if any run failed.
// - Stages (a variant with `from`, study.hpp): a run starts only once its parent is done; a run
//   whose parent failed or cannot run is reported as not run (exit code 1), never started.
// - Ctrl-C (SIGINT) or SIGTERM is forwarded to the running children, which finish their step,
//   save their training state and stop; the next `poslab run` continues them. Exit code 130
//   (143 for SIGTERM).
// - Only one `poslab run` at a time may use a results directory (a lock file, results/.../.lock).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "study/study.hpp"

namespace CLI {
class App;
}

namespace poslab {

// The environment variable through which `poslab run` tells each `poslab train` it starts the
// runner's pid. Such a training asks the kernel to send it SIGTERM when its parent dies
// (PR_SET_PDEATHSIG), so that a runner killed with -9 leaves no training behind that would
// write into a run directory the next runner restarts.
constexpr const char* kRunnerPidVariable = "POSLAB_RUNNER_PID";

// Where everything of a study goes, under its results directory.
struct StudyLayout {
  std::filesystem::path root;  // results/NAME

  std::filesystem::path config_file(const PlannedRun& r) const {
    return root / "configs" / (r.dir_name + ".toml");
  }
  std::filesystem::path run_dir(const PlannedRun& r) const { return root / "runs" / r.dir_name; }
  std::filesystem::path log_file(const PlannedRun& r) const {
    return root / "runs" / (r.dir_name + ".log");
  }
  std::filesystem::path summary() const { return root / "summary.csv"; }
  std::filesystem::path loss_by_position() const { return root / "loss_by_position.csv"; }
  std::filesystem::path loss_by_copy_distance() const { return root / "loss_by_copy_distance.csv"; }
  std::filesystem::path loss_by_stream_position() const {
    return root / "loss_by_stream_position.csv";
  }
  std::filesystem::path passkey_curve() const { return root / "passkey_curve.csv"; }
  std::filesystem::path commands() const { return root / "commands.txt"; }
};

// The options of `poslab run`.
struct RunStudyOptions {
  std::string study_path;
  int jobs = 1;
  int threads = 0;            // threads of each run (--threads); 0 = max(1, cores / jobs)
  bool dry_run = false;
  bool smoke = false;
  std::string out;            // results directory; "" = results/NAME (results/NAME-smoke)
  std::string export_format;  // "", "commands" or "slurm"
  std::string poslab;         // the executable for the runs; "" = /proc/self/exe
  bool summary_only = false;  // list the runs' status and write summary.csv; run nothing
  std::vector<std::string> only;       // run only the runs whose id or directory matches one
                                       // of these globs (fnmatch); empty = every run
  std::vector<std::string> overrides;  // --set section.key=value, applied to every run
  SlurmOptions slurm;         // --partition, --time, ...: over the study's [slurm] table
};

// The file in a results directory that records how `poslab run` last planned its runs there:
// {"smoke": true, "set": ["train.lr=1e-3"]} (--smoke and --set). `poslab report` plans the runs
// the same way, so that its statuses equal `poslab run --dry-run`'s with those options.
constexpr const char* kRunOptionsFile = "run_options.json";

// Adds the `run` subcommand, with its options and help, to `app`.
CLI::App* add_run_command(CLI::App& app, RunStudyOptions& options);

// Does what `poslab run` was asked to; returns the exit code. Throws ConfigError for a bad study
// (before anything is written) and std::runtime_error for what goes wrong outside the runs.
int run_study(const RunStudyOptions& options, std::ostream& out);

// What a run's directory says about it.
enum class RunStatus {
  pending,     // no directory yet
  running,     // a directory without eval.json that a live `poslab train` holds (its lock, or
               // a live claim.json from another machine: is_being_trained)
  incomplete,  // a directory without eval.json, no one training it: interrupted or failed;
               // deleted and run again
  done,        // eval.json exists, and config.toml is the one the study gives
  stale,       // eval.json exists, but the run was made with another config
};
std::string to_string(RunStatus status);

// Is a live `poslab train` writing `run_dir`: its lock held here, or a live claim.json
// (train/run_claim.hpp) from another machine?
bool is_being_trained(const std::filesystem::path& run_dir);

// `why`, if given, receives what differs for a stale run. `run` must be placed (place_runs).
// Where a later-stage run's parent lies is no part of the experiment: its config's
// train.init_from may name the parent's directory by another path (the results directory
// given as an absolute path, with "./", or moved) and the run is still done; which parent run
// it is (the directory's name) and which checkpoint it started from (its sha256) are.
RunStatus run_status(const PlannedRun& run, const StudyLayout& layout, std::string* why = nullptr);

// A run's status, and for a stale run what differs.
struct RunState {
  RunStatus status = RunStatus::pending;
  std::string why;
};

// The status of every run of a study whose results are in `layout`: what `poslab run
// --dry-run` and `--summary-only` list and what `poslab report` shows (docs/10: "the status is
// what --dry-run would say"). One function, so that they cannot disagree: it places the runs
// first (place_runs), since a later-stage run's status depends on its parent's directory.
std::vector<RunState> study_status(std::vector<PlannedRun>& runs, const StudyLayout& layout);

// How long an exported command waits for another process that is training its run (two
// submissions of one study): two days; a Slurm task's --time usually ends it sooner.
constexpr int kWaitForTrainerSeconds = 2 * 24 * 3600;

// The command that runs `run` from any directory: cd to the current directory, then
// `poslab train --config FILE --resume --wait-for-trainer kWaitForTrainerSeconds`, appending to
// the run's .log: a finished run is left as it is (exit 0), a run another process trains is
// waited for and its outcome is the command's, an unfinished one is trained from step 0.
// `config_file`: the run's config, if not layout.config_file(run) (a pinned Slurm submission).
// `threads` > 0 (--threads): the command sets train.threads to it.
std::string export_command(const PlannedRun& run, const StudyLayout& layout,
                           const std::string& poslab,
                           const std::filesystem::path& config_file = {}, int threads = 0);

// `POSLAB train --config FILE [--set train.threads=T]` for `run`: T only if threads > 0 and
// either the study left train.threads at 0 ("all cores", too many beside other runs) or
// `given` (the user's --threads, which wins over the study). The thread count is no part of a
// run's identity: the same config gives the same bits with any count (docs/06, "Threads and
// reproducibility"), so a run made with other threads is still done, never stale.
std::vector<std::string> train_arguments(const PlannedRun& run, const StudyLayout& layout,
                                         const std::string& executable, int threads,
                                         bool given = false);

// Gives every run its directory in the layout (config.out_dir) and every later-stage run its
// parent's directory (config.train.init_from).
void place_runs(std::vector<PlannedRun>& runs, const StudyLayout& layout);

// Writes the run's resolved config to layout.config_file(run) (atomically).
void write_config_file(const PlannedRun& run, const StudyLayout& layout);

// The last non-empty line of a log: usually the child's "poslab: error: ..." line.
std::string last_line_of(const std::filesystem::path& file);

// `word` quoted for a POSIX shell, if it needs it: it's -> 'it'\''s'.
std::string shell_quote(const std::string& word);

// Rewrites summary.csv and loss_by_position.csv (atomically) from every complete run's eval.json.
// Returns the distinct build commits (eval.json provenance) of those runs, in the order met.
std::vector<std::string> write_summary(const Study& study, const std::vector<PlannedRun>& runs,
                                       const StudyLayout& layout);

}  // namespace poslab
