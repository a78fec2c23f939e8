// The output directory of `poslab report` and `poslab explore`: a web site that the command
// owns, written without ever destroying what the command did not make.
//
// Rule (issue 32: `--out` once deleted the command's own input and a user's thesis):
//   --out may be
//     - a path that does not exist yet (its parent directories are made as needed), or
//     - an empty directory, or
//     - a site this same command wrote before: it holds the marker file `.poslab-KIND`
//       (`.poslab-report`, `.poslab-explorer`), or the exact layout an older poslab wrote
//       (index.html, lib/, data/ with data/report.js or data/index.js, and nothing else).
//   --out may not be (a one-line error, nothing touched)
//     - a file, a symbolic link or anything else that is not a directory;
//     - a directory holding anything else (a user's own files, another command's site);
//     - one of the command's inputs, an ancestor of one (it would hold the input), or a path
//       inside one, except the command's own default place there (STUDY_DIR/report).
//
// How it is written: into a fresh staging directory beside --out (same filesystem), made only
// when the writing starts (so that an error found before leaves every directory untouched, its
// modification time included); it receives the marker when the site is complete; then the
// staging directory and the old site are swapped in one atomic rename (Linux renameat2
// RENAME_EXCHANGE; two renames where the filesystem cannot exchange), and the old site is
// deleted. An error before the swap deletes the staging directory (and the parents of --out it
// made) and leaves --out as it was.
//
//   SiteDirectory site = SiteDirectory::prepare(out, "report", {study_dir}, study_dir / "report");
//   ... everything that can fail on bad input ...
//   site.make_staging();    // or let a child process make site.staging() (report.py does)
//   write everything into site.staging();
//   site.commit();          // the destructor removes the staging directory if never committed
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace poslab {

class SiteDirectory {
 public:
  // Checks `out` by the rule above (throws std::runtime_error naming --out and the problem) and
  // chooses the staging directory's name; makes nothing. `kind` names the command ("report", "explorer"); `inputs` are
  // the paths it reads; `allowed_inside` is the one path inside an input --out may be ("": none).
  static SiteDirectory prepare(const std::filesystem::path& out, const std::string& kind,
                               const std::vector<std::filesystem::path>& inputs,
                               const std::filesystem::path& allowed_inside = {});

  // Throws like prepare() if `out` may not receive the site; makes and changes nothing.
  static void check(const std::filesystem::path& out, const std::string& kind,
                    const std::vector<std::filesystem::path>& inputs,
                    const std::filesystem::path& allowed_inside = {});

  // The marker a finished site holds: ".poslab-report", ".poslab-explorer".
  static std::string marker_name(const std::string& kind);

  SiteDirectory(SiteDirectory&& other) noexcept;
  SiteDirectory& operator=(SiteDirectory&&) = delete;
  SiteDirectory(const SiteDirectory&) = delete;
  ~SiteDirectory();

  // Makes the parents of --out and the (empty) staging directory.
  void make_staging();

  const std::filesystem::path& staging() const { return staging_; }
  const std::filesystem::path& out() const { return out_; }

  // Writes the marker into the staging directory and swaps it into place of --out.
  void commit();

 private:
  SiteDirectory() = default;
  std::filesystem::path out_, staging_;
  std::string kind_;
  std::vector<std::filesystem::path> new_parents_;  // missing at prepare(): removed again
                                                    // (if empty) when nothing is committed
  bool committed_ = false;
};

}  // namespace poslab
