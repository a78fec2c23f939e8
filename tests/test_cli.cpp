// The `poslab` executable, run as a user would: help, the encodings listing, exit codes, and the
// promise that a bad config is reported before anything is written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "process_helpers.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

TEST_CASE("poslab --help lists the commands and exits 0", "[cli]") {
  const Outcome r = run_poslab("--help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("train") && Contains("eval") && Contains("bench") &&
                        Contains("encodings"));
  CHECK(r.err.empty());
}

TEST_CASE("every command's --help says what it writes and gives an example", "[cli]") {
  for (const char* command : {"train", "eval", "bench", "encodings"}) {
    INFO(command);
    const Outcome r = run_poslab(std::string(command) + " --help");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("Usage: poslab " + std::string(command)) && Contains("Example:") &&
                          Contains("  poslab " + std::string(command)) &&
                          (Contains("Writes") || Contains("writes")));
  }
}

TEST_CASE("poslab encodings lists every registered encoding, none included", "[cli]") {
  const Outcome r = run_poslab("encodings");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("\nnone  (none)  Kazemnejad et al. 2023\n") &&
                        Contains("options: none"));
}

TEST_CASE("usage errors exit 2", "[cli]") {
  CHECK(run_poslab("").exit_code == 2);
  CHECK(run_poslab("train").exit_code == 2);  // --config is required
  const Outcome misspelled = run_poslab("trian --config x.toml");
  CHECK(misspelled.exit_code == 2);
  CHECK_THAT(misspelled.err, Contains("unknown command 'trian'"));
  CHECK(run_poslab("train --config x.toml --no-such-option").exit_code == 2);
  CHECK(run_poslab("eval --run x --mem-len=-3").exit_code == 2);
  CHECK(run_poslab("bench --steps 0").exit_code == 2);
}

TEST_CASE("train with a missing config file names it and exits 1", "[cli]") {
  ScratchDirectory scratch;
  const fs::path missing = scratch.path / "missing.toml";
  const Outcome r = run_poslab("train --config '" + missing.string() + "'");
  CHECK(r.exit_code == 1);
  CHECK(r.err == "poslab: error: " + missing.string() + ": config file not found\n");
}

TEST_CASE("a config error is reported before anything is written", "[cli]") {
  ScratchDirectory scratch;
  const fs::path out_dir = scratch.path / "runs" / "bad";
  const fs::path config = scratch.path / "bad.toml";
  std::ofstream(config) << "out_dir = \"" << out_dir.string() << "\"\n[model]\nd_modle = 256\n";

  const Outcome r = run_poslab("train --config '" + config.string() + "'");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(config.string() + ":3: unknown key 'model.d_modle' (did you mean "
                                               "'model.d_model'?)"));
  CHECK_FALSE(fs::exists(out_dir));
  CHECK_FALSE(fs::exists(scratch.path / "runs"));

  // The same for a bad --set on a good file, and for a bad --out.
  std::ofstream(config) << "out_dir = \"" << out_dir.string() << "\"\n";
  const Outcome bad_set =
      run_poslab("train --config '" + config.string() + "' --set encoding.type=nope");
  CHECK(bad_set.exit_code == 1);
  CHECK_THAT(bad_set.err, Contains("--set encoding.type=nope: unknown encoding type 'nope'"));
  const Outcome bad_out = run_poslab("train --config '" + config.string() + "' --out ''");
  CHECK(bad_out.exit_code == 1);
  CHECK_THAT(bad_out.err, Contains("--out"));
  CHECK_FALSE(fs::exists(scratch.path / "runs"));
}

TEST_CASE("bench checks its --set overrides before running", "[cli]") {
  const Outcome r = run_poslab("bench --steps 1 --set model.n_heads=0");
  CHECK(r.exit_code == 1);
  CHECK(r.err == "poslab: error: --set model.n_heads=0: model.n_heads must be >= 1, got 0\n");
}

TEST_CASE("eval of a directory that is not a run exits 1", "[cli]") {
  ScratchDirectory scratch;
  const Outcome r = run_poslab("eval --run '" + (scratch.path / "nothing").string() + "'");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("poslab: error:") && Contains("nothing"));
}
