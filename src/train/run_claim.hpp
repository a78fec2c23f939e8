// Who is training a run: a claim file in the run directory, kept fresh by a heartbeat.
//
// One writer per run directory is first the kernel's business: `poslab train` holds an flock
// on the directory (DirectoryLock, run_dir.hpp), released however the process ends. That is
// enough on one machine. Two machines sharing the results over a network file system may not
// see each other's flocks (NFS without a lock manager), and a person looking at a directory
// wants to know *who* holds it. So the trainer also writes
//
//   claim.json   {"host": "node17", "pid": 4242, "job": "1234_7", "started": "...Z",
//                 "heartbeat": "...Z", "heartbeat_unix": 1795000000}
//
// and rewrites it every kHeartbeatSeconds from a background thread, until the run ends (the file
// is then removed; a finished run has eval.json instead). A claim is *live* if
//   - it was made on this host and its process is alive (kill(pid, 0)), or
//   - it was made on another host and its heartbeat is younger than stale_after_seconds.
// A claim that is not live is *stale*: its trainer died (killed at a time limit, a crashed
// node). A new trainer takes a stale claim over with a warning; a live one is refused with a
// message naming host, pid and job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace poslab {

constexpr int kHeartbeatSeconds = 30;
constexpr int kStaleAfterSeconds = 300;  // 10 missed heartbeats

struct ClaimInfo {
  std::string host;
  long pid = 0;
  std::string job;        // "1234_7" (Slurm array job and task), "1234", or ""
  std::string started;    // UTC, ISO 8601
  std::string heartbeat;  // UTC, ISO 8601
  long long heartbeat_unix = 0;

  std::string describe() const;  // "host node17, pid 4242, Slurm job 1234_7, heartbeat 12 s ago"
};

// The claim of `run_dir`, if it has a readable claim.json.
std::optional<ClaimInfo> read_claim(const std::filesystem::path& run_dir);

// Is this claim held by a live trainer (see above)?
bool claim_is_live(const ClaimInfo& claim, int stale_after_seconds = kStaleAfterSeconds);

// Is another process training `run_dir` now: its lock held (DirectoryLock) or its claim live?
bool trained_by_another(const std::filesystem::path& run_dir);

// Waits while another process trains `run_dir` (what a Slurm task does when a second submission
// of the same study reaches a run the first one is training: issue 32), saying so on `out`
// when it starts and every `report_every_seconds`. Returns whether it waited at all. Throws
// std::runtime_error once `max_seconds` have passed with the run still being trained.
bool wait_for_other_trainer(const std::filesystem::path& run_dir, int max_seconds,
                            std::ostream& out, int report_every_seconds = 300);

// The name of this machine (gethostname), as claims record it.
std::string this_host();

// Writes claim.json now and keeps its heartbeat fresh until destroyed; then removes it.
class RunClaim {
 public:
  explicit RunClaim(const std::filesystem::path& run_dir);
  ~RunClaim();
  RunClaim(const RunClaim&) = delete;
  RunClaim& operator=(const RunClaim&) = delete;

 private:
  void write_now();
  std::filesystem::path file_;
  ClaimInfo info_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace poslab
