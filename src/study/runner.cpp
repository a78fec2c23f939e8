// `poslab run` (runner.hpp): plan, check, then run a study's runs as child processes.
//
// The parts, in the order run_study uses them:
//   1. the plan: every run resolved (study.cpp), given its directory, and its status read from
//      the disk (run_status);
//   2. --dry-run and --export, which only describe the plan;
//   3. summary.csv and loss_by_position.csv, rebuilt from every finished run's eval.json;
//   4. the scheduler: `jobs` children at a time, started with posix_spawn and reaped with
//      waitpid; signals reach it through a pipe, so it can sleep in poll() without races;
//   5. the `run` subcommand's command line and help.
#include "study/runner.hpp"

#include <fcntl.h>
#include <fnmatch.h>
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
#include <map>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "core/provenance.hpp"
#include "study/slurm_export.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"

extern char** environ;

namespace poslab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

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

// The cores this process may run on (taskset and cgroup cpusets included).
int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string read_text_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last non-empty line of a log: usually the child's "poslab: error: ..." line.
std::string last_line_of(const fs::path& file) {
  std::istringstream lines(read_text_file(file));
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// ---------------------------------------------------------------------------------------------
// 1. The plan: where each run goes and how far it got
// ---------------------------------------------------------------------------------------------

// Each run's Config writes into its own directory of the results.
void place_runs(std::vector<PlannedRun>& runs, const StudyLayout& layout) {
  for (PlannedRun& run : runs) run.config.out_dir = layout.run_dir(run).string();
}

// The executable the children run: --poslab, or this very binary.
std::string child_executable(const RunStudyOptions& options) {
  return options.poslab.empty() ? "/proc/self/exe" : options.poslab;
}

// The same, as a path that means something outside this process (for exported commands).
std::string exported_executable(const RunStudyOptions& options) {
  if (!options.poslab.empty()) return fs::absolute(options.poslab).string();
  std::error_code ec;
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string deleted = " (deleted)";  // the binary was rebuilt since it started
  if (self.size() > deleted.size() && self.ends_with(deleted)) self.resize(self.size() - deleted.size());
  return ec ? "poslab" : self;
}

// `POSLAB train --config FILE [--set train.threads=T]`.
std::vector<std::string> train_arguments(const PlannedRun& run, const StudyLayout& layout,
                                         const std::string& executable, int threads) {
  std::vector<std::string> args = {executable, "train", "--config",
                                   layout.config_file(run).string()};
  if (threads > 0 && run.config.train.threads == 0)  // 0 = all cores: too many beside other runs
    args.insert(args.end(), {"--set", "train.threads=" + std::to_string(threads)});
  return args;
}

void write_config_file(const PlannedRun& run, const StudyLayout& layout) {
  fs::create_directories(layout.config_file(run).parent_path());
  write_file_atomically(layout.config_file(run), config_to_toml(run.config));
}

// ---------------------------------------------------------------------------------------------
// 2. --dry-run and --export
// ---------------------------------------------------------------------------------------------

// The status of every run, one line each, and the counts. For an incomplete run (interrupted
// or failed) the last line of its log says which; `how` ends the last line.
void print_status(const Study& study, const std::vector<PlannedRun>& runs,
                  const std::vector<RunStatus>& status, const std::vector<std::string>& why,
                  const StudyLayout& layout, const std::string& how, std::ostream& out) {
  out << "study '" << study.name << "' (" << study.source << "): " << runs.size()
      << " runs, results in " << layout.root.string() << "\n";
  std::size_t width = 0;
  for (const PlannedRun& run : runs) width = std::max(width, run.id.size());
  std::map<RunStatus, std::size_t> counts;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ++counts[status[i]];
    std::string label = to_string(status[i]);
    out << "  " << label << std::string(11 - label.size(), ' ') << runs[i].id
        << std::string(width - runs[i].id.size() + 2, ' ') << "runs/" << runs[i].dir_name << "\n";
    if (status[i] == RunStatus::stale) out << "             " << why[i] << "\n";
    if (status[i] == RunStatus::running)
      if (const std::optional<ClaimInfo> claim = read_claim(layout.run_dir(runs[i])))
        out << "             by " << claim->describe() << "\n";
    if (status[i] == RunStatus::incomplete && fs::exists(layout.log_file(runs[i])))
      if (const std::string last = last_line_of(layout.log_file(runs[i])); !last.empty())
        out << "             log: " << last << "\n";
  }
  out << counts[RunStatus::done] << " done, " << counts[RunStatus::pending] << " pending";
  if (auto n = counts[RunStatus::running])
    out << ", " << n << " running (a live `poslab train` holds them; never touched)";
  if (auto n = counts[RunStatus::incomplete])
    out << ", " << n << " incomplete (interrupted or failed: deleted and rerun by `poslab run`)";
  if (auto n = counts[RunStatus::stale])
    out << ", " << n << " stale (made with another config: delete them or use --out)";
  out << ". " << how << "\n";
}

// A new directory for one Slurm submission: results/NAME/slurm/<UTC time>[-N].
fs::path new_submission_directory(const StudyLayout& layout) {
  std::string stamp = utc_now();  // 2026-11-23T21:37:29Z
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  const fs::path base = fs::absolute(layout.root / "slurm" / stamp);
  fs::path dir = base;
  for (int n = 2; fs::exists(dir); ++n) dir = base.string() + "-" + std::to_string(n);
  return dir;
}

// [slurm] of the study, with what the command line sets on top.
SlurmOptions slurm_options(const Study& study, const RunStudyOptions& options) {
  SlurmOptions o = study.slurm;
  const SlurmOptions& cli = options.slurm;
  for (auto [into, from] : {std::pair{&o.partition, &cli.partition}, {&o.account, &cli.account},
                            {&o.time, &cli.time}, {&o.mem, &cli.mem}})
    if (!from->empty()) *into = *from;
  for (auto [into, from] : {std::pair{&o.cpus_per_task, &cli.cpus_per_task},
                            {&o.array_throttle, &cli.array_throttle},
                            {&o.max_array_size, &cli.max_array_size}})
    if (*from > 0) *into = *from;
  o.extra.insert(o.extra.end(), cli.extra.begin(), cli.extra.end());
  return o;
}

int export_runs(const Study& study, const std::vector<PlannedRun>& runs,
                const std::vector<RunStatus>& status, const StudyLayout& layout,
                const RunStudyOptions& options, std::ostream& out) {
  std::vector<std::size_t> pending;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (status[i] != RunStatus::done) pending.push_back(i);
  if (pending.empty()) {
    std::cerr << "poslab run: every run of '" << study.name << "' is done; nothing to export\n";
    return 0;
  }
  if (options.export_format == "slurm") check_slurm_results_path(layout.root);
  fs::create_directories(layout.root / "runs");  // where the commands write their logs
  const std::string poslab = exported_executable(options);
  if (options.export_format == "slurm") {
    // Pinned: the configs are copied into the submission's own directory with the commands,
    // so that a later export (say with --set) cannot change what a queued task trains.
    SlurmSubmission submission;
    submission.study_name = study.name;
    submission.directory = new_submission_directory(layout);
    submission.header = fs::absolute(layout.root / "slurm" / "header.sh");
    for (std::size_t i : pending) {
      const fs::path config = submission.directory / "configs" / (runs[i].dir_name + ".toml");
      fs::create_directories(config.parent_path());
      write_file_atomically(config, config_to_toml(runs[i].config));
      submission.commands.push_back(export_command(runs[i], layout, poslab, config));
    }
    submission.options = slurm_options(study, options);
    if (submission.options.max_array_size > 0) {
      submission.tasks_per_array = submission.options.max_array_size;
    } else if (const int cluster = cluster_max_array_size(); cluster > 0) {
      submission.tasks_per_array = cluster;
      out << "MaxArraySize of this cluster (scontrol show config): " << cluster << "\n";
    } else {
      out << "no `scontrol show config` here: arrays of at most 1001 tasks (Slurm's default "
             "MaxArraySize; set --max-array-size for your cluster)\n";
    }
    write_slurm_submission(submission, out);
    return 0;
  }
  std::vector<std::string> lines;
  for (std::size_t i : pending) {
    write_config_file(runs[i], layout);  // the commands refer to them
    lines.push_back(export_command(runs[i], layout, poslab));
  }
  const std::size_t count = lines.size();
  std::string commands;
  for (const std::string& line : lines) commands += line + "\n";
  write_file_atomically(layout.commands(), commands);
  out << commands;
  std::cerr << "poslab run: " << count << (count == 1 ? " command" : " commands") << " (also in "
            << layout.commands().string() << "); their configs are in "
            << (layout.root / "configs").string() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------------
// 3. The summary tables
// ---------------------------------------------------------------------------------------------

using Cell = MetricsLog::Cell;

// A JSON value as a CSV cell: numbers exactly, text quoted if needed, missing/null empty.
Cell json_cell(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return Cell("");
  const nlohmann::json& v = object[key];
  if (v.is_number_integer()) return Cell(v.get<std::int64_t>());
  if (v.is_number()) return Cell(v.get<double>());
  if (v.is_string()) return Cell(v.get<std::string>());
  if (v.is_boolean()) return Cell(v.get<bool>() ? "true" : "false");
  return Cell("");
}

std::string csv_line(const std::vector<Cell>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + cells[i].text;
  return line + "\n";
}

// The evaluation settings of an eval.json: its "evaluations" array, or, from a `poslab train`
// that writes only one evaluation, the top-level fields as one "main" setting.
std::vector<nlohmann::json> evaluations_of(const nlohmann::json& eval) {
  if (eval.contains("evaluations") && eval["evaluations"].is_array())
    return std::vector<nlohmann::json>(eval["evaluations"].begin(), eval["evaluations"].end());
  nlohmann::json main = eval;
  if (!main.contains("kind")) main["kind"] = "main";
  return {main};
}

// The columns of summary.csv after the run's name, axes and setting: first what one evaluation
// setting measured (exact_match_ci_* is Wilson's 95% interval over its `instances`, the sampling
// error of this one run), then what holds for the whole run (in_distribution_ok: the gate of
// train/commands.cpp; commit: the build that trained it, from its provenance).
constexpr const char* kSettingColumns[] = {"split",     "loss",
                                           "accuracy",  "exact_match",
                                           "exact_match_ci_low", "exact_match_ci_high",
                                           "instances", "tokens",
                                           "peak_memory_mb"};
constexpr const char* kRunColumns[] = {"in_distribution_ok", "unigram_loss", "bigram_loss",
                                       "train_loss", "train_tokens_per_second", "train_seconds",
                                       "commit"};

}  // namespace

std::vector<std::string> write_summary(const Study& study, const std::vector<PlannedRun>& runs,
                                       const StudyLayout& layout) {
  std::vector<std::string> commits;  // the distinct builds behind the finished runs
  const bool has_variants = !study.variants.empty();
  std::vector<Cell> header = {"study", "run"};
  for (const SweepAxis& axis : study.axes) header.push_back(axis.key);
  if (has_variants) header.push_back("variant");
  std::vector<Cell> positions_header = header;
  positions_header.erase(positions_header.begin());  // no study column: one study per file
  for (const char* c : {"kind", "factor", "seq_len", "mem_len"}) {
    header.push_back(c);
    positions_header.push_back(c);
  }
  for (const char* c : kSettingColumns) header.push_back(c);
  for (const char* c : kRunColumns) header.push_back(c);
  for (const char* c : {"position", "loss"}) positions_header.push_back(c);

  std::string summary = csv_line(header), positions = csv_line(positions_header);
  for (const PlannedRun& run : runs) {
    const fs::path dir = layout.run_dir(run);
    if (!fs::is_directory(dir) || !RunDirectory::open(dir).is_complete()) continue;
    const nlohmann::json eval = RunDirectory::open(dir).read_json("eval.json");
    if (eval.contains("provenance") && eval["provenance"].contains("commit")) {
      const std::string commit = eval["provenance"]["commit"].get<std::string>();
      if (std::find(commits.begin(), commits.end(), commit) == commits.end())
        commits.push_back(commit);
    }

    std::vector<Cell> who = {Cell(study.name), Cell(run.id)};
    for (const SweepAxis& axis : study.axes) who.push_back(Cell(run.sweep_values.at(axis.key)));
    if (has_variants) who.push_back(Cell(run.variant));

    for (const nlohmann::json& e : evaluations_of(eval)) {
      std::vector<Cell> setting;
      for (const char* c : {"kind", "factor", "seq_len", "mem_len"}) setting.push_back(json_cell(e, c));

      std::vector<Cell> row = who;
      row.insert(row.end(), setting.begin(), setting.end());
      for (const char* c : kSettingColumns) row.push_back(json_cell(e, c));
      for (const char* c : kRunColumns)
        row.push_back(std::string(c) == "commit" ? json_cell(eval.value("provenance", nlohmann::json()), c)
                                                 : json_cell(eval, c));
      summary += csv_line(row);

      if (!e.contains("loss_by_position") || !e["loss_by_position"].is_array()) continue;
      const nlohmann::json& losses = e["loss_by_position"];
      for (std::size_t p = 0; p < losses.size(); ++p) {
        std::vector<Cell> line(who.begin() + 1, who.end());
        line.insert(line.end(), setting.begin(), setting.end());
        line.push_back(Cell(p));
        line.push_back(losses[p].is_number() ? Cell(losses[p].get<double>()) : Cell(""));
        positions += csv_line(line);
      }
    }
  }
  fs::create_directories(layout.root);
  write_file_atomically(layout.summary(), summary);
  write_file_atomically(layout.loss_by_position(), positions);
  return commits;
}

std::string to_string(RunStatus status) {
  switch (status) {
    case RunStatus::pending: return "pending";
    case RunStatus::running: return "running";
    case RunStatus::incomplete: return "incomplete";
    case RunStatus::done: return "done";
    case RunStatus::stale: return "stale";
  }
  return "?";
}

bool is_being_trained(const fs::path& run_dir) {
  if (DirectoryLock::is_held(run_dir)) return true;  // a trainer on this machine
  const std::optional<ClaimInfo> claim = read_claim(run_dir);
  return claim && claim_is_live(*claim);  // one on another machine, by its heartbeat
}

RunStatus run_status(const PlannedRun& run, const StudyLayout& layout, std::string* why) {
  const fs::path dir = layout.run_dir(run);
  if (!fs::exists(dir)) return RunStatus::pending;
  if (!fs::is_directory(dir)) return RunStatus::incomplete;
  if (!RunDirectory::open(dir).is_complete())
    return is_being_trained(dir) ? RunStatus::running : RunStatus::incomplete;
  try {
    const std::string difference =
        experiment_difference(load_config((dir / "config.toml").string()), run.config);
    if (difference.empty()) return RunStatus::done;
    if (why) *why = difference;
  } catch (const std::exception& e) {  // no config.toml, or one this poslab cannot read
    if (why) *why = e.what();
  }
  return RunStatus::stale;
}

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || (c != 0 && std::strchr("_./=+:,@%-", c));
  });
  if (safe) return word;
  std::string out = "'";
  for (char c : word) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string export_command(const PlannedRun& run, const StudyLayout& layout,
                           const std::string& poslab, const fs::path& config_file) {
  std::vector<std::string> args = train_arguments(run, layout, poslab, 0);
  if (!config_file.empty()) args[3] = config_file.string();  // {poslab, train, --config, FILE}
  std::string train;
  for (const std::string& arg : args) train += (train.empty() ? "" : " ") + shell_quote(arg);
  // --resume: a finished run is skipped, a run another process trains is refused (its lock),
  // an unfinished one is trained again. The log is appended to: a refused second start must
  // not erase the log of the training that holds the run.
  return "cd " + shell_quote(fs::current_path().string()) + " && " + train + " --resume >> " +
         shell_quote(layout.log_file(run).string()) + " 2>&1";
}

namespace {

// ---------------------------------------------------------------------------------------------
// 4. The scheduler
// ---------------------------------------------------------------------------------------------

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

// Holds an exclusive lock on the results directory while the study runs, so that a second
// `poslab run` cannot delete the "incomplete" directories the first one is writing.
class ResultsLock {
 public:
  explicit ResultsLock(const fs::path& root) {
    const fs::path file = root / ".lock";
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot create " + file.string() + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw std::runtime_error("another `poslab run` is using " + root.string() +
                               " (it holds " + file.string() + "); wait for it or use --out");
    }
  }
  ~ResultsLock() { ::close(fd_); }
  ResultsLock(const ResultsLock&) = delete;
  ResultsLock& operator=(const ResultsLock&) = delete;

 private:
  int fd_ = -1;
};

class Scheduler {
 public:
  // `executable` is what is started; `shown_as` is the name the children and logs see.
  Scheduler(const Study& study, const std::vector<PlannedRun>& runs, const StudyLayout& layout,
            std::string executable, std::string shown_as, int jobs, std::ostream& out)
      : study_(study), runs_(runs), layout_(layout), executable_(std::move(executable)),
        shown_as_(std::move(shown_as)), jobs_(jobs),
        threads_(std::max(1, available_cores() / jobs)), out_(out) {}

  // Runs the runs at `todo` (indices into runs); returns the exit code.
  int run(const std::vector<std::size_t>& todo) {
    start_ = Clock::now();
    std::deque<std::size_t> queue(todo.begin(), todo.end());
    SignalWatch signals;
    bool forwarded = false;
    while (true) {
      while (!signals.interrupted_by() && running_.size() < static_cast<std::size_t>(jobs_) &&
             !queue.empty()) {
        start(queue.front());
        queue.pop_front();
      }
      if (running_.empty()) break;
      signals.wait(1000);
      if (signals.interrupted_by() && !forwarded) {
        out_ << "interrupted (" << strsignal(signals.interrupted_by()) << "): stopping "
             << running_.size() << " running run(s); they stay incomplete and rerun next time"
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

  void start(std::size_t index) {
    const PlannedRun& run = runs_[index];
    const fs::path dir = layout_.run_dir(run);
    try {
      // A run still trained by another process (a child of a runner killed with -9 that has
      // not died yet, another machine on a shared disk) is never deleted or started twice.
      if (is_being_trained(dir))
        throw std::runtime_error(dir.string() + " is being written by another poslab process; "
                                 "not started (run the study again once it has finished)");
      fs::remove_all(dir);  // what an interrupted run left behind
      fs::create_directories(dir.parent_path());
      write_config_file(run, layout_);
      const std::vector<std::string> args = train_arguments(run, layout_, shown_as_, threads_);
      std::string command;
      for (const std::string& a : args) command += (command.empty() ? "" : " ") + shell_quote(a);
      write_file_atomically(layout_.log_file(run), "# " + command + "\n");
      running_.push_back({spawn_child(executable_, args, layout_.log_file(run)), index, Clock::now()});
      out_ << "[start] " << run.id << "  -> " << dir.string() << "\n";
    } catch (const std::exception& e) {
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
    if (succeeded) {
      ++done;
      seconds_finished_ += seconds, ++count_finished_;
      out_ << "[done] " << run.id << " in " << format_duration(seconds) << "\n";
      update_summary();
    } else if (interrupted) {
      out_ << "[stopped] " << run.id << " (incomplete; reruns next time)\n";
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
         << failures_.size() << " failed] elapsed " << format_duration(elapsed) << ", ETA ";
    const std::size_t remaining = total - done - failures_.size();
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
    out_ << " (" << format_duration(elapsed) << "); summary: " << layout_.summary().string()
         << "\n";
    for (const std::string& f : failures_) out_ << "  FAILED " << f << "\n";
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
      out_ << "interrupted: " << total - done - failures_.size() << " run(s) not done ("
           << not_started << " not started); run the same command again to resume\n";
      return 128 + signal;
    }
    return failures_.empty() ? 0 : 1;
  }

  std::vector<std::string> commits_;  // builds behind the finished runs (provenance)
  std::string summary_error_;         // why the last summary could not be written, if it could not
  const Study& study_;
  const std::vector<PlannedRun>& runs_;
  const StudyLayout& layout_;
  std::string executable_, shown_as_;
  int jobs_, threads_;
  std::ostream& out_;
  Clock::time_point start_;
  std::vector<Child> running_;
  std::vector<std::string> failures_;
  double seconds_finished_ = 0;
  std::size_t count_finished_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// run_study: plan, check, then do what was asked
// ---------------------------------------------------------------------------------------------

// Does run `run` match one of the --only globs (its id or its directory name)?
bool selected(const PlannedRun& run, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(), [&run](const std::string& glob) {
    return ::fnmatch(glob.c_str(), run.id.c_str(), 0) == 0 ||
           ::fnmatch(glob.c_str(), run.dir_name.c_str(), 0) == 0;
  });
}

int run_study(const RunStudyOptions& options, std::ostream& out) {
  if (options.jobs < 1) throw std::runtime_error("--jobs must be at least 1");
  // These paths reach commands.txt and the Slurm scripts: a line break there would start a
  // command.
  check_path_argument("poslab run STUDY", options.study_path);
  if (!options.out.empty()) check_path_argument("--out", options.out);
  if (!options.poslab.empty()) check_path_argument("--poslab", options.poslab);
  const Study study = load_study(options.study_path);
  // May throw: nothing is written.
  std::vector<PlannedRun> runs = expand_study(study, options.smoke, options.overrides);

  StudyLayout layout;
  if (!options.out.empty()) layout.root = options.out;
  else layout.root = fs::path("results") / (study.name + (options.smoke ? "-smoke" : ""));
  place_runs(runs, layout);

  // --only chooses what is run or exported; the summary always covers the whole study.
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (selected(runs[i], options.only)) chosen.push_back(i);
  if (chosen.empty()) {
    std::string names;
    for (std::size_t i = 0; i < std::min<std::size_t>(runs.size(), 3); ++i)
      names += "\n  " + runs[i].id + "  (runs/" + runs[i].dir_name + ")";
    throw std::runtime_error("--only matches none of the " + std::to_string(runs.size()) +
                             " runs of " + study.source + "; a glob is matched against a run's "
                             "id or directory name, e.g.:" + names);
  }

  std::vector<RunStatus> status;
  std::vector<std::string> why(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) status.push_back(run_status(runs[i], layout, &why[i]));

  if (options.dry_run || options.summary_only) {
    std::vector<PlannedRun> shown;
    std::vector<RunStatus> shown_status;
    std::vector<std::string> shown_why;
    for (std::size_t i : chosen)
      shown.push_back(runs[i]), shown_status.push_back(status[i]), shown_why.push_back(why[i]);
    if (options.dry_run) {
      print_status(study, shown, shown_status, shown_why, layout,
                   "Dry run: nothing was run or written.", out);
      return 0;
    }
    // --summary-only: the table of what is finished, whatever else is going on; never a run.
    if (!fs::is_directory(layout.root))
      throw std::runtime_error("no results directory " + layout.root.string() +
                               ": the study has not run there (see --out)");
    write_summary(study, runs, layout);
    print_status(study, shown, shown_status, shown_why, layout,
                 "Nothing was run; summary: " + layout.summary().string(), out);
    return 0;
  }

  std::string stale;
  std::size_t stale_count = 0;
  for (std::size_t i : chosen)
    if (status[i] == RunStatus::stale && ++stale_count <= 5)
      stale += "\n  " + layout.run_dir(runs[i]).string() + ": " + why[i];
  if (stale_count > 5) stale += "\n  ... and " + std::to_string(stale_count - 5) + " more";
  if (!stale.empty())
    throw std::runtime_error("finished runs in " + layout.root.string() +
                             " were made with another config than " + study.source +
                             " now gives:" + stale +
                             "\ndelete those directories to run them again, or use --out DIR");

  if (!options.export_format.empty()) {
    std::vector<PlannedRun> exported;
    std::vector<RunStatus> exported_status;
    for (std::size_t i : chosen) exported.push_back(runs[i]), exported_status.push_back(status[i]);
    return export_runs(study, exported, exported_status, layout, options, out);
  }

  const std::string executable = child_executable(options);
  if (::access(executable.c_str(), X_OK) != 0)
    throw std::runtime_error("--poslab " + executable + ": not an executable file");

  fs::create_directories(layout.root);
  ResultsLock lock(layout.root);
  std::string study_copy = read_text_file(options.study_path);
  if (!options.overrides.empty()) {  // the copy says how these runs differ from the file
    study_copy += "\n# Run with these overrides on the command line (poslab run --set):\n";
    for (const std::string& o : options.overrides) study_copy += "#   --set " + o + "\n";
  }
  write_file_atomically(layout.root / "study.toml", study_copy);

  Scheduler scheduler(study, runs, layout, executable, exported_executable(options), options.jobs,
                      out);
  std::vector<std::size_t> todo;
  std::size_t running_elsewhere = 0;
  for (std::size_t i : chosen) {
    if (status[i] == RunStatus::done) ++scheduler.done;
    else if (status[i] == RunStatus::running) ++running_elsewhere;
    else todo.push_back(i);
  }
  scheduler.total = chosen.size() - running_elsewhere;
  out << "study '" << study.name << "': " << chosen.size() << " runs"
      << (chosen.size() < runs.size() ? " (--only; of " + std::to_string(runs.size()) + ")" : "")
      << ", " << scheduler.done << " already done, " << todo.size() << " to run, "
      << options.jobs << " at a time; results in " << layout.root.string() << std::endl;
  const std::string elsewhere =
      std::to_string(running_elsewhere) + " run(s) are being trained by another process (their "
      "directory is locked): left alone; run the study again once they finish";
  if (running_elsewhere) out << elsewhere << std::endl;
  const int code = scheduler.run(todo);
  if (running_elsewhere) out << "note: " << elsewhere << std::endl;
  return code;
}

// ---------------------------------------------------------------------------------------------
// 5. The command line
// ---------------------------------------------------------------------------------------------

CLI::App* add_run_command(CLI::App& app, RunStudyOptions& options) {
  CLI::App* run = app.add_subcommand(
      "run", "Run a study: every run of a grid of settings, N at a time, resumable, summarized.");
  run->add_option("study", options.study_path, "Study file, e.g. experiments/state_reuse.toml")
      ->type_name("STUDY")
      ->required();
  run->add_option("--jobs,-j", options.jobs,
                  "Runs at the same time (default 1); each gets max(1, cores / jobs) threads")
      ->type_name("N")
      ->check(CLI::Range(1, 1024));
  CLI::Option* dry_run = run->add_flag(
      "--dry-run", options.dry_run,
      "List the runs with their ids, directories and status (done/pending); write nothing");
  run->add_flag("--smoke", options.smoke,
                "Apply the [smoke] overrides (a tiny version); results go to results/NAME-smoke/");
  run->add_option("--out", options.out,
                  "Results directory (default results/NAME, or results/NAME-smoke with --smoke)")
      ->type_name("DIR");
  CLI::Option* export_option =
      run->add_option("--export", options.export_format,
                      "Run nothing: write the pending runs' configs and print one shell command "
                      "per run (commands), or write a Slurm job-array script (slurm)")
          ->type_name("commands|slurm")
          ->check(CLI::IsMember({"commands", "slurm"}));
  dry_run->excludes(export_option);
  CLI::Option* summary_only = run->add_flag(
      "--summary-only", options.summary_only,
      "Run nothing: list every run as done, running (another process trains it), incomplete, "
      "pending or stale, and write summary.csv from the finished ones");
  summary_only->excludes(export_option)->excludes(dry_run);
  run->add_option("--only", options.only,
                  "Only the runs whose id or directory name matches this glob (repeatable), "
                  "e.g. --only '*transformer_xl*'; the summary still covers every run")
      ->type_name("GLOB");
  run->add_option("--set", options.overrides,
                  "Override one config key in every run, after the study file (repeatable); "
                  "recorded in the results' study.toml. A finished run made without it is "
                  "then stale")
      ->type_name("SECTION.KEY=VALUE");
  run->add_option("--poslab", options.poslab,
                  "The poslab executable the runs use (default: this one, /proc/self/exe)")
      ->type_name("PATH");
  const std::string slurm_group = "Slurm (--export slurm; over the study's [slurm] table)";
  run->add_option("--partition", options.slurm.partition, "#SBATCH --partition")
      ->type_name("NAME")->group(slurm_group);
  run->add_option("--account", options.slurm.account, "#SBATCH --account")
      ->type_name("NAME")->group(slurm_group);
  run->add_option("--time", options.slurm.time, "#SBATCH --time: each run's limit, e.g. 2:00:00")
      ->type_name("TIME")->group(slurm_group);
  run->add_option("--mem", options.slurm.mem, "#SBATCH --mem, e.g. 4G")
      ->type_name("SIZE")->group(slurm_group);
  run->add_option("--cpus-per-task", options.slurm.cpus_per_task,
                  "#SBATCH --cpus-per-task; each training uses that many threads")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--array-throttle", options.slurm.array_throttle,
                  "At most N tasks of an array at once (--array=0-M%N)")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--max-array-size", options.slurm.max_array_size,
                  "Tasks per job array (default: MaxArraySize from `scontrol show config`, "
                  "else 1001); a larger study is split into several arrays")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--sbatch", options.slurm.extra,
                  "One more #SBATCH option, e.g. --sbatch=--qos=short (repeatable)")
      ->type_name("OPTION")->group(slurm_group);
  run->footer(R"(The study file (TOML):
  # free comments: what the study shows, how long it takes, the command to reproduce
  [study]
  name = "state_reuse"            # results go to results/<name>/ (or --out DIR)
  [base]                          # a run config, same schema as `poslab train` configs
  [base.model]                    # (out_dir is ignored: the runner sets it per run)
  d_model = 64
  [sweep]                         # grid axes: every combination is one run
  "encoding.type" = ["none", "shaw", "transformer_xl"]
  "train.seed" = [1, 2, 3]
  [[variant]]                     # optional: named override sets crossed with the grid
  name = "no_a"
  set = { "encoding.term_a" = false }
  [smoke]                         # overrides applied by --smoke: a tiny version in seconds
  "train.steps" = 5
Every run's config is checked before anything runs; a mistake names the file, line and key.
A run is named by its settings (encoding.type=shaw,train.seed=2, or no_a,train.seed=1).

Writes into the results directory (results/NAME, results/NAME-smoke with --smoke):
  configs/<run>.toml, runs/<run>/ (by `poslab train`; eval.json last), runs/<run>.log,
  summary.csv (a row per run and evaluation setting; columns study, run, one per axis,
  variant, kind, factor, seq_len, mem_len, split, loss, accuracy, exact_match,
  exact_match_ci_low/high (Wilson 95% over the instances), instances, tokens, peak_memory_mb,
  in_distribution_ok (the gate), unigram_loss, bigram_loss, train_loss,
  train_tokens_per_second, train_seconds, commit), loss_by_position.csv, study.toml (a copy);
  --export commands: commands.txt. --export slurm: slurm/<time>/ (commands.txt, array-K.sh
  job arrays, submit.sh, logs/), pinned: a later export never changes what a queued task runs;
  slurm/header.sh holds your own #SBATCH lines and is never overwritten.
Resumable: finished runs (with eval.json) are skipped; interrupted ones are deleted and rerun.
A run another process is training (it holds the run directory's lock) is never touched.
A failed run is reported with its log and the others go on; the exit code is then 1.
Ctrl-C stops the running runs (they rerun next time); exit code 130.
Example:
  poslab run experiments/state_reuse.toml --dry-run
  poslab run experiments/state_reuse.toml --smoke
  poslab run experiments/state_reuse.toml --jobs 2
  poslab run experiments/state_reuse.toml --export slurm --partition cpu --time 1:00:00
  poslab run experiments/state_reuse.toml --summary-only
  poslab run experiments/state_reuse.toml --only '*transformer_xl*' --set train.steps=100 --out /tmp/try)");
  return run;
}

}  // namespace poslab
