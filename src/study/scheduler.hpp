// The scheduler of `poslab run` (runner.hpp): a study's runs as child processes of
// `poslab train`, N at a time.
//
// - Each child is `POSLAB train --config configs/<run>.toml --set train.threads=T` with
//   T = max(1, cores / N), started with posix_spawn, its stdout and stderr appended to
//   runs/<run>.log, and reaped with waitpid.
// - Why a child process and not a call of run_train (train/run.hpp) in this one: a run's
//   threads (set_threads: OpenMP's count is one per process) and its output (the log file) are
//   its own, N runs train side by side with no shared state; a run that crashes, aborts or is
//   killed (out of memory, a signal) ends alone, reported as its exit status, and the study goes
//   on; each run's memory goes back to the system when it ends (glibc keeps freed memory inside a
//   process); and the command is the very line `--export slurm` writes for a cluster
//   (export_command in runner.cpp), so a local study and a Slurm one run the runs one way.
// - Signals reach the scheduler through a pipe (the self-pipe trick), so it sleeps in poll()
//   and wakes for a finished child (SIGCHLD) or an interruption (SIGINT, SIGTERM) without the
//   race of checking a flag just before a blocking wait. An interruption is forwarded to the
//   children; their runs stay incomplete and are run again next time.
// - summary.csv is rewritten after every finished run, so it can be read while a study runs.
// - A run another process is training (is_being_trained) is never deleted or started.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "study/runner.hpp"

namespace poslab {

// What the scheduler runs, and how.
struct SchedulerJob {
  const Study& study;
  const std::vector<PlannedRun>& runs;  // every run of the study (the summary covers them all)
  const StudyLayout& layout;
  std::string executable;  // what is started: --poslab, or /proc/self/exe
  std::string shown_as;    // the name the children and logs see (the real path of the binary)
  int jobs = 1;            // children at a time
  int threads = 0;         // threads of each child (--threads); 0 = max(1, cores / jobs)
};

// The cores this process may run on (taskset and cgroup cpusets included).
int available_cores();

// The threads each run of job gets: job.threads, or else max(1, available_cores() / job.jobs).
int threads_per_run(const SchedulerJob& job);

// Runs runs[i] for every i in `todo`, job.jobs at a time, with progress lines on `out`;
// `done_before` of `total` runs were finished before. Returns the exit code of `poslab run`:
// 0, 1 if a run failed or the summary could not be written, 128 + signal if interrupted.
int run_scheduled(const SchedulerJob& job, const std::vector<std::size_t>& todo,
                  std::size_t done_before, std::size_t total, std::ostream& out);

// Holds an exclusive lock on the results directory while the study runs, so that a second
// `poslab run` cannot delete the "incomplete" directories the first one is writing.
class ResultsLock {
 public:
  explicit ResultsLock(const std::filesystem::path& root);
  ~ResultsLock();
  ResultsLock(const ResultsLock&) = delete;
  ResultsLock& operator=(const ResultsLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace poslab
