// The experiment runner, `poslab run STUDY` (study/study.hpp, study/runner.hpp): a study file
// expands into the right runs; every mistake in it is reported with file, line and key before
// anything is written; --dry-run and --export describe the plan; and, through the real binary,
// a tiny study runs two jobs at a time, resumes, survives a failing run and a Ctrl-C.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "process_helpers.hpp"
#include "study/runner.hpp"
#include "study/study.hpp"
#include "study_helpers.hpp"
#include "train/registered_choices.hpp"

extern char** environ;

using namespace poslab::testing;
using Catch::Contains;
using Catch::EndsWith;
namespace fs = std::filesystem;

namespace {

const char* kStateReuse = R"(# The example of study.hpp.
[study]
name = "state_reuse"
[base]
out_dir = "ignored"
[base.model]
d_model = 64
[base.encoding]
type = "none"
[sweep]
"encoding.type" = ["none", "shaw", "transformer_xl"]
train.seed = [1, 2]
[[variant]]
name = "all_terms"
[[variant]]
name = "low_lr"
set = { "train.lr" = 3e-4 }
[smoke]
"train.steps" = 5
)";

// parse + expand, expecting a ConfigError; returns its message.
std::string study_error(const std::string& text, bool smoke = false) {
  try {
    poslab::expand_study(poslab::parse_study(text, "exp/study.toml"), smoke);
  } catch (const poslab::ConfigError& e) {
    return e.what();
  }
  FAIL("no error for:\n" << text);
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing and expansion
// ---------------------------------------------------------------------------------------------

TEST_CASE("a study expands into grid x variants, the first axis varying slowest", "[runner]") {
  const poslab::Study study = poslab::parse_study(kStateReuse, "state_reuse.toml");
  CHECK(study.name == "state_reuse");
  REQUIRE(study.axes.size() == 2);
  CHECK(study.axes[0].key == "encoding.type");  // file order, not toml++'s alphabetical order
  CHECK(study.axes[1].key == "train.seed");      // a dotted key is the same as a quoted one
  REQUIRE(study.variants.size() == 2);

  const std::vector<poslab::PlannedRun> runs = poslab::expand_study(study);
  REQUIRE(runs.size() == 2 * 3 * 2);
  CHECK(runs[0].id == "all_terms,encoding.type=none,train.seed=1");
  CHECK(runs[1].id == "all_terms,encoding.type=none,train.seed=2");
  CHECK(runs[2].id == "all_terms,encoding.type=shaw,train.seed=1");
  CHECK(runs[6].id == "low_lr,encoding.type=none,train.seed=1");
  CHECK(runs[11].id == "low_lr,encoding.type=transformer_xl,train.seed=2");
  CHECK(runs[11].dir_name == "low_lr__encoding.type-transformer_xl__train.seed-2");
  CHECK(runs[11].variant == "low_lr");
  CHECK(runs[11].sweep_values.at("encoding.type") == "transformer_xl");
  CHECK(runs[11].sweep_values.at("train.seed") == "2");
  CHECK(runs[11].overrides ==
        std::vector<std::string>{"encoding.type=\"transformer_xl\"", "train.seed=2",
                                 "train.lr=3e-4"});

  // Each Config is resolved: base + sweep values + variant.
  CHECK(runs[11].config.model.d_model == 64);
  CHECK(runs[11].config.encoding.type == "transformer_xl");
  CHECK(runs[11].config.train.seed == 2);
  CHECK(runs[11].config.train.lr == 3e-4);
  CHECK(runs[0].config.train.lr == poslab::TrainConfig{}.lr);
  CHECK(runs[0].config.train.steps == poslab::TrainConfig{}.steps);

  // --smoke adds [smoke] last.
  const std::vector<poslab::PlannedRun> smoke = poslab::expand_study(study, true);
  REQUIRE(smoke.size() == runs.size());
  CHECK(smoke[11].config.train.steps == 5);
  CHECK(smoke[11].overrides.back() == "train.steps=5");
  CHECK(smoke[11].id == runs[11].id);
}

TEST_CASE("the smoke version keeps the first two seeds and every other axis and variant", "[runner]") {
  const poslab::Study study = poslab::parse_study(R"(
[study]
name = "seeds"
[sweep]
"encoding.type" = ["rope", "alibi", "none"]
"train.seed" = [7, 8, 9, 10]
[[variant]]
name = "base"
set = {}
[[variant]]
name = "child"
from = "base"
set = { "train.steps" = 0 }
[smoke]
"train.steps" = 2
)", "exp/seeds.toml");
  const auto runs = poslab::expand_study(study);
  const auto smoke = poslab::expand_study(study, true);
  REQUIRE(runs.size() == 2 * 3 * 4);
  REQUIRE(smoke.size() == 2 * 3 * poslab::kSmokeSeeds);
  std::set<std::string> types, seeds;
  for (const auto& run : smoke) {
    types.insert(run.sweep_values.at("encoding.type"));
    seeds.insert(run.sweep_values.at("train.seed"));
    // Every child's parent is the base run of its own grid point in the smaller grid.
    if (run.variant == "child") {
      REQUIRE(run.parent < smoke.size());
      CHECK(smoke[run.parent].variant == "base");
      CHECK(smoke[run.parent].sweep_values == run.sweep_values);
    }
  }
  CHECK(types == std::set<std::string>{"rope", "alibi", "none"});
  CHECK(seeds == std::set<std::string>{"7", "8"});
}

TEST_CASE("a study without variants, or without anything to sweep", "[runner]") {
  SECTION("grid only: ids are the axis settings; floats keep their exact value") {
    const auto runs = poslab::expand_study(poslab::parse_study(
        "[study]\nname = \"lr\"\n[sweep]\n\"train.lr\" = [1e-3, 3e-4]\n"
        "\"model.activation\" = [\"relu\", \"gelu\"]\n", "lr.toml"));
    REQUIRE(runs.size() == 4);
    CHECK(runs[0].id == "train.lr=0.001,model.activation=relu");
    CHECK(runs[0].dir_name == "train.lr-0.001__model.activation-relu");
    CHECK(runs[3].id == "train.lr=3e-4,model.activation=gelu");  // the shortest exact text
    CHECK(runs[3].config.train.lr == 3e-4);
    CHECK(runs[3].variant.empty());
  }
  SECTION("variants only") {
    const auto runs = poslab::expand_study(poslab::parse_study(
        "[study]\nname = \"v\"\n[[variant]]\nname = \"baseline\"\n[[variant]]\nname = \"wide\"\n"
        "set = { model = { d_model = 256 } }\n", "v.toml"));
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].id == "baseline");
    CHECK(runs[1].id == "wide");
    CHECK(runs[1].dir_name == "wide");
    CHECK(runs[1].config.model.d_model == 256);  // nested tables read as dotted keys
  }
  SECTION("neither: the base config is the one run") {
    const auto runs = poslab::expand_study(
        poslab::parse_study("[study]\nname = \"one\"\n[base.model]\nd_model = 32\n", "one.toml"));
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].id == "base");
    CHECK(runs[0].dir_name == "base");
    CHECK(runs[0].config.model.d_model == 32);
  }
}

// ---------------------------------------------------------------------------------------------
// Mistakes: each names the file, the line and the key, before anything is written
// ---------------------------------------------------------------------------------------------

TEST_CASE("study mistakes are reported with file, line and key", "[runner]") {
  SECTION("unknown key in [base]: the loader's did-you-mean, at the study's line") {
    const std::string e = study_error("[study]\nname = \"x\"\n[base.model]\nd_modle = 32\n");
    CHECK_THAT(e, Contains("exp/study.toml:4: in [base]") && Contains("'model.d_modle'") &&
                      Contains("did you mean 'model.d_model'?"));
  }
  SECTION("unknown key as a sweep axis") {
    const std::string e = study_error(
        "[study]\nname = \"x\"\n[sweep]\n\"train.seed\" = [1]\n\"model.d_modle\" = [16, 32]\n");
    CHECK_THAT(e, Contains("exp/study.toml:5: in [sweep] axis 'model.d_modle'") &&
                      Contains("did you mean 'model.d_model'?"));
  }
  SECTION("a bad value in an axis names the value") {
    const std::string e = study_error(
        "[study]\nname = \"x\"\n[sweep]\n\"model.activation\" = [\"relu\", \"tanh\"]\n");
    CHECK_THAT(e, Contains("exp/study.toml:4: in [sweep] axis 'model.activation' = \"tanh\"") &&
                      Contains("one of relu, gelu") &&
                      Contains("while resolving run 'model.activation=tanh'"));
  }
  SECTION("an unknown encoding in an axis") {
    const std::string e =
        study_error("[study]\nname = \"x\"\n[sweep]\n\"encoding.type\" = [\"none\", \"shawx\"]\n");
    CHECK_THAT(e, Contains("exp/study.toml:4:") && Contains("did you mean 'shaw'?"));
  }
  SECTION("an empty axis") {
    const std::string e = study_error("[study]\nname = \"x\"\n[sweep]\n\"train.seed\" = []\n");
    CHECK_THAT(e, Contains("exp/study.toml:4:") && Contains("'train.seed' is empty"));
  }
  SECTION("an axis that is not a list") {
    const std::string e = study_error("[study]\nname = \"x\"\n[sweep]\ntrain.seed = 3\n");
    CHECK_THAT(e, Contains("exp/study.toml:4:") && Contains("must be a list"));
  }
  SECTION("a bad [smoke] key, even without --smoke") {
    const std::string e = study_error("[study]\nname = \"x\"\n\n[smoke]\n\"train.stepz\" = 5\n");
    CHECK_THAT(e, Contains("exp/study.toml:5: in [smoke]") && Contains("'train.stepz'") &&
                      Contains("did you mean 'train.steps'?"));
  }
  SECTION("a bad key in a variant names the variant") {
    const std::string e = study_error(
        "[study]\nname = \"x\"\n[[variant]]\nname = \"v1\"\nset = { \"train.lrr\" = 0.1 }\n");
    CHECK_THAT(e, Contains("exp/study.toml:5: in variant 'v1'") && Contains("'train.lrr'"));
  }
  SECTION("a duplicate variant name") {
    const std::string e = study_error(
        "[study]\nname = \"x\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n");
    CHECK_THAT(e, Contains("exp/study.toml:5:") && Contains("duplicate variant name 'a'"));
  }
  SECTION("a variant that sets a sweep axis") {
    const std::string e = study_error(
        "[study]\nname = \"x\"\n[sweep]\n\"train.seed\" = [1, 2]\n[[variant]]\nname = \"a\"\n"
        "set = { \"train.seed\" = 3 }\n");
    CHECK_THAT(e, Contains("exp/study.toml:7:") && Contains("also a [sweep] axis"));
  }
  SECTION("a missing name, a missing [study], an unknown table") {
    CHECK_THAT(study_error("[study]\n[base.model]\nd_model = 32\n"),
               Contains("exp/study.toml:1:") && Contains("[study] needs a name"));
    CHECK_THAT(study_error("[base.model]\nd_model = 32\n"),
               Contains("exp/study.toml:") && Contains("missing [study]"));
    CHECK_THAT(study_error("[study]\nname = \"x\"\n[sweeps]\n\"train.seed\" = [1]\n"),
               Contains("exp/study.toml:3:") && Contains("unknown table [sweeps]"));
  }
  SECTION("out_dir belongs to the runner") {
    CHECK_THAT(study_error("[study]\nname = \"x\"\n[sweep]\nout_dir = [\"a\", \"b\"]\n"),
               Contains("exp/study.toml:4:") && Contains("out_dir cannot be set"));
  }
}

TEST_CASE("poslab run with a bad study writes nothing and exits 1", "[runner]") {
  ScratchDirectory scratch;
  const std::vector<std::string> bad_studies = {
      "[study]\nname = \"bad\"\n[base.model]\nd_modle = 32\n",
      "[study]\nname = \"bad\"\n[sweep]\n\"model.d_modle\" = [16, 32]\n",
      "[study]\nname = \"bad\"\n[sweep]\n\"train.seed\" = []\n",
      "[study]\nname = \"bad\"\n[smoke]\n\"train.stepz\" = 5\n",
      "[study]\n[sweep]\n\"train.seed\" = [1]\n",
  };
  for (const std::string& text : bad_studies) {
    INFO(text);
    write_file(scratch.path / "bad.toml", text);
    const Outcome r = run_poslab("run bad.toml --jobs 2", scratch.path);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("poslab: error: bad.toml:"));
    CHECK_FALSE(fs::exists(scratch.path / "results"));
  }
}

// Every run's inputs checked, the error of the first bad one (check_run_inputs), or "".
std::string inputs_error(const std::string& text, const std::vector<std::string>& set = {}) {
  const poslab::Study study = poslab::parse_study(text, "exp/study.toml");
  try {
    for (const poslab::PlannedRun& run : poslab::expand_study(study, false, set))
      poslab::check_run_inputs(study, run);
  } catch (const poslab::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("a corpus that is not there is found when the study is loaded, with key, file and line",
          "[runner]") {
  ScratchDirectory scratch;
  const std::string corpus = write_corpus(scratch.path).string();
  const std::string missing = (scratch.path / "no_such_corpus").string();
  const std::string head = "[study]\nname = \"x\"\n";
  SECTION("set in [base]") {
    const std::string e = inputs_error(head + "[base.data]\nvalid_fraction = 0.1\npath = \"" +
                                       missing + "\"\n");
    CHECK_THAT(e, Contains("exp/study.toml:5: in [base]: data.path = \"" + missing +
                           "\": does not exist") &&
                      Contains("run 'base'"));
  }
  SECTION("set by a variant: the variant's line, the other runs fine") {
    const std::string e = inputs_error(head + "[base.data]\npath = \"" + corpus + "\"\n" +
                                       "[[variant]]\nname = \"mine\"\n[[variant]]\n" +
                                       "name = \"theirs\"\nset = { \"data.path\" = \"" +
                                       missing + "\" }\n");
    CHECK_THAT(e, Contains("exp/study.toml:9: in variant 'theirs': data.path") &&
                      Contains("does not exist") && Contains("run 'theirs'"));
  }
  SECTION("a sweep axis") {
    const std::string e = inputs_error(head + "[sweep]\n\"data.path\" = [\"" + corpus +
                                       "\", \"" + missing + "\"]\n");
    CHECK_THAT(e, Contains("exp/study.toml:4: in [sweep] axis 'data.path'") &&
                      Contains("does not exist"));
  }
  SECTION("poslab run --set") {
    const std::string e = inputs_error(head, {"data.path=\"" + missing + "\""});
    CHECK_THAT(e, Contains("in --set data.path=") && Contains("does not exist"));
  }
  SECTION("a file where a corpus should be is fine; a path that is neither file nor directory "
          "is not") {
    CHECK(inputs_error(head + "[base.data]\npath = \"" + corpus + "\"\n").empty());
    CHECK(inputs_error(head + "[base.data]\npath = \"" + scratch.path.string() + "\"\n")
              .empty());
    CHECK_THAT(inputs_error(head + "[base.data]\npath = \"/dev/null\"\n"),
               Contains("is neither a file nor a directory"));
  }
  SECTION("a directory whose files the include patterns all leave out: the patterns' line") {
    const std::string e = inputs_error(head + "[base.data]\npath = \"" +
                                       scratch.path.string() + "\"\ninclude = [\"*.h\"]\n");
    CHECK_THAT(e, Contains("exp/study.toml:5: in [base]: ") &&
                      Contains("no file matches the patterns (include [\"*.h\"]") &&
                      Contains("data.path set at exp/study.toml:4") && Contains("run 'base'"));
  }
  SECTION("a generated task reads no corpus") {
    CHECK(inputs_error(head + "[base.data]\npath = \"" + missing + "\"\n[base.task]\n" +
                       "name = \"copy\"\n")
              .empty());
  }
  SECTION("poslab run, --dry-run and --export stop with exit 1 and write nothing") {
    write_file(scratch.path / "bad.toml",
               "[study]\nname = \"bad\"\n" + tiny_base(missing) + "[sweep]\n\"train.seed\" = [1, 2]\n");
    for (const char* how : {"", " --dry-run", " --export commands"}) {
      INFO(how);
      const Outcome r = run_poslab(std::string("run bad.toml --jobs 2") + how, scratch.path);
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.err, Contains("poslab: error: bad.toml:9: in [base]: data.path = \"" +
                                 missing + "\": does not exist"));
      CHECK_FALSE(fs::exists(scratch.path / "results"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// --dry-run, the summary, --export
// ---------------------------------------------------------------------------------------------


TEST_CASE("runner: --dry-run lists every run with its status and writes nothing", "[runner]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  poslab::RunStudyOptions options = two.options();
  options.dry_run = true;

  std::ostringstream out;
  CHECK(poslab::run_study(options, out) == 0);
  CHECK_THAT(out.str(), Contains("pending    train.seed=1") &&
                            Contains("runs/train.seed-1") && Contains("pending    train.seed=2") &&
                            Contains("0 done, 2 pending"));
  CHECK_FALSE(fs::exists(two.layout.root));

  two.fake_finished(0, {{"loss", 1.0}});
  fs::create_directories(two.layout.run_dir(two.runs[1]));  // interrupted: no eval.json
  std::ostringstream again;
  CHECK(poslab::run_study(options, again) == 0);
  CHECK_THAT(again.str(), Contains("done       train.seed=1") &&
                              Contains("incomplete train.seed=2") &&
                              Contains("1 done, 0 pending, 1 incomplete"));

  // A finished run made with another config is stale, and `run` refuses to reuse it.
  poslab::Config other = two.runs[0].config;
  other.model.d_inner = 64;
  write_file(two.layout.run_dir(two.runs[0]) / "config.toml", poslab::config_to_toml(other));
  std::ostringstream stale;
  CHECK(poslab::run_study(options, stale) == 0);
  CHECK_THAT(stale.str(), Contains("stale      train.seed=1") &&
                              Contains("the run has d_inner = 64, the study gives d_inner = 32"));
  options.dry_run = false;
  std::ostringstream refused;
  CHECK_THROWS_WITH(poslab::run_study(options, refused),
                    Contains("made with another config") && Contains("runs/train.seed-1"));
  CHECK_FALSE(fs::exists(two.layout.root / "configs"));
}

TEST_CASE("the summary has one row per run and evaluation setting", "[runner]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  // Run 1 writes an "evaluations" array; run 2 only the top-level fields of today's eval.json.
  two.fake_finished(0, {{"train_loss", 2.5},
                        {"train_tokens_per_second", 1000.0},
                        {"train_seconds", 1.5},
                        {"in_distribution_ok", true},
                        {"provenance", {{"commit", "abc123"}, {"threads", 1}}},
                        {"evaluations",
                         {{{"kind", "main"}, {"seq_len", 8}, {"mem_len", 0}, {"factor", 1.0},
                           {"split", "valid"}, {"loss", 2.0}, {"accuracy", 0.5}, {"tokens", 64},
                           {"loss_by_position", {2.1, 1.9}}},
                          {{"kind", "length"}, {"seq_len", 16}, {"mem_len", 0}, {"factor", 2.0},
                           {"split", "valid"}, {"loss", 2.25}, {"accuracy", 0.4},
                           {"exact_match", 0.125}, {"exact_match_ci_low", 0.0625},
                           {"exact_match_ci_high", 0.25}, {"instances", 8}, {"tokens", 128},
                           {"loss_by_position", {2.0, 2.5}}}}}});
  two.fake_finished(1, {{"loss", 3.0}, {"accuracy", 0.25}, {"seq_len", 8}, {"mem_len", 0},
                        {"tokens", 64}, {"train_loss", 3.5}, {"in_distribution_ok", false},
                        {"loss_by_position", {3.0}}});

  // The builds behind the finished runs: run 2 predates provenance and names none.
  CHECK(poslab::write_summary(two.study, two.runs, two.layout) ==
        std::vector<std::string>{"abc123"});
  const std::vector<std::string> summary = lines_of(read_file(two.layout.summary()));
  REQUIRE(summary.size() == 4);
  CHECK(summary[0] ==
        "study,run,train.seed,kind,factor,seq_len,mem_len,split,loss,accuracy,exact_match,"
        "exact_match_ci_low,exact_match_ci_high,instances,tokens,peak_memory_mb,tokens_per_second,"
        "in_distribution_ok,unigram_loss,bigram_loss,train_loss,train_tokens_per_second,"
        "train_seconds,commit");
  // A setting's own columns, then the run's: its gate and, from its provenance, its commit.
  CHECK(summary[1] == "two,train.seed=1,1,main,1,8,0,valid,2,0.5,,,,,64,,,true,,,2.5,1000,1.5,abc123");
  CHECK(summary[2] ==
        "two,train.seed=1,1,length,2,16,0,valid,2.25,0.4,0.125,0.0625,0.25,8,128,,,true,,,2.5,1000,"
        "1.5,abc123");
  CHECK(summary[3] == "two,train.seed=2,2,main,,8,0,,3,0.25,,,,,64,,,false,,,3.5,,,");

  const std::vector<std::string> positions = lines_of(read_file(two.layout.loss_by_position()));
  REQUIRE(positions.size() == 6);
  CHECK(positions[0] == "run,train.seed,kind,factor,seq_len,mem_len,position,loss");
  CHECK(positions[1] == "train.seed=1,1,main,1,8,0,0,2.1");
  CHECK(positions[4] == "train.seed=1,1,length,2,16,0,1,2.5");
  CHECK(positions[5] == "train.seed=2,2,main,,8,0,0,3");
}

TEST_CASE("the summary carries each run's start and finish, when its eval.json has them",
          "[runner]") {
  // The committed summary is the record: "the protocol was committed before any run started"
  // must be checkable from it (issue 45). Run 2 predates the times and leaves them empty.
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  two.fake_finished(0, {{"loss", 2.0}, {"seq_len", 8}, {"mem_len", 0}, {"tokens", 64},
                        {"provenance", {{"commit", "abc123"},
                                        {"started", "2026-11-27T14:20:01Z"},
                                        {"finished", "2026-11-27T14:35:59Z"}}}});
  two.fake_finished(1, {{"loss", 3.0}, {"seq_len", 8}, {"mem_len", 0}, {"tokens", 64},
                        {"provenance", {{"commit", "abc123"}}}});
  poslab::write_summary(two.study, two.runs, two.layout);
  const std::vector<std::string> summary = lines_of(read_file(two.layout.summary()));
  REQUIRE(summary.size() == 3);
  CHECK_THAT(summary[0], EndsWith(",train_seconds,commit,started,finished"));
  CHECK_THAT(summary[1], EndsWith(",abc123,2026-11-27T14:20:01Z,2026-11-27T14:35:59Z"));
  CHECK_THAT(summary[2], EndsWith(",abc123,,"));
}

TEST_CASE("passkey_curve.csv gathers every finished run's curve after the run's name and axes",
          "[runner][passkey_curve]") {
  // Issue 48: retrieval read during training (train/passkey_curve.hpp) lands in each run's
  // RUN/passkey_curve.csv; the study's results carry them all in one table.
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  const std::string header =
      "step,factor,seq_len,depth,instances,exact_match,greedy_exact_match,digit_accuracy,loss\n";
  two.fake_finished(0, {{"loss", 2.0}, {"seq_len", 8}, {"mem_len", 0}, {"tokens", 64}});
  poslab::write_summary(two.study, two.runs, two.layout);
  CHECK_FALSE(fs::exists(two.layout.passkey_curve()));  // no run has a curve: no file

  write_file(two.layout.run_dir(two.runs[0]) / "passkey_curve.csv",
             header + "2000,1,64,0,50,0.5,0.48,0.9,0.25\n2000,2,128,1,50,0,0,0.1,2.3\n");
  // Run 2 is not finished: its curve so far stays out, as its eval.json stays out of summary.csv.
  write_file(two.layout.run_dir(two.runs[1]) / "passkey_curve.csv",
             header + "2000,1,64,0,50,1,1,1,0.01\n");
  poslab::write_summary(two.study, two.runs, two.layout);
  const std::vector<std::string> curve = lines_of(read_file(two.layout.passkey_curve()));
  REQUIRE(curve.size() == 3);
  CHECK(curve[0] == "run,train.seed,step,factor,seq_len,depth,instances,exact_match,"
                    "greedy_exact_match,digit_accuracy,loss");
  CHECK(curve[1] == "train.seed=1,1,2000,1,64,0,50,0.5,0.48,0.9,0.25");
  CHECK(curve[2] == "train.seed=1,1,2000,2,128,1,50,0,0,0.1,2.3");

  // A file that is not a curve (another header) is refused, naming it, not put under the columns.
  write_file(two.layout.run_dir(two.runs[0]) / "passkey_curve.csv", "step,loss\n1,2\n");
  try {
    poslab::write_summary(two.study, two.runs, two.layout);
    FAIL("no error for a curve with another header");
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Contains("passkey_curve.csv:1: not a passkey curve"));
    CHECK_THAT(e.what(), Contains("'step,loss'"));
  }
}

TEST_CASE("shell_quote quotes only what needs it", "[runner]") {
  CHECK(poslab::shell_quote("results/x/configs/a.toml") == "results/x/configs/a.toml");
  CHECK(poslab::shell_quote("train.threads=2") == "train.threads=2");
  CHECK(poslab::shell_quote("with space") == "'with space'");
  CHECK(poslab::shell_quote("it's") == "'it'\\''s'");
  CHECK(poslab::shell_quote("") == "''");
  CHECK(poslab::shell_quote("$HOME") == "'$HOME'");
}

TEST_CASE("runner: --export commands prints a runnable command per pending run", "[runner]") {
  ScratchDirectory scratch;
  const fs::path dir = scratch.path / "it's here";  // a path that needs quoting
  TwoRunStudy two(dir);
  two.fake_finished(0, {{"loss", 1.0}});  // done: not exported
  poslab::RunStudyOptions options = two.options();
  options.export_format = "commands";

  std::ostringstream out;
  CHECK(poslab::run_study(options, out) == 0);
  const std::vector<std::string> commands = lines_of(out.str());
  REQUIRE(commands.size() == 1);
  const std::string& command = commands[0];
  CHECK_THAT(command, Contains(" train --config ") && Contains("'\\''") &&
                          Contains("configs/train.seed-2.toml") &&
                          Contains("runs/train.seed-2.log"));
  CHECK(read_file(two.layout.commands()) == command + "\n");

  // The config file it references exists and is the run's config.
  const poslab::Config written = poslab::load_config(two.layout.config_file(two.runs[1]).string(),
                                                     poslab::registered_choices());
  CHECK(written.out_dir == two.layout.run_dir(two.runs[1]).string());
  CHECK(written.train.seed == 2);
  CHECK_FALSE(fs::exists(two.layout.config_file(two.runs[0])));

  // Run it from somewhere else: it trains the run; run again, it does nothing.
  CHECK(std::system(("cd / && sh -c " + poslab::shell_quote(command)).c_str()) == 0);
  CHECK(fs::exists(two.layout.run_dir(two.runs[1]) / "eval.json"));
  const auto finished_at = fs::last_write_time(two.layout.run_dir(two.runs[1]) / "eval.json");
  CHECK(std::system(("sh -c " + poslab::shell_quote(command)).c_str()) == 0);
  CHECK(fs::last_write_time(two.layout.run_dir(two.runs[1]) / "eval.json") == finished_at);
}

TEST_CASE("poslab run --help documents the study format", "[runner]") {
  const Outcome r = run_poslab("run --help", fs::temp_directory_path());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("Usage: poslab run") && Contains("[sweep]") &&
                        Contains("[[variant]]") && Contains("[smoke]") && Contains("--jobs") &&
                        Contains("--dry-run") && Contains("--export") && Contains("Writes") &&
                        Contains("Example:\n  poslab run"));
}

// ---------------------------------------------------------------------------------------------
// End to end, through the real binary
// ---------------------------------------------------------------------------------------------

TEST_CASE("a tiny study runs two at a time, then resumes only what is missing", "[runner]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  const Outcome first = run_poslab("run two.toml --jobs 2", scratch.path);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Contains("[start] train.seed=1") && Contains("[done] train.seed=2") &&
                            Contains("[2/2 done, 0 running, 0 failed]"));

  // Without --out, results go to results/<name>/ under the current directory.
  poslab::StudyLayout layout{scratch.path / "results" / "two"};
  for (const auto& run : two.runs) {
    CHECK(fs::exists(layout.run_dir(run) / "eval.json"));
    CHECK(fs::exists(layout.run_dir(run) / "metrics.csv"));
    CHECK_THAT(read_file(layout.log_file(run)),
               Contains("train --config") && Contains("--set train.threads="));
  }
  const std::vector<std::string> summary = lines_of(read_file(layout.summary()));
  REQUIRE(summary.size() == 3);
  CHECK_THAT(summary[1], Contains("two,train.seed=1,1,main,"));
  CHECK_THAT(summary[2], Contains("two,train.seed=2,2,main,"));
  CHECK(lines_of(read_file(layout.loss_by_position())).size() == 1 + 2 * 8);

  // Simulate an interruption of run 2; run 1 must not run again.
  const fs::path done_eval = layout.run_dir(two.runs[0]) / "eval.json";
  const auto done_eval_time = fs::last_write_time(done_eval);
  const std::string done_log = read_file(layout.log_file(two.runs[0]));
  fs::remove(layout.run_dir(two.runs[1]) / "eval.json");
  fs::remove(layout.summary());

  const Outcome second = run_poslab("run two.toml --jobs 2", scratch.path);
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.out, Contains("1 already done, 1 to run") &&
                             Contains("[start] train.seed=2") &&
                             !Contains("[start] train.seed=1"));
  CHECK(fs::last_write_time(done_eval) == done_eval_time);
  CHECK(read_file(layout.log_file(two.runs[0])) == done_log);
  CHECK(fs::exists(layout.run_dir(two.runs[1]) / "eval.json"));
  CHECK(lines_of(read_file(layout.summary())).size() == 3);
}

TEST_CASE("a failing run is reported with its log; the others complete; exit code 1",
          "[runner]") {
  ScratchDirectory scratch;
  // A corpus of 4 bytes: a valid config and a file that exists (so the study starts), but its
  // validation split is empty, which the run finds only once it reads it.
  write_file(scratch.path / "four_bytes.txt", "abcd");
  TwoRunStudy two(scratch.path,
                  "[[variant]]\nname = \"ok\"\n[[variant]]\nname = \"broken\"\n"
                  "set = { \"data.path\" = \"" + (scratch.path / "four_bytes.txt").string() +
                      "\" }\n");
  const Outcome r = run_poslab("run two.toml --jobs 2 --out out", scratch.path);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  poslab::StudyLayout layout{"out"};
  for (const auto& run : two.runs) {
    if (run.variant == "ok") {
      CHECK(fs::exists(scratch.path / layout.run_dir(run) / "eval.json"));
    } else {
      CHECK_FALSE(fs::exists(scratch.path / layout.run_dir(run) / "eval.json"));
      CHECK_THAT(r.out, Contains("[FAILED] " + run.id) &&
                            Contains("log: " + layout.log_file(run).string()));
      CHECK_THAT(read_file(scratch.path / layout.log_file(run)),
                 Contains("four_bytes.txt': the validation split is empty"));
    }
  }
  CHECK_THAT(r.out, Contains("2 of 4 runs done, 2 failed"));
  const std::vector<std::string> summary = lines_of(read_file(scratch.path / "out/summary.csv"));
  REQUIRE(summary.size() == 3);
  CHECK_THAT(summary[1], Contains(",ok,main,"));
  CHECK_THAT(summary[2], Contains(",ok,main,"));
}

TEST_CASE("Ctrl-C stops the runs and leaves them incomplete, to rerun next time", "[runner]") {
  ScratchDirectory scratch;
  write_file(scratch.path / "long.toml", "[study]\nname = \"long\"\n" +
                                             tiny_base(write_corpus(scratch.path), 1000000) +
                                             "[sweep]\n\"train.seed\" = [1, 2, 3]\n");
  const fs::path log = scratch.path / "runner.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const std::string study = (scratch.path / "long.toml").string();
  const std::string out = (scratch.path / "results").string();
  const char* argv[] = {POSLAB_BINARY, "run", study.c_str(), "--jobs", "2",
                        "--out", out.c_str(), nullptr};
  pid_t runner = 0;
  REQUIRE(posix_spawn(&runner, POSLAB_BINARY, &actions, nullptr, const_cast<char**>(argv),
                      environ) == 0);
  posix_spawn_file_actions_destroy(&actions);

  // Wait until both runs train (their metrics.csv exists), then interrupt.
  const fs::path runs = scratch.path / "results" / "runs";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(fs::exists(runs / "train.seed-1" / "metrics.csv") &&
           fs::exists(runs / "train.seed-2" / "metrics.csv")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(runner, SIGINT);
  int status = 0;
  REQUIRE(::waitpid(runner, &status, 0) == runner);
  INFO(read_file(log));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_THAT(read_file(log), Contains("interrupted") && Contains("run the same command again"));
  CHECK(fs::exists(runs / "train.seed-1"));
  CHECK_FALSE(fs::exists(runs / "train.seed-1" / "eval.json"));
  CHECK_FALSE(fs::exists(runs / "train.seed-3"));  // never started

  const Outcome dry = run_poslab("run long.toml --dry-run --out results", scratch.path);
  CHECK_THAT(dry.out, Contains("incomplete train.seed=1") && Contains("incomplete train.seed=2") &&
                          Contains("pending    train.seed=3"));
}
