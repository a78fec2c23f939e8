// Claims (train/run_claim.hpp): who trains a run, seen from another machine by its heartbeat.
// A claim is written here by hand as another host's trainer would leave it.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "process_helpers.hpp"
#include "study_helpers.hpp"
#include "train/run_claim.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

long long now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void write_claim(const fs::path& run_dir, const std::string& host, long pid, long long age) {
  write_file(run_dir / "claim.json",
             nlohmann::json{{"host", host}, {"pid", pid}, {"job", "77_3"},
                            {"started", "2026-01-01T00:00:00Z"},
                            {"heartbeat", "2026-01-01T00:00:00Z"},
                            {"heartbeat_unix", now_unix() - age}}
                 .dump());
  write_file(run_dir / "metrics.csv", "step\n1\n");  // an unfinished run
}

}  // namespace

TEST_CASE("a claim is live while its heartbeat is fresh, or its process alive here", "[claim]") {
  poslab::ClaimInfo other{"another-host", 1, "", "", "", now_unix() - 10};
  CHECK(poslab::claim_is_live(other));
  other.heartbeat_unix = now_unix() - poslab::kStaleAfterSeconds - 1;
  CHECK_FALSE(poslab::claim_is_live(other));
  poslab::ClaimInfo here{poslab::this_host(), ::getpid(), "", "", "", 0};  // old heartbeat,
  CHECK(poslab::claim_is_live(here));                                       // but alive
  here.pid = 0x7ffffff0;  // no such process
  CHECK_FALSE(poslab::claim_is_live(here));
}

TEST_CASE("train and run respect another machine's live claim, and take over a stale one",
          "[claim]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  const fs::path run_dir = two.layout.run_dir(two.runs[0]);
  poslab::RunStudyOptions options = two.options();
  options.only = {"train.seed=1"};

  SECTION("live: refused, reported as running, untouched") {
    write_claim(run_dir, "node17", 4242, 5);
    std::ostringstream status;
    options.summary_only = true;
    REQUIRE(poslab::run_study(options, status) == 0);
    CHECK_THAT(status.str(), Contains("running    train.seed=1") &&
                                 Contains("by host node17, pid 4242, Slurm job 77_3"));
    options.summary_only = false;
    std::ostringstream run_out;
    CHECK(poslab::run_study(options, run_out) == 0);
    CHECK_THAT(run_out.str(), Contains("being trained by another process"));
    CHECK(read_file(run_dir / "metrics.csv") == "step\n1\n");
    write_file(scratch.path / "one.toml", poslab::config_to_toml(two.runs[0].config));
    const Outcome r = run_poslab("train --config one.toml --resume", scratch.path);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("is being trained by host node17, pid 4242"));
    CHECK(read_file(run_dir / "metrics.csv") == "step\n1\n");
  }
  SECTION("stale: the study trains it again, and the claim is gone when it is done") {
    write_claim(run_dir, "node17", 4242, poslab::kStaleAfterSeconds + 60);
    std::ostringstream run_out;
    REQUIRE(poslab::run_study(options, run_out) == 0);
    CHECK(fs::exists(run_dir / "eval.json"));
    CHECK_FALSE(fs::exists(run_dir / "claim.json"));
  }
  SECTION("stale, with train --resume: a warning, then the run") {
    write_claim(run_dir, "node17", 4242, poslab::kStaleAfterSeconds + 60);
    write_file(run_dir / "config.toml", poslab::config_to_toml(two.runs[0].config));  // killed
    write_file(scratch.path / "one.toml", poslab::config_to_toml(two.runs[0].config));
    const Outcome r = run_poslab("train --config one.toml --resume", scratch.path);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("stale claim") && Contains("node17"));
    CHECK(fs::exists(run_dir / "eval.json"));
    CHECK_FALSE(fs::exists(run_dir / "claim.json"));
  }
}
