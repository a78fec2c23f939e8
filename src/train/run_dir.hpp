// One run's output directory, and the rule for writing into it: a file is either absent or
// complete. Every file is written to a temporary name first and then renamed into place (rename
// is atomic on POSIX file systems), so a run killed mid-write never leaves a half-written
// config.toml or eval.json that looks finished. `eval.json` is written last by a run, which makes
// its presence the mark of a finished run (`is_complete`).
//
// A run directory holds, by convention:
//   config.toml    the fully resolved config (config_to_toml)
//   metrics.csv    one row per logged step (MetricsLog), readable while the run goes on
//   checkpoint/    the parameters as .npy files (train/checkpoint.hpp)
//   eval.json      the final evaluation; written last
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace poslab {

// Writes `bytes` to `file` all-or-nothing: a temporary file in the same directory, flushed to
// disk, then renamed over `file`. Throws std::runtime_error (naming the file) on failure, after
// removing the temporary file.
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes);

// Removes from `dir` (not below it) the temporary files of write_file_atomically whose writer
// is no longer alive on this machine (killed mid-write: the temporary .NAME.tmp-PID-N is left
// behind); returns how many.
// RunDirectory::open calls it, so the next command on a run cleans up after a killed one.
int remove_dead_temporaries(const std::filesystem::path& dir);

// Directories that appear all at once (checkpoint/, resume/): the files are written into
// `final_dir`.partial/, which is then swapped in. Between the two renames of the swap only
// `final_dir`.old exists, so a crash at any point leaves one complete directory to read.
std::filesystem::path begin_directory(const std::filesystem::path& final_dir);   // -> .partial, empty
void publish_directory(const std::filesystem::path& final_dir);                  // .partial -> final
// The complete directory to read: `final_dir`, else `final_dir`.old, if it holds `marker`.
std::optional<std::filesystem::path> complete_directory(const std::filesystem::path& final_dir,
                                                        const std::string& marker);

// Appends rows to a CSV file, one flushed line per call, so that a plot can read it while the run
// is still going. The header is written when the file is new; an existing file is appended to if
// its header names the same columns (a resumed run), and refused otherwise.
//
//   MetricsLog log(run.file("metrics.csv"), {"step", "lr", "train_loss"});
//   log.append({step, lr, loss});
class MetricsLog {
 public:
  // One CSV cell: a number (written exactly, shortest form; NaN as an empty cell) or text
  // (quoted if it needs to be).
  struct Cell {
    template <class Integer>
      requires std::is_integral_v<Integer>
    Cell(Integer x) : text(std::to_string(x)) {}
    template <class Real>
      requires std::is_floating_point_v<Real>
    Cell(Real x) : text(format(x)) {}
    Cell(const std::string& s) : text(quote(s)) {}
    Cell(const char* s) : text(quote(s)) {}

    std::string text;

   private:
    static std::string format(float x);   // shortest text that reads back as this float
    static std::string format(double x);  // ... as this double
    static std::string format(long double x) { return format(static_cast<double>(x)); }
    static std::string quote(const std::string& s);
  };

  MetricsLog(const std::filesystem::path& file, std::vector<std::string> columns);

  // One row, one cell per column, in the order given at construction.
  void append(const std::vector<Cell>& row);

  const std::vector<std::string>& columns() const { return columns_; }
  const std::filesystem::path& file() const { return file_; }

  ~MetricsLog();
  MetricsLog(MetricsLog&& other) noexcept;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  MetricsLog& operator=(MetricsLog&&) = delete;

 private:
  std::filesystem::path file_;
  std::vector<std::string> columns_;
  int fd_ = -1;  // opened without following a symbolic link (O_NOFOLLOW), for appending
};

// An exclusive lock on a directory (flock on the directory's own descriptor, so no file is
// added to it), held by the one process that writes the run in it: a second `poslab train`
// into the same --out, or a `poslab run` that would restart a run still being trained, finds
// it taken. The kernel releases it when the holder exits, however it exits.
class DirectoryLock {
 public:
  // The lock, or nothing if another process holds it. Throws if `dir` cannot be opened.
  static std::optional<DirectoryLock> try_lock(const std::filesystem::path& dir);
  // Whether another process holds the lock of `dir` now (false if `dir` does not exist).
  static bool is_held(const std::filesystem::path& dir);

  ~DirectoryLock();
  DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  DirectoryLock& operator=(DirectoryLock&&) = delete;

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

class RunDirectory {
 public:
  // Creates the directory and any missing parents (mkdir -p); fine if it exists already.
  static RunDirectory create(const std::filesystem::path& path);
  // A directory that must already exist (e.g. the run `poslab eval` reads).
  static RunDirectory open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

  // Atomic writes (see write_file_atomically): `name` is a file name inside the directory.
  void write_text(const std::string& name, const std::string& text) const;
  void write_json(const std::string& name, const nlohmann::json& value) const;  // indented

  std::string read_text(const std::string& name) const;
  nlohmann::json read_json(const std::string& name) const;

  // metrics.csv, opened for appending.
  MetricsLog metrics(std::vector<std::string> columns) const;

  // The run finished: its last file, eval.json, exists.
  bool is_complete() const;

 private:
  explicit RunDirectory(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace poslab
