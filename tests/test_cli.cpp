// The `poslab` executable, run as a user would: help, the encodings listing, exit codes, and the
// promise that a bad config is reported before anything is written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "process_helpers.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

TEST_CASE("poslab --help lists the commands and exits 0", "[cli]") {
  const Outcome r = run_poslab("--help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out,
             Contains("train") && Contains("eval") && Contains("bench") && Contains("encodings"));
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
  CHECK_THAT(r.out,
             Contains("\nnone  (none)  Kazemnejad et al. 2023\n") && Contains("options: none"));
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

// DIR/tiny.toml: a model small enough to train in a second, plus `extra` sections.
static fs::path write_tiny_config(const fs::path& dir, const std::string& extra) {
  const fs::path config = dir / "tiny.toml";
  std::ofstream(config) << "[model]\nd_model = 8\nn_layers = 1\nn_heads = 2\nd_inner = 16\n"
                           "[train]\nseq_len = 8\nbatch_size = 2\nsteps = 2\n"
                        << extra;
  return config;
}

// Trains a tiny run (write_tiny_config's model with `extra`, 2 steps) into `run`; the config is
// written beside it, in `run`'s parent directory.
static Outcome train_tiny_run(const fs::path& run, const std::string& extra) {
  const fs::path config = write_tiny_config(run.parent_path(), extra);
  return run_poslab("train --config '" + config.string() + "' --out '" + run.string() + "'");
}

TEST_CASE("train never writes over a run: it refuses, or with --force moves the old one aside",
          "[cli]") {
  ScratchDirectory scratch;
  const fs::path out_dir = scratch.path / "run";
  const fs::path config = write_tiny_config(scratch.path, "[eval]\nbatches = 1\n");
  const std::string train =
      "train --config '" + config.string() + "' --out '" + out_dir.string() + "'";
  REQUIRE(run_poslab(train).exit_code == 0);
  const std::string first_eval = read_file(out_dir / "eval.json");

  const Outcome refused = run_poslab(train + " --set train.steps=3");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err,
             Contains(out_dir.string() + " already holds a finished run") && Contains("--force"));
  CHECK(read_file(out_dir / "eval.json") == first_eval);  // untouched

  const Outcome forced = run_poslab(train + " --force");
  CHECK(forced.exit_code == 0);
  CHECK_THAT(forced.out, Contains("moved the old run aside"));
  int aside = 0;
  for (const auto& entry : fs::directory_iterator(scratch.path))
    if (entry.path().filename().string().rfind("run.replaced-", 0) == 0) {
      ++aside;
      CHECK(fs::exists(entry.path() / "eval.json"));
    }
  CHECK(aside == 1);
  CHECK(fs::exists(out_dir / "eval.json"));
}

TEST_CASE("eval --token-losses writes one loss per scored token, the same tokens at every memory",
          "[cli]") {
  ScratchDirectory scratch;
  const fs::path run = scratch.path / "run";
  REQUIRE(train_tiny_run(run,
                         "[encoding]\ntype = \"transformer_xl\"\n[memory]\nmem_len = 4\n"
                         "[eval]\nbatches = 3\n")
              .exit_code == 0);
  for (int memory : {0, 4, 16}) {
    const fs::path file = scratch.path / ("losses_M" + std::to_string(memory) + ".npy");
    const Outcome r =
        run_poslab("eval --run '" + run.string() + "' --mem-len " + std::to_string(memory) +
                   " --token-losses '" + file.string() + "'");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("wrote " + file.string() + " (48 token losses, float32)"));
    // .npy: a header, then 3 batches x 2 rows x 8 tokens of float32.
    CHECK(fs::file_size(file) > 48 * 4);
    CHECK((fs::file_size(file) - 48 * 4) % 16 == 0);  // numpy pads its header to 16 bytes
  }
}

TEST_CASE("eval.stride adds sliding-window rows beside the chunked ones, without memory",
          "[cli][sliding]") {
  ScratchDirectory scratch;
  const fs::path run = scratch.path / "run";
  const Outcome r = train_tiny_run(
      run, "[memory]\nmem_len = 4\n[eval]\nbatches = 2\nstride = 3\nlength_factors = [2]\n");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(run / "eval.json");
  const nlohmann::json rows = nlohmann::json::parse(in)["evaluations"];
  std::vector<std::string> kinds;
  for (const auto& row : rows) kinds.push_back(row["kind"]);
  // The chunked rows first and unchanged in order (the main one decides the run's loss).
  CHECK(kinds == std::vector<std::string>{"main", "length", "main_sliding", "length_sliding"});
  CHECK(!rows[0].contains("stride"));
  for (int i : {2, 3}) {
    INFO(kinds[std::size_t(i)]);
    const nlohmann::json& row = rows[std::size_t(i)];
    CHECK(row["stride"] == 3);
    CHECK(row["mem_len"] == 0);  // a window is read from scratch
    CHECK(row["seq_len"] == rows[std::size_t(i - 2)]["seq_len"]);
    // The chunked row's scored bytes (eval.batches x rows x length), rounded up to whole
    // windows of 3: 32 -> 33 (11 windows), 64 -> 66 (22).
    const int chunked = rows[std::size_t(i - 2)]["tokens"].get<int>();
    CHECK(chunked == 2 * 2 * row["seq_len"].get<int>());
    CHECK(row["tokens"] == (chunked + 2) / 3 * 3);
    CHECK(row["loss"].get<double>() > 0);
    CHECK(row["loss"].get<double>() < 6);  // about ln 256 = 5.5 after 2 steps
    CHECK(!row.contains("exact_match"));
  }
  CHECK(rows[3]["seq_len"] == 16);
}

TEST_CASE("eval never replaces an earlier evaluation made with other --set", "[cli]") {
  ScratchDirectory scratch;
  const fs::path run = scratch.path / "run";
  REQUIRE(train_tiny_run(run, "[eval]\nbatches = 1\n").exit_code == 0);
  const std::string eval = "eval --run '" + run.string() + "'";
  const fs::path file = run / "eval_L8_M0.json";
  REQUIRE(run_poslab(eval).exit_code == 0);
  CHECK(json_of(file)["overrides"] == nlohmann::json::array());
  const std::string first = read_file(file);

  SECTION("other --set: refused, naming the file and both settings; the file is unchanged") {
    const Outcome r = run_poslab(eval + " --set eval.batches=2");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains(file.string() + " holds an evaluation made with no --set") &&
                          Contains("this one has --set eval.batches=2") &&
                          Contains("nothing written"));
    CHECK(read_file(file) == first);
  }
  SECTION("the same --set again: a rerun, which replaces the file") {
    CHECK(run_poslab(eval).exit_code == 0);
    CHECK(json_of(file)["overrides"] == nlohmann::json::array());
  }
  SECTION("the same settings reordered or respelled: the same evaluation, a rerun (issue 51)") {
    // Compared by what they make of the config, not as text.
    fs::remove(file);
    REQUIRE(run_poslab(eval + " --set eval.batches=2 --set train.threads=1").exit_code == 0);
    const Outcome r = run_poslab(eval + " --set train.threads=1 --set eval.batches=+2");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    const Outcome other = run_poslab(eval + " --set eval.batches=3 --set train.threads=1");
    CHECK(other.exit_code == 1);
    CHECK_THAT(other.err, Contains("holds an evaluation made with --set"));
  }
  SECTION("--passkey: the same rule for eval_passkey.json") {
    const std::string grid =
        " --passkey --set 'eval.passkey_length_factors=[16]' "
        "--set eval.passkey_instances=2";
    REQUIRE(run_poslab(eval + grid).exit_code == 0);
    const std::string cells = read_file(run / "eval_passkey.json");
    const Outcome r = run_poslab(eval + grid + " --set 'eval.passkey_depths=[0.5]'");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("eval_passkey.json holds an evaluation made with --set"));
    CHECK(read_file(run / "eval_passkey.json") == cells);
  }
}

// Issue 51: `eval --set 'eval.length_factors=[1,2,8192]'` evaluated the training length alone and
// exited 0. A --set the evaluation does not read is an error that names it; nothing is written.
TEST_CASE("eval refuses a --set it would not read, naming it", "[cli]") {
  ScratchDirectory scratch;
  const fs::path run = scratch.path / "run";
  REQUIRE(train_tiny_run(run, "[eval]\nbatches = 1\n").exit_code == 0);
  const std::string eval = "eval --run '" + run.string() + "'";
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : std::vector<Case>{
           {" --set 'eval.length_factors=[1,2,8192]'",
            "poslab eval --set eval.length_factors: not read by this evaluation"},
           {" --set train.lr=0.5", "poslab eval --set train.lr: a training setting"},
           {" --stream --set eval.stream_length=40 --set eval.batches=3",
            "poslab eval --stream --set eval.batches: not read by this evaluation"},
           {" --passkey --set 'eval.passkey_length_factors=[2]' --set eval.stream_sinks=2",
            "poslab eval --passkey --set eval.stream_sinks: not read by this evaluation"}}) {
    const Outcome r = run_poslab(eval + c.args);
    INFO(c.args << "\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains(c.expected) && Contains("nothing was evaluated"));
  }
  for (const std::string name : {"eval_L8_M0.json", "eval_stream.json", "eval_passkey.json"})
    CHECK_FALSE(fs::exists(run / name));
  // What it reads is honoured: the segment by --set eval.seq_len.
  CHECK(run_poslab(eval + " --set eval.seq_len=16").exit_code == 0);
  CHECK(fs::exists(run / "eval_L16_M0.json"));
}

TEST_CASE("eval --passkey reads the passkey grid of a finished run, from its config or --set",
          "[cli][passkey]") {
  ScratchDirectory scratch;
  const fs::path run = scratch.path / "run";
  REQUIRE(train_tiny_run(run, "[eval]\nbatches = 1\n").exit_code == 0);
  const std::string eval = "eval --run '" + run.string() + "' --passkey";
  SECTION("a run trained without a grid: the error says how to give one, nothing is written") {
    const Outcome r = run_poslab(eval);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("eval.passkey_length_factors is empty") &&
                          Contains("--set 'eval.passkey_length_factors=[2, 4]'"));
    CHECK_FALSE(fs::exists(run / "eval_passkey.json"));
  }
  SECTION("the grid from --set: one row per (length, depth) cell") {
    const Outcome r =
        run_poslab(eval + " --set 'eval.passkey_length_factors=[16]'" +
                   " --set 'eval.passkey_depths=[0.0, 1.0]'" + " --set eval.passkey_instances=2");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(run / "eval_passkey.json");
    const nlohmann::json rows = nlohmann::json::parse(in)["evaluations"];
    REQUIRE(rows.size() == 2);
    for (const auto& row : rows) {
      CHECK(row["kind"] == "passkey");
      CHECK(row["seq_len"] == 128);  // 16 x the trained 8 bytes
      CHECK(row["instances"] == 2);
      CHECK(row["exact_match"].get<double>() >= 0.0);
    }
    CHECK(rows[0]["passkey_depth"] == 0.0);
    CHECK(rows[1]["passkey_depth"] == 1.0);
  }
  SECTION("--passkey with --seq-len is a usage error") {
    CHECK(run_poslab(eval + " --seq-len 16").exit_code == 2);
  }
}
