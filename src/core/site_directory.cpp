// The output directory of `poslab report` and `poslab explore`; the rule is in the header.
#include "core/site_directory.hpp"

#include <fcntl.h>  // AT_FDCWD
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28, with _GNU_SOURCE)
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <system_error>

namespace poslab {

namespace fs = std::filesystem;

namespace {

// The path with symbolic links and "..", as far as it exists, resolved: two spellings of one
// place compare equal.
fs::path resolved(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal() : p;
}

// Is `inner` strictly below `outer`? (Both resolved.)
bool strictly_inside(const fs::path& inner, const fs::path& outer) {
  const fs::path relative = inner.lexically_relative(outer);
  return !relative.empty() && relative != "." && *relative.begin() != "..";
}

// What an older poslab wrote, before sites had a marker: exactly index.html, lib/ and data/,
// with data/report.js (a report) or data/index.js (an explorer).
bool is_unmarked_site(const fs::path& dir, const std::string& kind) {
  const std::set<std::string> layout = {"index.html", "lib", "data"};
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  const char* data_file = kind == "report" ? "report.js" : "index.js";
  return names == layout && fs::is_regular_file(dir / "data" / data_file);
}

// "thesis.tex, notes/, ..." : a few names of what a directory holds.
std::string some_entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string() + (entry.is_directory() ? "/" : ""));
  std::string text;
  int shown = 0;
  for (const std::string& name : names) {
    if (shown == 3) return text + ", ... (" + std::to_string(names.size()) + " entries)";
    text += (shown++ ? ", " : "") + name;
  }
  return text;
}

[[noreturn]] void refuse(const fs::path& out, const std::string& kind, const std::string& why) {
  throw std::runtime_error("--out " + out.string() + " " + why + "; poslab " +
                           (kind == "explorer" ? std::string("explore") : kind) +
                           " writes only a new directory, an empty one, or one it wrote before "
                           "(nothing was written)");
}

}  // namespace

std::string SiteDirectory::marker_name(const std::string& kind) { return ".poslab-" + kind; }

void SiteDirectory::check(const fs::path& out, const std::string& kind,
                          const std::vector<fs::path>& inputs, const fs::path& allowed_inside) {
  if (out.empty()) throw std::runtime_error("--out is empty: name a directory");
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(out, ec);
  if (fs::is_symlink(status))
    refuse(out, kind, "is a symbolic link (name the directory it points to, if that is meant)");
  if (fs::exists(status) && !fs::is_directory(status))
    refuse(out, kind,
           std::string("is ") + (fs::is_regular_file(status) ? "a file" : "not a directory"));

  // The inputs: never the output, never inside it, and the output inside one only at the
  // command's own place there (STUDY_DIR/report).
  const fs::path where = resolved(out);
  for (const fs::path& input : inputs) {
    const fs::path in = resolved(input);
    if (where == in) refuse(out, kind, "is the input " + input.string() + " itself");
    if (strictly_inside(in, where))
      refuse(out, kind, "holds the input " + input.string() + " (it would be deleted)");
    if (strictly_inside(where, in) &&
        (allowed_inside.empty() || where != resolved(allowed_inside)))
      refuse(out, kind,
             "is inside the input " + input.string() +
                 (allowed_inside.empty() ? std::string()
                                         : " (the one place there is " +
                                               allowed_inside.string() + ")"));
  }

  if (!fs::exists(status) || fs::is_empty(out, ec)) return;
  if (fs::exists(out / marker_name(kind)) || is_unmarked_site(out, kind)) return;
  for (const char* other : {"report", "explorer"})
    if (kind != other && fs::exists(out / marker_name(other)))
      refuse(out, kind, std::string("holds what poslab ") +
                            (other == std::string("report") ? "report" : "explore") + " wrote");
  refuse(out, kind, "holds files it did not make (" + some_entries(out) + ")");
}

SiteDirectory SiteDirectory::prepare(const fs::path& out, const std::string& kind,
                                     const std::vector<fs::path>& inputs,
                                     const fs::path& allowed_inside) {
  check(out, kind, inputs, allowed_inside);
  SiteDirectory site;
  site.out_ = out;
  site.kind_ = kind;
  // The parents that do not exist yet, deepest first (removed again if nothing is committed).
  const fs::path parent = fs::absolute(out).lexically_normal().parent_path();
  for (fs::path p = parent; !p.empty() && !fs::exists(p); p = p.parent_path())
    site.new_parents_.push_back(p);
  // Beside --out, on its filesystem, so that the swap is a rename; a name no one uses.
  std::random_device random;
  do {
    site.staging_ = parent / ("." + kind + "-staging-" + std::to_string(::getpid()) + "-" +
                              std::to_string(random() % 1000000));
  } while (fs::exists(fs::symlink_status(site.staging_)));
  return site;
}

void SiteDirectory::make_staging() {
  fs::create_directories(staging_.parent_path());
  if (!fs::create_directory(staging_))
    throw std::runtime_error("cannot make the staging directory " + staging_.string() +
                             ": it exists");
  fs::permissions(staging_, fs::perms(0755));
}

SiteDirectory::SiteDirectory(SiteDirectory&& other) noexcept
    : out_(std::move(other.out_)),
      staging_(std::move(other.staging_)),
      kind_(std::move(other.kind_)),
      new_parents_(std::move(other.new_parents_)),
      committed_(other.committed_) {
  other.staging_.clear();
  other.new_parents_.clear();
  other.committed_ = true;
}

SiteDirectory::~SiteDirectory() {
  if (committed_ || staging_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // nothing if it was never made
  for (const fs::path& p : new_parents_) fs::remove(p, ec);  // only if empty; deepest first
}

void SiteDirectory::commit() {
  {
    std::ofstream marker(staging_ / marker_name(kind_));
    marker << "Written by poslab " << (kind_ == "explorer" ? "explore" : kind_)
           << ". A later call with --out here replaces this directory whole.\n";
    if (!marker)
      throw std::runtime_error("cannot write " + (staging_ / marker_name(kind_)).string());
  }
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out_, ec))) {
    fs::rename(staging_, out_);
  } else {
    // Checked again just before the swap: the directory may have changed since prepare().
    check(out_, kind_, {}, {});
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(staging_);  // it now holds the old site
    } else if (errno == EINVAL || errno == ENOSYS) {
      // A filesystem that cannot exchange: the old site aside, the new one in, the old deleted.
      const fs::path old = staging_.string() + "-old";
      fs::rename(out_, old);
      fs::rename(staging_, out_);
      fs::remove_all(old);
    } else {
      throw std::runtime_error("cannot move the new " + kind_ + " into " + out_.string() + ": " +
                               std::strerror(errno));
    }
  }
  committed_ = true;
}

}  // namespace poslab
