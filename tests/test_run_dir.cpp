// Run directories (atomic files, metrics.csv, completion) and checkpoints (save, load, and the
// mismatches load must refuse).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>


#include "process_helpers.hpp"
#include "train/checkpoint.hpp"
#include "train/run_dir.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// The small model of these tests: a [3, 4] matrix and a [4] vector.
struct TinyModel {
  ParameterArena<float> arena;
  Param W, b;
  TinyModel(std::vector<std::size_t> b_shape = {4}, std::string b_name = "layer0.ln.gain") {
    W = arena.add("layer0.attn.W_q", {3, 4});
    b = arena.add(std::move(b_name), std::move(b_shape), false);
    arena.allocate();
  }
};

}  // namespace

TEST_CASE("RunDirectory::create makes missing parents and accepts an existing directory",
          "[run_dir]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const fs::path deep = scratch.path / "runs" / "a" / "b";
  const RunDirectory run = RunDirectory::create(deep);
  CHECK(fs::is_directory(deep));
  CHECK(run.path() == deep);
  CHECK_NOTHROW(RunDirectory::create(deep));
  CHECK_NOTHROW(RunDirectory::open(deep));
  CHECK_THROWS_WITH(RunDirectory::open(scratch.path / "nope"), Contains("nope"));
}

TEST_CASE("write_text replaces a file whole and leaves no temporary files", "[run_dir]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const RunDirectory run = RunDirectory::create(scratch.path);
  run.write_text("config.toml", "first version, long enough to notice truncation\n");
  run.write_text("config.toml", "second\n");
  run.write_text("notes.txt", "");
  CHECK(run.read_text("config.toml") == "second\n");
  CHECK(run.read_text("notes.txt").empty());
  CHECK(names_in(scratch.path) == std::vector<std::string>{"config.toml", "notes.txt"});
}

TEST_CASE("a failed atomic write throws, names the file and leaves nothing behind", "[run_dir]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const RunDirectory run = RunDirectory::create(scratch.path);
  fs::create_directory(scratch.path / "occupied");  // a directory cannot be renamed over by a file
  CHECK_THROWS_WITH(run.write_text("occupied", "text"), Contains("occupied"));
  CHECK(names_in(scratch.path) == std::vector<std::string>{"occupied"});
  CHECK_THROWS_WITH(write_file_atomically(scratch.path / "missing-dir" / "x.txt", "text"),
                    Contains("missing-dir"));
}

TEST_CASE("write_json round-trips and eval.json marks a run complete", "[run_dir]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const RunDirectory run = RunDirectory::create(scratch.path);
  CHECK_FALSE(run.is_complete());
  run.write_json("progress.json", {{"step", 10}});
  CHECK_FALSE(run.is_complete());
  const nlohmann::json result = {{"valid_bpc", 1.25}, {"encoding", "none"}, {"steps", 100}};
  run.write_json("eval.json", result);
  CHECK(run.is_complete());
  CHECK(run.read_json("eval.json") == result);
  CHECK(RunDirectory::open(scratch.path).is_complete());
}

TEST_CASE("MetricsLog writes a header, then one line per row", "[run_dir][metrics]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const RunDirectory run = RunDirectory::create(scratch.path);
  {
    MetricsLog log = run.metrics({"step", "lr", "train_loss", "note"});
    log.append({1, 0.5, 2.25f, "warm-up"});
    // Visible before the log is closed: every row is flushed.
    CHECK(read_file(run.file("metrics.csv")) == "step,lr,train_loss,note\n1,0.5,2.25,warm-up\n");
    log.append({2, 1e-4, std::numeric_limits<double>::quiet_NaN(), "a, \"quoted\" note"});
    CHECK_THROWS_AS(log.append({3, 0.1}), std::invalid_argument);
  }
  CHECK(read_file(run.file("metrics.csv")) ==
        "step,lr,train_loss,note\n"
        "1,0.5,2.25,warm-up\n"
        "2,1e-04,,\"a, \"\"quoted\"\" note\"\n");
}

TEST_CASE("MetricsLog appends to a file with the same columns and refuses others",
          "[run_dir][metrics]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  const RunDirectory run = RunDirectory::create(scratch.path);
  run.metrics({"step", "loss"}).append({1, 3.5});
  run.metrics({"step", "loss"}).append({2, 3.0});
  CHECK(read_file(run.file("metrics.csv")) == "step,loss\n1,3.5\n2,3\n");
  CHECK_THROWS_WITH(run.metrics({"step", "valid_loss"}), Contains("metrics.csv"));
}

TEST_CASE("a checkpoint round-trips names, shapes and values", "[checkpoint]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  TinyModel saved;
  for (std::size_t i = 0; i < saved.arena.count(); ++i) saved.arena.values()[i] = 0.25f * i - 1.0f;
  CHECK_FALSE(has_checkpoint(scratch.path));
  save_checkpoint(scratch.path, saved.arena);
  CHECK(has_checkpoint(scratch.path));

  const fs::path dir = scratch.path / "checkpoint";
  CHECK(names_in(scratch.path) == std::vector<std::string>{"checkpoint"});
  CHECK(names_in(dir) ==
        std::vector<std::string>{"layer0.attn.W_q.npy", "layer0.ln.gain.npy", "manifest.json"});
  std::ifstream manifest_file(dir / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  CHECK(manifest.at("total") == 16);
  CHECK(manifest.at("dtype") == "float32");
  CHECK(manifest.at("parameters").at(0).at("name") == "layer0.attn.W_q");
  CHECK(manifest.at("parameters").at(0).at("shape") == nlohmann::json({3, 4}));
  CHECK(manifest.at("parameters").at(1).at("shape") == nlohmann::json({4}));

  TinyModel loaded;
  load_checkpoint(scratch.path, loaded.arena);
  for (std::size_t i = 0; i < loaded.arena.count(); ++i)
    CHECK(loaded.arena.values()[i] == saved.arena.values()[i]);

  // Saving again replaces the checkpoint and cleans up after itself.
  saved.arena.values()[0] = 42.0f;
  save_checkpoint(scratch.path, saved.arena);
  CHECK(names_in(scratch.path) == std::vector<std::string>{"checkpoint"});
  load_checkpoint(scratch.path, loaded.arena);
  CHECK(loaded.arena.values()[0] == 42.0f);
}

TEST_CASE("the .npy files are what numpy expects", "[checkpoint]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  TinyModel model;
  save_checkpoint(scratch.path, model.arena);
  const std::string npy = read_file(scratch.path / "checkpoint" / "layer0.attn.W_q.npy");
  REQUIRE(npy.size() > 10);
  CHECK(npy.substr(0, 6) == "\x93NUMPY");
  CHECK_THAT(npy, Contains("'descr': '<f4'") && Contains("'fortran_order': False") &&
                      Contains("'shape': (3, 4)"));
  CHECK(npy.size() % 64 == 48);  // a 64-byte-aligned header, then 12 float32 values
}

TEST_CASE("load_checkpoint names the parameter that does not match", "[checkpoint]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  TinyModel saved;
  save_checkpoint(scratch.path, saved.arena);

  TinyModel other_shape({5});
  CHECK_THROWS_WITH(load_checkpoint(scratch.path, other_shape.arena),
                    Contains("'layer0.ln.gain' has shape [4] in the checkpoint but [5] in the model"));
  TinyModel other_name({4}, "layer0.ln.bias");
  CHECK_THROWS_WITH(load_checkpoint(scratch.path, other_name.arena),
                    Contains("no parameter 'layer0.ln.bias'"));

  ParameterArena<float> smaller;
  smaller.add("layer0.attn.W_q", {3, 4});
  smaller.allocate();
  smaller.values()[0] = 7.0f;
  CHECK_THROWS_WITH(load_checkpoint(scratch.path, smaller),
                    Contains("'layer0.ln.gain'") && Contains("not in the model"));
  CHECK(smaller.values()[0] == 7.0f);  // a refused checkpoint changes nothing

  CHECK_THROWS_AS(load_checkpoint(scratch.path / "elsewhere", saved.arena), CheckpointError);
}

TEST_CASE("load_checkpoint refuses a damaged file, naming its parameter", "[checkpoint]") {
  ScratchDirectory scratch(ScratchDirectory::kNameOnly);
  TinyModel saved;
  save_checkpoint(scratch.path, saved.arena);
  const fs::path file = scratch.path / "checkpoint" / "layer0.attn.W_q.npy";
  fs::resize_file(file, fs::file_size(file) - 8);  // truncated
  TinyModel loaded;
  loaded.arena.values()[0] = 3.0f;
  CHECK_THROWS_WITH(load_checkpoint(scratch.path, loaded.arena),
                    Contains("'layer0.attn.W_q'") && Contains("truncated"));
  CHECK(loaded.arena.values()[0] == 3.0f);
}

// Issue 51: `poslab eval --stream` killed mid-write left .eval_stream.json.tmp-PID-0 in the run
// for good. The next command that opens the run removes a temporary whose writer is dead, and
// keeps one whose writer is alive (it is about to be renamed into place).
TEST_CASE("opening a run removes the temporary files of a killed writer, not of a live one",
          "[run_dir]") {
  ScratchDirectory dir;
  const pid_t child = ::fork();  // a process that is gone once waited for: a dead writer's pid
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const fs::path dead = dir.path / (".eval_stream.json.tmp-" + std::to_string(child) + "-0");
  const fs::path live = dir.path / (".eval.json.tmp-" + std::to_string(::getpid()) + "-3");
  const fs::path other = dir.path / ".notes.tmp-draft";  // not a name poslab makes
  for (const fs::path& file : {dead, live, other}) std::ofstream(file) << "{";
  poslab::RunDirectory::open(dir.path);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
}
