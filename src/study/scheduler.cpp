// The scheduler of `poslab run` (scheduler.hpp).
#include "study/scheduler.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "config/load.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"

extern char** environ;

namespace poslab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

ResultsLock::ResultsLock(const fs::path& root) {
    const fs::path file = root / ".lock";
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot create " + file.string() + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw std::runtime_error("another `poslab run` is using " + root.string() +
                               " (it holds " + file.string() + "); wait for it or use --out");
    }
}

ResultsLock::~ResultsLock() { ::close(fd_); }

namespace {

// "42s", "3m05s", "1h02m".
std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%lds", s);
  else if (s < 3600) std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return text;
}

// Does `dir` hold an unfinished run of `run`'s experiment (its config.toml, read as the
// trainer reads it, differs in nothing that changes a result)? Such a run is continued, not
// deleted: `train --resume` picks up its saved training state.
bool same_experiment_in(const fs::path& dir, const PlannedRun& run) {
  if (!fs::is_directory(dir) || !fs::exists(dir / "config.toml")) return false;
  try {
    return experiment_difference(load_config((dir / "config.toml").string(), registered_choices()),
                                 run.config)
        .empty();
  } catch (const std::exception&) {  // unreadable: nothing worth continuing
    return false;
  }
}

// Appends one line to a log file (created if missing).
void append_line(const fs::path& file, const std::string& line) {
  std::ofstream out(file, std::ios::app);
  out << line << "\n";
  if (!out) throw std::runtime_error("cannot append to " + file.string());
}



// Signals, turned into bytes on a pipe (the self-pipe trick): the scheduler sleeps in poll() on
// the pipe and wakes for a finished child (SIGCHLD) or an interruption (SIGINT, SIGTERM) without
// the race of checking a flag just before a blocking wait. Installed for the scheduler's
// lifetime, then the previous handlers are put back.
volatile sig_atomic_t g_interrupted_by = 0;
int g_wake_pipe = -1;

extern "C" void on_signal(int signal) {
  const int saved_errno = errno;
  if (signal != SIGCHLD) g_interrupted_by = signal;
  const char byte = 0;
  [[maybe_unused]] const ssize_t ignored = ::write(g_wake_pipe, &byte, 1);
  errno = saved_errno;
}

class SignalWatch {
 public:
  SignalWatch() {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    g_wake_pipe = pipe_[1];
    g_interrupted_by = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (int i = 0; i < 3; ++i) {
      ::sigaction(kSignals[i], nullptr, &previous_[i]);
      // A signal ignored when we started (a background job's SIGINT) stays ignored.
      if (kSignals[i] != SIGCHLD && previous_[i].sa_handler == SIG_IGN) continue;
      ::sigaction(kSignals[i], &action, nullptr);
    }
  }
  ~SignalWatch() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    g_wake_pipe = -1;
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Sleeps until a signal arrives or `milliseconds` pass.
  void wait(int milliseconds) {
    pollfd fd{pipe_[0], POLLIN, 0};
    ::poll(&fd, 1, milliseconds);
    char buffer[64];
    while (::read(pipe_[0], buffer, sizeof buffer) > 0) {
    }
  }

  int interrupted_by() const { return g_interrupted_by; }

 private:
  static constexpr int kSignals[3] = {SIGCHLD, SIGINT, SIGTERM};
  int pipe_[2] = {-1, -1};
  struct sigaction previous_[3] {};
};

// Starts `args` with stdin from /dev/null and stdout and stderr appended to `log`.
pid_t spawn_child(const std::string& executable, const std::vector<std::string>& args,
                  const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The child learns who started it, so that it can die with us (see kRunnerPidVariable).
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind(std::string(kRunnerPidVariable) + "=", 0) != 0)
      environment.push_back(*e);
  environment.push_back(std::string(kRunnerPidVariable) + "=" + std::to_string(::getpid()));
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    throw std::runtime_error("cannot start " + executable + ": " + std::strerror(error));
  return pid;
}

// "exit code 1", "killed by signal 9 (Killed)".
std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "status " + std::to_string(status);
}

class Scheduler {
 public:
  Scheduler(const SchedulerJob& job, std::ostream& out)
      : study_(job.study), runs_(job.runs), layout_(job.layout), executable_(job.executable),
        shown_as_(job.shown_as), jobs_(job.jobs),
        threads_(threads_per_run(job)), threads_given_(job.threads > 0), out_(out) {}

  // Runs the runs at `todo` (indices into runs); returns the exit code.
  int run(const std::vector<std::size_t>& todo) {
    start_ = Clock::now();
    std::deque<std::size_t> queue(todo.begin(), todo.end());
    outcome_.assign(runs_.size(), Outcome::elsewhere);
    for (std::size_t i : todo) outcome_[i] = Outcome::queued;
    SignalWatch signals;
    bool forwarded = false;
    while (true) {
      // Start, in order, every queued run whose parent is done (a run of a later stage waits
      // for its parent; one whose parent failed or cannot run is not run).
      // Passes until nothing changes: a run not run makes its children not run in the next.
      for (bool changed = true; changed;) {
        changed = false;
        for (auto it = queue.begin(); it != queue.end() && !signals.interrupted_by() &&
                                      running_.size() < static_cast<std::size_t>(jobs_);) {
          std::string why;
          const Readiness readiness = ready(*it, why);
          if (readiness == Readiness::waiting) {
            ++it;
            continue;
          }
          if (readiness == Readiness::ready) start(*it);
          else not_run(*it, why);
          it = queue.erase(it);
          changed = true;
        }
      }
      if (running_.empty()) break;  // (every queued run waits for a running one, or we stop)
      signals.wait(1000);
      if (signals.interrupted_by() && !forwarded) {
        out_ << "interrupted (" << strsignal(signals.interrupted_by()) << "): stopping "
             << running_.size() << " running run(s); they save their state and continue next time"
             << std::endl;
        for (const Child& child : running_) ::kill(child.pid, signals.interrupted_by());
        forwarded = true;
      }
      reap(signals.interrupted_by() != 0);
    }
    update_summary();
    return finish(signals.interrupted_by(), queue.size());
  }

  std::size_t done = 0;  // runs done, those found done before starting included
  std::size_t total = 0;

 private:
  struct Child {
    pid_t pid;
    std::size_t run;
    Clock::time_point start;
  };

  // What became of each run in this invocation. `elsewhere`: not ours to run (done before,
  // not chosen by --only, or trained by another process): its status on disk decides.
  enum class Outcome { elsewhere, queued, running, done, failed, not_run };
  enum class Readiness { ready, waiting, blocked };

  // Can runs_[index] start now? A run from scratch can; a later stage waits for its parent,
  // and cannot run if its parent failed, was not run, or is not done and not ours to run.
  Readiness ready(std::size_t index, std::string& why) const {
    const PlannedRun& run = runs_[index];
    if (run.parent == PlannedRun::kNoParent) return Readiness::ready;
    const std::string parent = "its parent '" + run.parent_id + "'";
    switch (outcome_[run.parent]) {
      case Outcome::queued:
      case Outcome::running: return Readiness::waiting;
      case Outcome::done: return Readiness::ready;
      case Outcome::failed: why = parent + " failed"; return Readiness::blocked;
      case Outcome::not_run: why = parent + " was not run"; return Readiness::blocked;
      case Outcome::elsewhere: break;
    }
    const RunStatus status = run_status(runs_[run.parent], layout_);
    if (status == RunStatus::done) return Readiness::ready;
    why = parent + " is " + to_string(status) +
          (status == RunStatus::running
               ? " (another process trains it); run the study again when it has finished"
               : " and not selected by --only; run it first");
    return Readiness::blocked;
  }

  // A run that cannot start because of its parent: reported, counted, never started; its own
  // children follow it when their turn comes.
  void not_run(std::size_t index, const std::string& why) {
    outcome_[index] = Outcome::not_run;
    not_run_.push_back(runs_[index].id + ": " + why);
    out_ << "[NOT RUN] " << runs_[index].id << ": " << why << "\n";
    print_progress();
  }

  void start(std::size_t index) {
    const PlannedRun& run = runs_[index];
    const fs::path dir = layout_.run_dir(run);
    try {
      // A run still trained by another process (a child of a runner killed with -9 that has
      // not died yet, another machine on a shared disk) is never deleted or started twice.
      if (is_being_trained(dir))
        throw std::runtime_error(dir.string() + " is being written by another poslab process; "
                                 "not started (run the study again once it has finished)");
      // An interrupted run of this very experiment is continued from its saved training state
      // (`train --resume`; without a state it is trained again from step 0); what another
      // experiment or a broken run left behind is deleted.
      const bool continued = same_experiment_in(dir, run);
      if (!continued) fs::remove_all(dir);
      fs::create_directories(dir.parent_path());
      write_config_file(run, layout_);
      std::vector<std::string> args =
          train_arguments(run, layout_, shown_as_, threads_, threads_given_);
      args.push_back("--resume");
      std::string command;
      for (const std::string& a : args) {
        if (!command.empty()) command += ' ';
        command += shell_quote(a);
      }
      if (continued)  // the log of the interrupted part stays; the new part follows it
        append_line(layout_.log_file(run), "# " + command);
      else
        write_file_atomically(layout_.log_file(run), "# " + command + "\n");
      running_.push_back({spawn_child(executable_, args, layout_.log_file(run)), index, Clock::now()});
      outcome_[index] = Outcome::running;
      out_ << "[start] " << run.id << "  -> " << dir.string() << "\n";
    } catch (const std::exception& e) {
      outcome_[index] = Outcome::failed;
      failures_.push_back(run.id + ": " + e.what());
      out_ << "[FAILED] " << run.id << ": " << e.what() << "\n";
    }
    print_progress();
  }

  void reap(bool interrupted) {
    for (auto child = running_.begin(); child != running_.end();) {
      int status = 0;
      const pid_t pid = ::waitpid(child->pid, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) {
        ++child;
        continue;
      }
      finished(*child, status, interrupted);
      child = running_.erase(child);
      print_progress();
    }
  }

  void finished(const Child& child, int status, bool interrupted) {
    const PlannedRun& run = runs_[child.run];
    const double seconds = std::chrono::duration<double>(Clock::now() - child.start).count();
    const fs::path dir = layout_.run_dir(run);
    const bool complete = fs::is_directory(dir) && RunDirectory::open(dir).is_complete();
    const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0 && complete;
    outcome_[child.run] = succeeded ? Outcome::done : interrupted ? Outcome::queued : Outcome::failed;
    if (succeeded) {
      ++done;
      seconds_finished_ += seconds, ++count_finished_;
      out_ << "[done] " << run.id << " in " << format_duration(seconds) << "\n";
      update_summary();
    } else if (interrupted) {
      out_ << "[stopped] " << run.id << " (incomplete; continues next time)\n";
    } else {
      seconds_finished_ += seconds, ++count_finished_;
      const std::string why = WIFEXITED(status) && WEXITSTATUS(status) == 0
                                  ? "exited 0 but wrote no eval.json"
                                  : describe_exit(status);
      const std::string log = layout_.log_file(run).string();
      failures_.push_back(run.id + ": " + why + "; log: " + log);
      out_ << "[FAILED] " << run.id << ": " << why << "; log: " << log << "\n";
      if (const std::string last = last_line_of(log); !last.empty())
        out_ << "         " << last << "\n";
    }
  }

  // "[3/9 done, 2 running, 0 failed] elapsed 1m05s, ETA 2m10s"
  void print_progress() {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    out_ << "[" << done << "/" << total << " done, " << running_.size() << " running, "
         << failures_.size() << " failed";
    if (!not_run_.empty()) out_ << ", " << not_run_.size() << " not run";
    out_ << "] elapsed " << format_duration(elapsed) << ", ETA ";
    const std::size_t remaining = total - done - failures_.size() - not_run_.size();
    if (remaining == 0) out_ << "0s";
    else if (count_finished_ == 0) out_ << "?";
    else
      out_ << format_duration(seconds_finished_ / count_finished_ * remaining /
                              std::min<std::size_t>(jobs_, remaining));
    out_ << std::endl;  // flushed: the progress is read while it happens
  }

  void update_summary() {
    try {
      commits_ = write_summary(study_, runs_, layout_);
      summary_error_.clear();
    } catch (const std::exception& e) {
      summary_error_ = e.what();
      out_ << "warning: cannot write the summary: " << e.what() << "\n";
    }
  }

  int finish(int signal, std::size_t not_started) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    out_ << "study '" << study_.name << "': " << done << " of " << total << " runs done";
    if (!failures_.empty()) out_ << ", " << failures_.size() << " failed";
    if (!not_run_.empty()) out_ << ", " << not_run_.size() << " not run (their parent did not finish)";
    out_ << " (" << format_duration(elapsed) << "); summary: " << layout_.summary().string()
         << "\n";
    for (const std::string& f : failures_) out_ << "  FAILED " << f << "\n";
    for (const std::string& n : not_run_) out_ << "  NOT RUN " << n << "\n";
    // A study's results should come from one build: say so when they do not.
    if (commits_.size() > 1) {
      out_ << "note: the finished runs come from " << commits_.size() << " different builds:";
      for (const std::string& c : commits_) out_ << " " << c;
      out_ << "\n";
    }
    if (!summary_error_.empty()) {  // the study's result is its summary: not written, failed
      std::cerr << "poslab: error: cannot write the summary: " << summary_error_ << "\n";
      if (!signal) return 1;
    }
    if (signal) {
      out_ << "interrupted: " << total - done - failures_.size() - not_run_.size()
           << " run(s) not done ("
           << not_started << " not started); run the same command again to resume\n";
      return 128 + signal;
    }
    return failures_.empty() && not_run_.empty() ? 0 : 1;
  }

  std::vector<std::string> commits_;  // builds behind the finished runs (provenance)
  std::string summary_error_;         // why the last summary could not be written, if it could not
  const Study& study_;
  const std::vector<PlannedRun>& runs_;
  const StudyLayout& layout_;
  std::string executable_, shown_as_;
  int jobs_, threads_;
  bool threads_given_;  // --threads: wins over the study's train.threads
  std::ostream& out_;
  Clock::time_point start_;
  std::vector<Child> running_;
  std::vector<std::string> failures_;
  std::vector<std::string> not_run_;  // "id: why" of runs whose parent did not finish
  std::vector<Outcome> outcome_;      // per run of runs_
  double seconds_finished_ = 0;
  std::size_t count_finished_ = 0;
};

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

int threads_per_run(const SchedulerJob& job) {
  return job.threads > 0 ? job.threads : std::max(1, available_cores() / job.jobs);
}

int run_scheduled(const SchedulerJob& job, const std::vector<std::size_t>& todo,
                  std::size_t done_before, std::size_t total, std::ostream& out) {
  Scheduler scheduler(job, out);
  scheduler.done = done_before;
  scheduler.total = total;
  return scheduler.run(todo);
}

}  // namespace poslab
