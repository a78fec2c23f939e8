#include "train/run_dir.hpp"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

namespace poslab {

namespace fs = std::filesystem;

namespace {

std::runtime_error io_error(const std::string& what, const fs::path& file) {
  return std::runtime_error(what + " " + file.string() + ": " + std::strerror(errno));
}

// Writes all of `bytes` to the open descriptor, looping over short writes.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A name no other writer uses: hidden, next to the target, with our pid and a counter.
fs::path temporary_name_for(const fs::path& file) {
  static std::atomic<unsigned long> counter{0};
  std::string name = ".";
  name += file.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return file.parent_path() / name;
}

}  // namespace

int remove_dead_temporaries(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    // .NAME.tmp-PID-COUNTER, as temporary_name_for makes them
    const std::string name = entry.path().filename().string();
    const std::size_t tag = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || tag == std::string::npos) continue;
    const std::string rest = name.substr(tag + 5);  // PID-COUNTER
    const std::size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 ||
        rest.find_first_not_of("0123456789-") != std::string::npos)
      continue;
    const long pid = std::stol(rest.substr(0, dash));
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive
    std::error_code remove_error;
    if (fs::remove(entry.path(), remove_error)) ++removed;
  }
  return removed;
}

void write_file_atomically(const fs::path& file, std::string_view bytes) {
  const fs::path temporary = temporary_name_for(file);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot create", temporary);

  // The bytes must be on disk before the rename makes them visible under the final name;
  // otherwise a crash could leave a complete-looking name over incomplete contents.
  const bool written = write_all(fd, bytes) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!written) {
    ::unlink(temporary.c_str());
    errno = saved_errno;
    throw io_error("cannot write", file);
  }
  if (::rename(temporary.c_str(), file.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(temporary.c_str());
    errno = rename_errno;
    throw io_error("cannot rename a temporary file to", file);
  }
}

namespace {
fs::path with_suffix(const fs::path& dir, const char* suffix) { return dir.string() + suffix; }
}  // namespace

fs::path begin_directory(const fs::path& final_dir) {
  const fs::path partial = with_suffix(final_dir, ".partial");
  fs::remove_all(partial);  // left over from an interrupted save
  fs::create_directories(partial);
  return partial;
}

void publish_directory(const fs::path& final_dir) {
  const fs::path old_dir = with_suffix(final_dir, ".old");
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  fs::rename(with_suffix(final_dir, ".partial"), final_dir);
  fs::remove_all(old_dir);
}

std::optional<fs::path> complete_directory(const fs::path& final_dir, const std::string& marker) {
  if (fs::exists(final_dir / marker)) return final_dir;
  const fs::path old_dir = with_suffix(final_dir, ".old");  // a swap was interrupted
  if (fs::exists(old_dir / marker)) return old_dir;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// MetricsLog
// ---------------------------------------------------------------------------------------------

std::string MetricsLog::Cell::format(float x) {
  if (std::isnan(x)) return "";  // a missing value; pandas and numpy read an empty cell as NaN
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
}

std::string MetricsLog::Cell::format(double x) {
  if (std::isnan(x)) return "";
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
}

// RFC 4180: a cell with a comma, a quote or a line break is quoted, its quotes doubled.
std::string MetricsLog::Cell::quote(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {
std::string metrics_csv_line(const std::vector<MetricsLog::Cell>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + cells[i].text;
  return line + "\n";
}

std::vector<MetricsLog::Cell> header_cells(const std::vector<std::string>& columns) {
  return std::vector<MetricsLog::Cell>(columns.begin(), columns.end());
}
}  // namespace

MetricsLog::MetricsLog(const fs::path& file, std::vector<std::string> columns)
    : file_(file), columns_(std::move(columns)) {
  if (columns_.empty()) throw std::invalid_argument("MetricsLog needs at least one column");
  const std::string header = metrics_csv_line(header_cells(columns_));

  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(file_, ec)))
    throw std::runtime_error(file_.string() + " is a symbolic link; a run writes its own file");
  const bool is_new = !fs::exists(file_, ec) || fs::file_size(file_, ec) == 0;
  if (!is_new) {
    std::ifstream in(file_);
    std::string first_line;
    std::getline(in, first_line);
    if (first_line + "\n" != header)
      throw std::runtime_error(file_.string() + " has the columns '" + first_line +
                               "', not the ones this run logs: '" +
                               header.substr(0, header.size() - 1) + "'");
  }
  fd_ = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw io_error("cannot open", file_);
  if (is_new && !write_all(fd_, header)) {
    const int saved_errno = errno;
    ::close(fd_);
    errno = saved_errno;
    throw io_error("cannot write", file_);
  }
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

MetricsLog::MetricsLog(MetricsLog&& other) noexcept
    : file_(std::move(other.file_)), columns_(std::move(other.columns_)), fd_(other.fd_) {
  other.fd_ = -1;
}

void MetricsLog::append(const std::vector<Cell>& row) {
  if (row.size() != columns_.size())
    throw std::invalid_argument(file_.string() + ": a row of " + std::to_string(row.size()) +
                                " cells for " + std::to_string(columns_.size()) + " columns");
  // One write per line (O_APPEND): a reader sees whole lines, nothing is buffered.
  if (!write_all(fd_, metrics_csv_line(row))) throw io_error("cannot write", file_);
}

// ---------------------------------------------------------------------------------------------
// DirectoryLock
// ---------------------------------------------------------------------------------------------

std::optional<DirectoryLock> DirectoryLock::try_lock(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error("cannot open", dir);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int saved_errno = errno;
    ::close(fd);
    if (saved_errno == EWOULDBLOCK) return std::nullopt;
    errno = saved_errno;
    throw io_error("cannot lock", dir);
  }
  return DirectoryLock(fd);
}

bool DirectoryLock::is_held(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  try {
    return !try_lock(dir).has_value();
  } catch (const std::exception&) {
    return false;
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

// ---------------------------------------------------------------------------------------------
// RunDirectory
// ---------------------------------------------------------------------------------------------

RunDirectory RunDirectory::create(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path))
    throw std::runtime_error("cannot create run directory " + path.string() +
                             (ec ? ": " + ec.message() : ": a file of that name exists"));
  return RunDirectory(path);
}

RunDirectory RunDirectory::open(const fs::path& path) {
  if (!fs::is_directory(path))
    throw std::runtime_error("no run directory at " + path.string());
  remove_dead_temporaries(path);  // of a command killed mid-write (SIGKILL)
  return RunDirectory(path);
}

void RunDirectory::write_text(const std::string& name, const std::string& text) const {
  write_file_atomically(file(name), text);
}

void RunDirectory::write_json(const std::string& name, const nlohmann::json& value) const {
  write_file_atomically(file(name), value.dump(2) + "\n");
}

std::string RunDirectory::read_text(const std::string& name) const {
  std::ifstream in(file(name), std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file(name).string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json RunDirectory::read_json(const std::string& name) const {
  try {
    return nlohmann::json::parse(read_text(name));
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(file(name).string() + ": invalid JSON: " + e.what());
  }
}

MetricsLog RunDirectory::metrics(std::vector<std::string> columns) const {
  return MetricsLog(file("metrics.csv"), std::move(columns));
}

bool RunDirectory::is_complete() const { return fs::exists(file("eval.json")); }

}  // namespace poslab
