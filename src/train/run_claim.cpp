// The claim file of a run being trained (run_claim.hpp).
#include "train/run_claim.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <thread>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/provenance.hpp"
#include "train/run_dir.hpp"

namespace poslab {

namespace fs = std::filesystem;

namespace {

long long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The Slurm job this process runs in: "ARRAYJOB_TASK" for an array task, else "JOB", else "".
std::string slurm_job() {
  const char* array_job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (array_job && task) return std::string(array_job) + "_" + task;
  const char* job = std::getenv("SLURM_JOB_ID");
  return job ? job : "";
}

}  // namespace

bool trained_by_another(const fs::path& run_dir) {
  if (DirectoryLock::is_held(run_dir)) return true;
  const std::optional<ClaimInfo> claim = read_claim(run_dir);
  return claim && claim_is_live(*claim);
}

bool wait_for_other_trainer(const fs::path& run_dir, int max_seconds, std::ostream& out,
                            int report_every_seconds) {
  if (!trained_by_another(run_dir)) return false;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t).count();
  };
  auto who = [&run_dir] {
    const std::optional<ClaimInfo> claim = read_claim(run_dir);
    return claim ? claim->describe() : std::string("a process holding its lock");
  };
  out << "poslab train: " << run_dir.string() << " is being trained by " << who()
      << "; waiting for it to end (at most " << max_seconds << " s), then exiting by its "
      << "outcome\n" << std::flush;
  Clock::time_point last_report = start;
  while (trained_by_another(run_dir)) {
    if (seconds_since(start) >= max_seconds)
      throw std::runtime_error(run_dir.string() + " is still being trained by " + who() +
                               " after " + std::to_string(max_seconds) +
                               " s of waiting (--wait-for-trainer); not training it twice");
    if (seconds_since(last_report) >= report_every_seconds) {
      out << "poslab train: still waiting for " << who() << " (" << seconds_since(start)
          << " s)\n" << std::flush;
      last_report = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  out << "poslab train: the other trainer of " << run_dir.string() << " ended after "
      << seconds_since(start) << " s of waiting\n" << std::flush;
  return true;
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string ClaimInfo::describe() const {
  std::ostringstream s;
  s << "host " << host << ", pid " << pid;
  if (!job.empty()) s << ", Slurm job " << job;
  s << ", started " << started << ", heartbeat " << std::max(0LL, unix_now() - heartbeat_unix)
    << " s ago";
  return s.str();
}

std::optional<ClaimInfo> read_claim(const fs::path& run_dir) {
  std::ifstream in(run_dir / "claim.json");
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    ClaimInfo c;
    c.host = j.at("host").get<std::string>();
    c.pid = j.at("pid").get<long>();
    c.job = j.value("job", "");
    c.started = j.value("started", "");
    c.heartbeat = j.value("heartbeat", "");
    c.heartbeat_unix = j.at("heartbeat_unix").get<long long>();
    return c;
  } catch (const std::exception&) {  // half a file cannot exist (atomic writes): not a claim
    return std::nullopt;
  }
}

bool claim_is_live(const ClaimInfo& claim, int stale_after_seconds) {
  if (claim.host == this_host())  // here, the process table knows
    return claim.pid > 0 && (::kill(static_cast<pid_t>(claim.pid), 0) == 0 || errno == EPERM);
  return unix_now() - claim.heartbeat_unix < stale_after_seconds;
}

RunClaim::RunClaim(const fs::path& run_dir) : file_(run_dir / "claim.json") {
  info_.host = this_host();
  info_.pid = ::getpid();
  info_.job = slurm_job();
  info_.started = utc_now();
  write_now();
  heartbeat_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::seconds(kHeartbeatSeconds), [this] { return stop_; }))
      write_now();
  });
}

RunClaim::~RunClaim() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  heartbeat_.join();
  std::error_code ec;
  fs::remove(file_, ec);  // the run is over (finished, failed or interrupted): no one holds it
}

void RunClaim::write_now() {
  info_.heartbeat = utc_now();
  info_.heartbeat_unix = unix_now();
  const nlohmann::json j = {{"host", info_.host},           {"pid", info_.pid},
                            {"job", info_.job},             {"started", info_.started},
                            {"heartbeat", info_.heartbeat}, {"heartbeat_unix", info_.heartbeat_unix}};
  try {
    write_file_atomically(file_, j.dump(2) + "\n");
  } catch (const std::exception&) {
    // A full disk must not kill the training for its heartbeat; the flock still guards the run.
  }
}

}  // namespace poslab
