// core/site_directory.hpp: what `poslab report` and `poslab explore` may write over (issue 32).
// The commands themselves are run on each case in tests/bad_inputs/catalogue.sh; here the rule
// and the swap, case by case, in a scratch directory.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/site_directory.hpp"

namespace fs = std::filesystem;
using poslab::SiteDirectory;

namespace {

struct SiteScratch {
  fs::path root;
  SiteScratch() {
    root = fs::temp_directory_path() / ("poslab-site-test-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~SiteScratch() { fs::remove_all(root); }
};

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

std::string refusal(const fs::path& out, const std::string& kind, const fs::path& input,
                    const fs::path& allowed = {}) {
  try {
    SiteDirectory::check(out, kind, {input}, allowed);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a site goes only where the command made one, or where nothing is", "[site]") {
  SiteScratch s;
  const fs::path study = s.root / "study";
  write(study / "summary.csv", "run,kind\n");
  const fs::path own = study / "report";

  // Allowed: a new path, an empty directory, the default place inside the input.
  CHECK(refusal(s.root / "new" / "deeper", "report", study).empty());
  fs::create_directories(s.root / "empty");
  CHECK(refusal(s.root / "empty", "report", study).empty());
  CHECK(refusal(own, "report", study, own).empty());

  // Refused: the input, what holds it, a place inside it, a file, a link, a user's files.
  CHECK_THAT(refusal(study, "report", study), Catch::Contains("is the input"));
  CHECK_THAT(refusal(s.root, "report", study), Catch::Contains("holds the input"));
  CHECK_THAT(refusal(study / "runs", "report", study, own), Catch::Contains("is inside the input"));
  CHECK_THAT(refusal(study / "summary.csv", "report", study), Catch::Contains("is a file"));
  fs::create_directory_symlink(s.root / "empty", s.root / "link");
  CHECK_THAT(refusal(s.root / "link", "report", study), Catch::Contains("symbolic link"));
  write(s.root / "mine" / "thesis.tex", "chapter 1");
  CHECK_THAT(refusal(s.root / "mine", "report", study),
             Catch::Contains("holds files it did not make (thesis.tex)"));
  // Through another spelling of the same place (.., a link to the input).
  CHECK_THAT(refusal(s.root / "mine" / ".." / "study", "report", study),
             Catch::Contains("is the input"));
  fs::create_directory_symlink(study, s.root / "study_link");
  CHECK_THAT(refusal(s.root / "study_link" / "runs", "report", study, own),
             Catch::Contains("is inside the input"));

  // An older poslab's site (no marker, its exact layout) is the command's own; one more file
  // in it, or another command's marker, is not.
  const fs::path old_site = s.root / "old";
  write(old_site / "index.html", "");
  write(old_site / "lib" / "report.js", "");
  write(old_site / "data" / "report.js", "");
  CHECK(refusal(old_site, "report", study).empty());
  CHECK_THAT(refusal(old_site, "explorer", study), Catch::Contains("did not make"));
  write(old_site / "notes.txt", "");
  CHECK_THAT(refusal(old_site, "report", study), Catch::Contains("did not make"));
  write(s.root / "explorer" / ".poslab-explorer", "");
  CHECK_THAT(refusal(s.root / "explorer", "report", study),
             Catch::Contains("holds what poslab explore wrote"));
}

TEST_CASE("a site replaces the old one whole, and an unfinished one leaves no trace", "[site]") {
  SiteScratch s;
  const fs::path input = s.root / "run";
  fs::create_directories(input);
  const fs::path out = s.root / "a" / "b" / "site";

  {  // Never committed: no staging directory, no parents left behind.
    SiteDirectory site = SiteDirectory::prepare(out, "explorer", {input});
    site.make_staging();
    write(site.staging() / "index.html", "half");
  }
  CHECK_FALSE(fs::exists(s.root / "a"));

  for (const std::string page : {"first", "second"}) {
    SiteDirectory site = SiteDirectory::prepare(out, "explorer", {input});
    site.make_staging();
    write(site.staging() / "index.html", page);
    if (page == "first") write(site.staging() / "only-in-first.js", "");
    site.commit();
  }
  std::ifstream index(out / "index.html");
  std::string text;
  index >> text;
  CHECK(text == "second");
  CHECK(fs::exists(out / ".poslab-explorer"));
  CHECK_FALSE(fs::exists(out / "only-in-first.js"));  // replaced whole, not merged
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(out.parent_path())) (void)entry, ++entries;
  CHECK(entries == 1);  // no staging or old directory left beside it
}
