// `poslab report STUDY_DIR [--out DIR]`: a study's results as a static web site (claims,
// interactive figures, the run table, learning curves, protocol) that opens from disk.
//
// This file does the part that needs poslab's own knowledge of a study: which runs it plans and
// the status of each (study/runner.hpp's study_status, which `poslab run --dry-run` lists too:
// done, running, incomplete, pending, stale), written as JSON for notebooks/report.py, which
// builds the site (see its docstring):
//
//   [{"id": "all_terms,train.seed=1", "dir_name": "all_terms__train.seed-1",
//     "overrides": ["encoding.term_a=false", "train.seed=1"], "variant": "all_terms",
//     "status": "done"}, ...]
//
// The plan is that of STUDY_DIR/study.toml (the copy `poslab run` keeps), with --smoke and --set
// as `poslab run` recorded them in STUDY_DIR/run_options.json (so a study run with --smoke into
// any --out is reported as --smoke --dry-run lists it); without that file, with the [smoke]
// overrides when the directory's name ends in "-smoke" (where `poslab run --smoke` writes).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "config/toml_text.hpp"
#include "core/site_directory.hpp"
#include "study/runner.hpp"
#include "study/study.hpp"

namespace poslab {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The planned runs of the study in `root` and their status, or null (with a note on `out`) if
// the directory has no study.toml or this poslab cannot plan it.
nlohmann::json planned_runs(const fs::path& root, std::ostream& out) {
  const fs::path study_file = root / "study.toml";
  if (!fs::exists(study_file)) {
    out << "poslab report: " << study_file.string()
        << " not found: the run table lists the runs of summary.csv only\n";
    return nullptr;
  }
  // --smoke and --set as `poslab run` recorded them (run_options.json); a directory without the
  // record (made before it existed) is a smoke one if its name ends in "-smoke".
  const std::string name = fs::absolute(root).lexically_normal().filename().string();
  bool smoke = ends_with(name, "-smoke");
  std::vector<std::string> overrides;
  if (const fs::path record = root / kRunOptionsFile; fs::exists(record)) {
    try {
      const nlohmann::json options = nlohmann::json::parse(std::ifstream(record));
      smoke = options.at("smoke").get<bool>();
      overrides = options.at("set").get<std::vector<std::string>>();
    } catch (const std::exception& e) {
      out << "poslab report: cannot read " << record.string() << " (" << e.what()
          << "): the run table lists the runs of summary.csv only\n";
      return nullptr;
    }
  }
  std::vector<PlannedRun> runs;
  try {
    runs = expand_study(load_study(study_file.string()), smoke, overrides);
  } catch (const std::exception& e) {
    out << "poslab report: cannot plan " << study_file.string() << " (" << e.what()
        << "): the run table lists the runs of summary.csv only\n";
    return nullptr;
  }
  const StudyLayout layout{root};
  const std::vector<RunState> states = study_status(runs, layout);  // what --dry-run says
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    // A later stage's train.init_from as its config.toml holds it (the parent's directory, placed
    // by study_status), not as the study file's expansion spells it ("runs/<parent>").
    std::vector<std::string> overrides = runs[i].overrides;
    for (std::string& o : overrides)
      if (o.rfind("train.init_from=", 0) == 0)
        o = "train.init_from=" + toml_string(runs[i].config.train.init_from);
    list.push_back({{"id", runs[i].id},
                    {"dir_name", runs[i].dir_name},
                    {"overrides", overrides},
                    {"variant", runs[i].variant},
                    {"status", to_string(states[i].status)}});
  }
  return list;
}

}  // namespace

int run_report(const ReportOptions& options, std::ostream& out) {
  const fs::path root(options.study_dir);
  if (!fs::is_directory(root)) throw std::runtime_error(options.study_dir + ": not a directory");
  if (!fs::exists(root / "summary.csv"))
    throw std::runtime_error((root / "summary.csv").string() +
                             " not found (run the study first: poslab run "
                             "experiments/NAME.toml)");
  // --out: checked before anything else, built beside, swapped in only when complete.
  const fs::path default_out = root / "report";
  const fs::path out_dir = options.out_dir.empty() ? default_out : fs::path(options.out_dir);
  SiteDirectory site = SiteDirectory::prepare(out_dir, "report", {root}, default_out);

  const nlohmann::json runs = planned_runs(root, out);
  std::vector<std::string> arguments = {options.study_dir, "--out", site.staging().string(),
                                        "--staged"};
  if (options.debug) arguments.push_back("--debug");
  fs::path runs_file;
  if (!runs.is_null()) {
    runs_file = fs::temp_directory_path() /
                ("poslab-report-runs-" + std::to_string(::getpid()) + ".json");
    std::ofstream file(runs_file);
    file << runs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!file) throw std::runtime_error("cannot write " + runs_file.string());
    arguments.insert(arguments.end(), {"--runs", runs_file.string()});
  }
  int code = 0;
  try {
    code = run_python_script("report.py", arguments);
  } catch (...) {
    if (!runs_file.empty()) fs::remove(runs_file);
    throw;
  }
  if (!runs_file.empty()) fs::remove(runs_file);
  if (code != 0) return code;  // report.py said why; the staging directory goes, --out stays
  site.commit();

  std::uintmax_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out_dir))
    if (entry.is_regular_file()) total += entry.file_size();
  const fs::path index = out_dir / "index.html";
  out << index.string() << "  (" << std::fixed << std::setprecision(1) << double(total) / 1e6
      << " MB; open it in a browser: file://" << fs::absolute(index).lexically_normal().string()
      << ")\n";
  return 0;
}

}  // namespace poslab
