// Studies in stages (study/study.hpp): a [[variant]] with `from = "NAME"` fine-tunes the run of
// variant NAME at the same grid point. The expansion (inherited settings, the parent, the stage),
// the mistakes found at load time (unknown parent, cycle, train.init_from written by hand), and,
// through the real binary: parents trained before their children even with --jobs 2, a failed
// parent's children reported as not run, resume and --summary-only, and the Slurm export of the
// stages as job arrays that depend on each other (afterok).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "config/toml_text.hpp"
#include "process_helpers.hpp"
#include "study/runner.hpp"
#include "study/slurm_export.hpp"
#include "study/study.hpp"
#include "study_helpers.hpp"
#include "train/checkpoint.hpp"
#include "train/run_dir.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Two stages: "short" trains at segment 8 from scratch, "long" fine-tunes it at segment 16 with
// a lower learning rate; two seeds. Line numbers matter to the error tests below.
const char* kStages = R"([study]
name = "stages"
[base.encoding]
type = "rope"
[sweep]
"train.seed" = [1, 2]
[[variant]]
name = "long"
from = "short"
set = { "train.seq_len" = 16, "train.lr" = 3e-4 }
[[variant]]
name = "short"
set = { "model.d_inner" = 32 }
)";

std::string stage_study_error(const std::string& text) {
  try {
    poslab::expand_study(poslab::parse_study(text, "exp/stages.toml"));
  } catch (const poslab::ConfigError& e) {
    return e.what();
  }
  FAIL("no error for:\n" << text);
  return "";
}


// `poslab report STUDY_DIR --out OUT`: the status of each run in the run table it writes (the
// page's data, OUT/data/report.js: "window.POSLAB_REPORT = {...};"), by run id.
// The run table of the report `poslab report` writes for study_dir into out: id -> that run's
// row (status, "difference from the base", ...).
std::map<std::string, nlohmann::json> report_rows(const fs::path& study_dir, const fs::path& out) {
  std::ostringstream said;
  poslab::ReportOptions options;
  options.study_dir = study_dir.string();
  options.out_dir = out.string();
  REQUIRE(poslab::run_report(options, said) == 0);
  std::string page = read_file(out / "data" / "report.js");
  page = page.substr(page.find('{'), page.rfind('}') - page.find('{') + 1);
  const nlohmann::json data = nlohmann::json::parse(page);
  std::map<std::string, nlohmann::json> rows;
  for (const nlohmann::json& run : data.at("runs")) rows[run["id"].get<std::string>()] = run;
  return rows;
}

std::map<std::string, std::string> report_statuses(const fs::path& study_dir, const fs::path& out) {
  std::map<std::string, std::string> status;
  for (const auto& [id, row] : report_rows(study_dir, out))
    status[id] = row["status"].get<std::string>();
  return status;
}

// A runnable two-stage study in `dir` (the tiny model of study_helpers), results in dir/results.
struct StagedStudy {
  fs::path file;
  poslab::StudyLayout layout;
  std::vector<poslab::PlannedRun> runs;

  StagedStudy(const fs::path& dir, const std::string& base_variant_set = "") {
    file = dir / "stages.toml";
    write_file(file, "[study]\nname = \"stages\"\n" + tiny_base(write_corpus(dir), 4) +
                         "[base.encoding]\ntype = \"rope\"\n"
                         "[sweep]\n\"train.seed\" = [1, 2]\n"
                         "[[variant]]\nname = \"short\"\nset = { " + base_variant_set + " }\n"
                         "[[variant]]\nname = \"long\"\nfrom = \"short\"\n"
                         "set = { \"train.seq_len\" = 16, \"train.steps\" = 3 }\n");
    layout.root = dir / "results";
    runs = poslab::expand_study(poslab::load_study(file.string()));
    poslab::place_runs(runs, layout);
  }
  poslab::RunStudyOptions options() const {
    poslab::RunStudyOptions o;
    o.study_path = file.string();
    o.out = layout.root.string();
    o.poslab = POSLAB_BINARY;
    return o;
  }
  fs::path run_dir(std::size_t i) const { return layout.run_dir(runs[i]); }
};

}  // namespace

TEST_CASE("a variant with from starts from its parent variant's run at the same grid point",
          "[stages]") {
  const poslab::Study study = poslab::parse_study(kStages, "stages.toml");
  REQUIRE(study.variants.size() == 2);
  CHECK(study.variants[0].from == "short");
  CHECK(study.variants[0].from_line == 9);
  std::vector<poslab::PlannedRun> runs = poslab::expand_study(study);
  REQUIRE(runs.size() == 4);
  // File order: "long" first; its parents come later in the list, which changes nothing.
  CHECK(runs[0].id == "long,train.seed=1");
  CHECK(runs[0].parent == 2);
  CHECK(runs[0].parent_id == "short,train.seed=1");
  CHECK(runs[0].stage == 1);
  CHECK(runs[1].parent == 3);
  CHECK(runs[2].id == "short,train.seed=1");
  CHECK(runs[2].parent == poslab::PlannedRun::kNoParent);
  CHECK(runs[2].stage == 0);
  // The child inherits its parent's `set`, then applies its own.
  CHECK(runs[0].config.model.d_inner == 32);
  CHECK(runs[0].config.train.seq_len == 16);
  CHECK(runs[0].config.train.lr == 3e-4);
  CHECK(runs[2].config.train.seq_len == poslab::TrainConfig{}.seq_len);
  CHECK(runs[0].config.train.init_from == "runs/short__train.seed-1");
  CHECK(runs[2].config.train.init_from.empty());
  // Placed in a results directory, the child's init_from is its parent's run directory.
  poslab::StudyLayout layout;
  layout.root = "results/stages";
  poslab::place_runs(runs, layout);
  CHECK(runs[1].config.train.init_from == "results/stages/runs/short__train.seed-2");
  CHECK(runs[1].config.out_dir == "results/stages/runs/long__train.seed-2");

  SECTION("a chain of three stages inherits every ancestor's set, oldest first") {
    const auto chain = poslab::expand_study(poslab::parse_study(
        std::string(kStages) + "[[variant]]\nname = \"longer\"\nfrom = \"long\"\n"
                               "set = { \"train.seq_len\" = 32 }\n", "chain.toml"));
    REQUIRE(chain.size() == 6);
    CHECK(chain[4].id == "longer,train.seed=1");
    CHECK(chain[4].parent == 0);
    CHECK(chain[4].stage == 2);
    CHECK(chain[4].config.model.d_inner == 32);  // from short
    CHECK(chain[4].config.train.lr == 3e-4);     // from long
    CHECK(chain[4].config.train.seq_len == 32);  // its own
  }
}

TEST_CASE("a zero-shot variant (train.steps = 0) stays at zero steps under --smoke", "[stages]") {
  // [smoke] shrinks every run to 2 steps; a variant that only reads its parent must stay a read:
  // 2 steps of training would make it a (tiny) fine-tune, and the smoke study would test the
  // wrong thing.
  const std::string text = std::string(kStages) +
                           "[[variant]]\nname = \"zero_shot\"\nfrom = \"short\"\n"
                           "set = { \"train.steps\" = 0 }\n[smoke]\n\"train.steps\" = 2\n";
  const poslab::Study study = poslab::parse_study(text, "stages.toml");
  for (bool smoke : {false, true}) {
    for (const poslab::PlannedRun& run : poslab::expand_study(study, smoke)) {
      INFO(run.id << (smoke ? " with --smoke" : ""));
      if (run.variant == "zero_shot") CHECK(run.config.train.steps == 0);
      else CHECK(run.config.train.steps == (smoke ? 2 : poslab::TrainConfig{}.steps));
    }
  }
}

TEST_CASE("stage mistakes are found at load time, with file and line", "[stages]") {
  const std::string head = "[study]\nname = \"x\"\n[[variant]]\nname = \"base32\"\n";
  SECTION("a parent that is not a variant, with a did-you-mean") {
    const std::string e = stage_study_error(head + "[[variant]]\nname = \"ft\"\nfrom = \"base23\"\n");
    CHECK_THAT(e, Contains("exp/stages.toml:7: variant 'ft' has from = \"base23\", which is not a "
                           "variant of this study (did you mean 'base32'?); its variants are: "
                           "base32, ft"));
    // Issue 33: a run outside the study is started from with train.init_from in [base.train].
    CHECK_THAT(e, Contains("to start from a run outside this study, give its directory as "
                           "train.init_from in [base.train]"));
  }
  SECTION("a variant from itself") {
    const std::string e = stage_study_error(head + "from = \"base32\"\n");
    CHECK_THAT(e, Contains("exp/stages.toml:5:") && Contains("cannot start from its own runs"));
  }
  SECTION("a cycle") {
    const std::string e = stage_study_error(
        "[study]\nname = \"x\"\n[[variant]]\nname = \"a\"\nfrom = \"b\"\n"
        "[[variant]]\nname = \"b\"\nfrom = \"c\"\n[[variant]]\nname = \"c\"\nfrom = \"a\"\n");
    CHECK_THAT(e, Contains("exp/stages.toml:5: variants start from each other in a cycle: "
                           "a from b from c from a"));
  }
  SECTION("from is not a string") {
    const std::string e = stage_study_error(head + "from = 3\n");
    CHECK_THAT(e, Contains("exp/stages.toml:5: variant 'from' must be a string"));
  }
  SECTION("train.init_from written by hand in a variant, [sweep] or [smoke]") {
    for (const std::string& text : std::vector<std::string>{
             head + "set = { \"train.init_from\" = \"runs/x\" }\n",
          "[study]\nname = \"x\"\n[sweep]\n\"train.init_from\" = [\"a\", \"b\"]\n",
          "[study]\nname = \"x\"\n[smoke]\n\"train.init_from\" = \"a\"\n"}) {
      INFO(text);
      CHECK_THAT(stage_study_error(text), Contains("train.init_from cannot be set here") &&
                                        Contains("from = \"VARIANT\""));
    }
  }
}

TEST_CASE("poslab run trains parents before children, resumes, and summarizes the stages",
          "[stages][cli]") {
  ScratchDirectory scratch;
  const StagedStudy study(scratch.path);
  poslab::RunStudyOptions options = study.options();
  options.jobs = 2;  // children are queued before their parents could finish
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("4 of 4 runs done"));
  for (std::size_t child : {2, 3}) {
    const std::size_t parent = study.runs[child].parent;
    REQUIRE(parent == child - 2);
    const nlohmann::json eval = json_of(study.run_dir(child) / "eval.json");
    const nlohmann::json parent_eval = json_of(study.run_dir(parent) / "eval.json");
    // Started from that very checkpoint, and only after the parent had finished.
    CHECK(eval["provenance"]["init_from"]["checkpoint_sha256"] ==
          poslab::checkpoint_sha256(study.run_dir(parent)));
    CHECK(eval["provenance"]["init_from"]["path"] == study.run_dir(parent).string());
    CHECK(eval["provenance"]["started"].get<std::string>() >=
          parent_eval["provenance"]["finished"].get<std::string>());
  }
  const std::string summary = read_file(study.layout.summary());
  CHECK_THAT(summary, Contains("study,run,train.seed,variant,parent,kind") &&
                          Contains("stages,\"long,train.seed=1\",1,long,\"short,train.seed=1\",main"));

  SECTION("run again: everything is done, nothing is trained") {
    std::ostringstream again;
    REQUIRE(poslab::run_study(options, again) == 0);
    CHECK_THAT(again.str(), Contains("4 already done, 0 to run"));
  }
  SECTION("--summary-only and --dry-run show each child's parent") {
    poslab::RunStudyOptions summary_only = options;
    summary_only.summary_only = true;
    std::ostringstream listed;
    REQUIRE(poslab::run_study(summary_only, listed) == 0);
    CHECK_THAT(listed.str(), Contains("long,train.seed=2") && Contains("from short,train.seed=2") &&
                                 Contains("4 done, 0 pending"));
  }
  SECTION("poslab report says what --dry-run says: every stage done, by any path") {
    // Issue 33: the report called every finished child stale, having compared its config
    // with one whose train.init_from was not the parent's directory. The results directory is
    // named here as ".../results/.", another path to it than `poslab run` was given: where the
    // parent lies is no part of the experiment.
    const fs::path same_dir = study.layout.root / ".";
    const std::map<std::string, std::string> status =
        report_statuses(same_dir, scratch.path / "report");
    REQUIRE(status.size() == 4);
    for (const auto& [id, s] : status) CHECK(id + ": " + s == id + ": done");
    poslab::RunStudyOptions dry = options;
    dry.dry_run = true;
    dry.out = same_dir.string();
    std::ostringstream listed;
    REQUIRE(poslab::run_study(dry, listed) == 0);
    CHECK_THAT(listed.str(), Contains("4 done, 0 pending"));
  }
  SECTION("the report's difference from the base names the parent as config.toml does") {
    // Issue 33: the column showed train.init_from="runs/short__train.seed-1" where the run's
    // config.toml holds the parent's directory under the results directory.
    const std::map<std::string, nlohmann::json> rows =
        report_rows(study.layout.root, scratch.path / "report");
    const std::string made = read_file(study.run_dir(3) / "config.toml");
    const std::string expected =
        "train.init_from=" + poslab::toml_string(study.run_dir(1).string());
    REQUIRE_THAT(made, Contains("init_from = " + poslab::toml_string(study.run_dir(1).string())));
    CHECK_THAT(rows.at("long,train.seed=2")["diff"].dump(), Contains(nlohmann::json(expected).dump()));
  }
  SECTION("a parent trained again since makes its finished children stale") {
    // Seed 1's parent now holds another checkpoint (one parameter of seed 2's parent).
    fs::copy_file(study.run_dir(1) / "checkpoint" / "output.b.npy",
                  study.run_dir(0) / "checkpoint" / "output.b.npy",
                  fs::copy_options::overwrite_existing);
    poslab::RunStudyOptions dry = options;
    dry.dry_run = true;
    std::ostringstream listed;
    REQUIRE(poslab::run_study(dry, listed) == 0);
    CHECK_THAT(listed.str(), Contains("stale      long,train.seed=1") &&
                                 Contains("it started from another checkpoint of its parent " +
                                          study.run_dir(0).string()) &&
                                 Contains("the parent was trained again since") &&
                                 Contains("done       long,train.seed=2"));
    // The report's run table: the same status for every run.
    const std::map<std::string, std::string> status =
        report_statuses(study.layout.root, scratch.path / "report");
    CHECK(status.at("long,train.seed=1") == "stale");
    CHECK(status.at("long,train.seed=2") == "done");
    CHECK(status.at("short,train.seed=1") == "done");
    std::ostringstream refused;
    CHECK_THROWS_WITH(poslab::run_study(options, refused), Contains("made with another config"));
  }
  SECTION("a child deleted is trained again from its finished parent alone") {
    fs::remove_all(study.run_dir(3));
    std::ostringstream again;
    REQUIRE(poslab::run_study(options, again) == 0);
    CHECK_THAT(again.str(), Contains("3 already done, 1 to run"));
    CHECK(fs::exists(study.run_dir(3) / "eval.json"));
  }
}

// Issue 51: a later stage's eval.stream_length longer than the split was found only when that
// stage started, after its parents had trained; it is now found before anything runs.
TEST_CASE("a later stage's stream longer than its split is refused before any run", "[stages]") {
  ScratchDirectory scratch;
  const StagedStudy study(scratch.path);
  std::string text = read_file(study.file);
  const std::string long_set = "set = { \"train.seq_len\" = 16, \"train.steps\" = 3 }";
  REQUIRE(text.find(long_set) != std::string::npos);
  text.replace(text.find(long_set), long_set.size(),
               "set = { \"train.seq_len\" = 16, \"train.steps\" = 3, "
               "\"eval.stream_length\" = 100000 }");
  write_file(study.file, text);
  poslab::RunStudyOptions options = study.options();
  options.dry_run = true;
  std::ostringstream out;
  CHECK_THROWS_WITH(poslab::run_study(options, out),
                    Contains("stages.toml:") &&
                        Contains("eval.stream_length = 100000 is longer than the valid split") &&
                        Contains("run 'long,train.seed=1'"));
  CHECK_FALSE(fs::exists(study.layout.root));
}

// Issue 51: the report called every run of a finished --smoke study stale (8 of 8) when its
// results directory's name did not end in "-smoke": it planned the full study. It now plans
// with the --smoke and --set that `poslab run` recorded (run_options.json).
TEST_CASE("the report of a study run with --smoke and --set says what --dry-run says",
          "[stages][cli]") {
  ScratchDirectory scratch;
  const StagedStudy study(scratch.path, "\"model.d_inner\" = 24");
  write_file(study.file, read_file(study.file) + "[smoke]\n\"train.steps\" = 2\n");
  poslab::RunStudyOptions options = study.options();  // --out results: no "-smoke" suffix
  options.smoke = true;
  options.overrides = {"train.lr=0.002"};
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  INFO(out.str());
  poslab::RunStudyOptions dry = options;
  dry.dry_run = true;
  std::ostringstream listed;
  REQUIRE(poslab::run_study(dry, listed) == 0);
  CHECK_THAT(listed.str(), Contains("4 done, 0 pending"));
  const std::map<std::string, std::string> status =
      report_statuses(study.layout.root, scratch.path / "report");
  REQUIRE(status.size() == 4);
  for (const auto& [id, s] : status) CHECK(id + ": " + s == id + ": done");
}

TEST_CASE("a failed parent's children are reported as not run", "[stages][cli]") {
  ScratchDirectory scratch;
  const StagedStudy study(scratch.path);
  poslab::RunStudyOptions options = study.options();
  options.jobs = 2;
  // Every parent fails at its start: an evaluation segment longer than the validation split.
  options.overrides = {"eval.seq_len=100000"};
  std::ostringstream out;
  CHECK(poslab::run_study(options, out) == 1);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("[FAILED] short,train.seed=1") &&
                            Contains("[NOT RUN] long,train.seed=1: its parent "
                                     "'short,train.seed=1' failed") &&
                            Contains("[NOT RUN] long,train.seed=2") &&
                            Contains("0 of 4 runs done, 2 failed, 2 not run (their parent did not "
                                     "finish)"));
  CHECK_FALSE(fs::exists(study.run_dir(2)));  // the children were never started
  CHECK_FALSE(fs::exists(study.run_dir(3)));
}

TEST_CASE("slurm export of a two-stage study: the second stage depends on the first (afterok)",
          "[stages][slurm]") {
  ScratchDirectory scratch;
  const StagedStudy study(scratch.path);
  poslab::RunStudyOptions options = study.options();
  options.export_format = "slurm";
  options.slurm.max_array_size = 1000;
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("in 2 stages"));
  fs::path dir;
  for (const auto& entry : fs::directory_iterator(study.layout.root / "slurm"))
    if (entry.is_directory()) dir = entry.path();
  REQUIRE(!dir.empty());

  // Parents (stage 1) first in commands.txt, then children (stage 2), one array each.
  const std::vector<std::string> commands = lines_of(read_file(dir / "commands.txt"));
  REQUIRE(commands.size() == 4);
  CHECK_THAT(commands[0], Contains("short__train.seed-1.toml"));
  CHECK_THAT(commands[1], Contains("short__train.seed-2.toml"));
  CHECK_THAT(commands[2], Contains("long__train.seed-1.toml"));
  const std::string first = read_file(dir / "array-0.sh"), second = read_file(dir / "array-1.sh");
  CHECK_THAT(first, Contains("#SBATCH --array=0-1\n") && Contains("# Stage 1 of 2") &&
                        Contains("SLURM_ARRAY_TASK_ID + 1)"));
  CHECK_THAT(first, !Contains("--kill-on-invalid-dep"));
  CHECK_THAT(second, Contains("#SBATCH --array=0-1\n") && Contains("# Stage 2 of 2") &&
                         Contains("SLURM_ARRAY_TASK_ID + 3)") &&
                         Contains("#SBATCH --kill-on-invalid-dep=yes\n"));
  const std::string submit = read_file(dir / "submit.sh");
  CHECK_THAT(submit, Contains("job_0=$(submit " + (dir / "array-0.sh").string() + ")") &&
                         Contains("job_1=$(submit --dependency=afterok:$job_0 " +
                                  (dir / "array-1.sh").string() + ")"));

  // As Slurm would run them: stage 1's tasks, then stage 2's; each child from its parent.
  for (const auto& [script, task] : std::vector<std::pair<std::string, int>>{
           {"array-0.sh", 0}, {"array-0.sh", 1}, {"array-1.sh", 0}, {"array-1.sh", 1}}) {
    const std::string command = "SLURM_ARRAY_TASK_ID=" + std::to_string(task) + " bash " +
                                poslab::shell_quote((dir / script).string()) + " >/dev/null 2>&1";
    INFO(script << " task " << task);
    CHECK(std::system(command.c_str()) == 0);
  }
  for (std::size_t child : {2, 3})
    CHECK(json_of(study.run_dir(child) / "eval.json")["provenance"]["init_from"]["checkpoint_sha256"] ==
          poslab::checkpoint_sha256(study.run_dir(study.runs[child].parent)));

  SECTION("parents done: the children alone are one stage, with plain sbatch lines") {
    fs::remove_all(study.run_dir(2));
    fs::remove_all(study.run_dir(3));
    std::ostringstream again;
    REQUIRE(poslab::run_study(options, again) == 0);
    CHECK_THAT(again.str(), !Contains(" stages") && Contains("2 runs in 1 job array"));
  }
  SECTION("a child exported without its unfinished parent is refused, writing nothing") {
    fs::remove_all(study.layout.root);
    options.only = {"long*"};
    std::ostringstream refused;
    CHECK_THROWS_WITH(poslab::run_study(options, refused),
                      Contains("run 'long,train.seed=1' starts from 'short,train.seed=1', which is "
                               "pending and not exported with it (--only)"));
    CHECK_FALSE(fs::exists(study.layout.root));
  }
}
