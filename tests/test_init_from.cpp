// Fine-tuning from a finished run (train/init_from.hpp): `poslab train --init-from RUN` starts
// from RUN's parameters (bit for bit), records its parent, refuses a parameter of another shape
// and an unfinished, missing or corrupt parent before writing anything, optionally continues the
// parent's Adam moments, and resumes from its own saved state without reading the parent again.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "core/sha256.hpp"
#include "process_helpers.hpp"
#include "train/checkpoint.hpp"
#include "train/init_from.hpp"
#include "train/optimizer.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A tiny model on a small text: a run takes a fraction of a second.
struct Fixture {
  ScratchDirectory scratch;
  std::string settings;  // `--config run.toml --set ...` for `poslab train`

  explicit Fixture(const std::string& encoding = "rope") {
    std::string text;
    for (int i = 0; i < 600; ++i) text += "line " + std::to_string(i % 37) + ": the quick fox\n";
    write_file_atomically(scratch.path / "corpus.txt", text);
    write_file_atomically(scratch.path / "run.toml", "");
    settings = " --config run.toml --set data.path=" +
               shell_quote((scratch.path / "corpus.txt").string()) +
               " --set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2"
               " --set model.d_inner=32 --set train.seq_len=8 --set train.batch_size=2"
               " --set train.steps=6 --set train.warmup_steps=2 --set train.threads=1"
               " --set eval.batches=1 --set encoding.type=" + encoding;
  }
  Outcome train(const std::string& more) { return run_poslab("train" + settings + more, scratch.path); }
  fs::path operator/(const std::string& name) const { return scratch.path / name; }
};


// Every file of a checkpoint-format directory equal, byte for byte, to the other's.
bool same_files(const fs::path& a, const fs::path& b) {
  std::size_t files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(a)) {
    ++files;
    if (read_file(entry.path()) != read_file(b / entry.path().filename())) return false;
  }
  return files > 0 && files == std::size_t(std::distance(fs::directory_iterator(b), {}));
}

}  // namespace

TEST_CASE("sha256 gives the FIPS 180-4 test vectors", "[init_from]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 pieces;  // the same message given in pieces across block boundaries
  const std::string million(1000000, 'a');
  pieces.update(std::string_view(million).substr(0, 63));
  pieces.update(std::string_view(million).substr(63));
  CHECK(pieces.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("a fine-tuned run starts from its parent's parameters and records it", "[init_from][cli]") {
  Fixture f;
  const Outcome parent = f.train(" --out parent");
  REQUIRE(parent.exit_code == 0);
  REQUIRE(has_optimizer_state(f / "parent"));  // a finished run keeps Adam's moments

  SECTION("zero steps: the child's checkpoint is the parent's, bit for bit") {
    const Outcome child = f.train(" --init-from parent --set train.steps=0 --out child");
    INFO(child.out << child.err);
    REQUIRE(child.exit_code == 0);
    CHECK_THAT(child.out, Contains("fine-tuning from parent") && Contains("optimizer fresh"));
    CHECK(same_files(f / "parent" / "checkpoint", f / "child" / "checkpoint"));
    // ... and a run that does not start from it does not have that checkpoint.
    REQUIRE(f.train(" --set train.steps=0 --out fresh").exit_code == 0);
    CHECK_FALSE(same_files(f / "parent" / "checkpoint", f / "fresh" / "checkpoint"));
    // Fresh optimizer: the child's moments after 0 steps are zeros, not the parent's.
    CHECK_FALSE(same_files(f / "parent" / "optimizer" / "adam_m", f / "child" / "optimizer" / "adam_m"));
  }
  SECTION("a changed segment, batch, schedule and rope options (yarn); the record names the parent") {
    const Outcome child = f.train(
        " --init-from parent --set train.seq_len=16 --set train.batch_size=3 --set train.steps=4"
        " --set train.lr=3e-4 --set train.warmup_steps=0 --set encoding.fraction=0.5"
        " --set encoding.scaling=yarn --set encoding.factor=2 --set encoding.original_len=8"
        " --out child");
    INFO(child.out << child.err);
    REQUIRE(child.exit_code == 0);
    const nlohmann::json eval = json_of(f / "child" / "eval.json");
    CHECK(eval["fine_tuned_from"] == "parent");
    const nlohmann::json& record = eval["provenance"]["init_from"];
    CHECK(record["path"] == "parent");
    CHECK(record["absolute_path"] == (f / "parent").string());
    CHECK(record["config_sha256"] == sha256_hex(read_file(f / "parent" / "config.toml")));
    CHECK(record["checkpoint_sha256"] == checkpoint_sha256(f / "parent"));
    // ... which is the SHA-256 of manifest.json and then every file it lists, in its order.
    const fs::path checkpoint = f / "parent" / "checkpoint";
    const std::string manifest = read_file(checkpoint / "manifest.json");
    Sha256 by_hand;
    by_hand.update(manifest);
    const nlohmann::json parameters = nlohmann::json::parse(manifest)["parameters"];
    REQUIRE(parameters.size() > 3);
    for (const nlohmann::json& p : parameters)
      by_hand.update(read_file(checkpoint / p["file"].get<std::string>()));
    CHECK(record["checkpoint_sha256"] == by_hand.hex());
    CHECK(record["steps"] == 6);
    CHECK(record["seq_len"] == 8);
    CHECK(record["optimizer"] == "fresh");
    CHECK(json_of(f / "child" / "init_from.json") == record);
    // The config it ran with says where it started: it is part of the experiment.
    const Config config = load_config((f / "child" / "config.toml").string(), registered_choices());
    CHECK(config.train.init_from == "parent");
    CHECK(config.train.seq_len == 16);
  }
  SECTION("--init-optimizer: the parent's Adam moments, bit for bit after zero steps") {
    const Outcome child =
        f.train(" --init-from parent --init-optimizer --set train.steps=0 --out child");
    INFO(child.out << child.err);
    REQUIRE(child.exit_code == 0);
    CHECK_THAT(child.out, Contains("optimizer continued"));
    CHECK(same_files(f / "parent" / "optimizer" / "adam_m", f / "child" / "optimizer" / "adam_m"));
    CHECK(same_files(f / "parent" / "optimizer" / "adam_v", f / "child" / "optimizer" / "adam_v"));
    CHECK(json_of(f / "child" / "eval.json")["provenance"]["init_from"]["optimizer"] == "continued");
    // One step with continued moments differs from one step with fresh ones.
    REQUIRE(f.train(" --init-from parent --init-optimizer --set train.steps=1 --out one_m").exit_code == 0);
    REQUIRE(f.train(" --init-from parent --set train.steps=1 --out one_fresh").exit_code == 0);
    CHECK_FALSE(same_files(f / "one_m" / "checkpoint", f / "one_fresh" / "checkpoint"));
  }
}

TEST_CASE("a parent that cannot be a parent is refused before anything is written",
          "[init_from][cli]") {
  Fixture f;
  REQUIRE(f.train(" --out parent").exit_code == 0);
  std::string expected;
  std::string more;
  SECTION("another width: the parameter and both shapes, and the key that differs") {
    more = " --init-from parent --set model.d_model=32 --set model.d_inner=32";
    expected = "train.init_from = parent: checkpoint";
    const Outcome child = f.train(more + " --out child");
    CHECK_THAT(child.err, Contains("has shape [256, 16] in the parent but [256, 32] in this run") &&
                              Contains("model.d_model: 16 -> 32") &&
                              Contains("fine-tuning keeps every parameter's name and shape"));
  }
  SECTION("a missing directory") {
    more = " --init-from nowhere";
    expected = "train.init_from = nowhere: no such run directory";
  }
  SECTION("an unfinished run") {
    fs::create_directories(f / "killed");
    fs::copy_file(f / "parent" / "config.toml", f / "killed" / "config.toml");
    more = " --init-from killed";
    expected = "train.init_from = killed: not a finished run (no eval.json): it was interrupted";
  }
  SECTION("a corrupt checkpoint") {
    fs::resize_file(f / "parent" / "checkpoint" / "output.b.npy", 40);
    more = " --init-from parent";
    expected = "parameter 'output.b'";
  }
  SECTION("--init-optimizer from a run without Adam moments") {
    fs::remove_all(f / "parent" / "optimizer");
    more = " --init-from parent --init-optimizer";
    expected = "the run kept no Adam moments";
  }
  SECTION("--init-optimizer without --init-from") {
    more = " --init-optimizer";
    expected = "train.init_optimizer = true needs train.init_from";
  }
  const Outcome child = f.train(more + " --out child");
  INFO(child.out << child.err);
  CHECK(child.exit_code == 1);
  CHECK_THAT(child.err, Contains("poslab: error: ") && Contains(expected));
  CHECK_FALSE(fs::exists(f / "child"));  // nothing written
}

TEST_CASE("learned positions: a longer table is another shape, refused by name", "[init_from][cli]") {
  Fixture f("learned");
  REQUIRE(f.train(" --set encoding.max_len=16 --out parent").exit_code == 0);
  // A longer segment within the table is fine-tuning as usual ...
  CHECK(f.train(" --set encoding.max_len=16 --set train.seq_len=16 --init-from parent --out ok")
            .exit_code == 0);
  // ... beyond it needs a longer table: refused by the config rule, or by the shape.
  const Outcome longer = f.train(" --set encoding.max_len=16 --set train.seq_len=32 --init-from parent --out a");
  CHECK_THAT(longer.err, Contains("encoding.max_len (16) must be at least train.seq_len (32)"));
  const Outcome table = f.train(" --set encoding.max_len=32 --set train.seq_len=32 --init-from parent --out b");
  CHECK(table.exit_code == 1);
  CHECK_THAT(table.err, Contains("parameter 'learned.U' has shape [16, 16] in the parent but [32, 16] "
                                 "in this run") && Contains("encoding.max_len: 16 -> 32"));
  CHECK_FALSE(fs::exists(f / "a"));
  CHECK_FALSE(fs::exists(f / "b"));
}

TEST_CASE("Adam's bias correction counts the parent's steps when its moments continue",
          "[init_from]") {
  ParameterArena<float> arena;
  const Param p = arena.add("w", {1}, false);
  arena.allocate();
  *arena.value(p) = 1.0f, *arena.grad(p) = 0.5f, arena.adam_m()[0] = 0.1f, arena.adam_v()[0] = 0.04f;
  TrainConfig c;
  c.weight_decay = 0;
  adamw_step(arena, c, /*step=*/0, /*lr=*/0.01, /*moment_steps_before=*/10);
  const int t = 11;  // the 11th update these moments have seen
  const double m = 0.9 * 0.1 + 0.1 * 0.5, v = 0.99 * 0.04 + 0.01 * 0.25;
  const double expected =
      1.0 - 0.01 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.99, t))) + 1e-8);
  CHECK(arena.values()[0] == Approx(expected).epsilon(1e-6));
  CHECK(arena.adam_m()[0] == Approx(m).epsilon(1e-6));
}

// A fine-tuned run stopped mid-way and resumed continues from its own saved state: it ends with
// the checkpoint of an uninterrupted child even though the parent is gone by then.
TEST_CASE("a fine-tuned run stopped by SIGTERM resumes without its parent", "[init_from][resume][cli]") {
  Fixture f;
  REQUIRE(f.train(" --out parent").exit_code == 0);
  const std::string child = " --init-from parent --set train.steps=20000 --set train.log_every=500"
                            " --set train.save_state_every=0 --set train.seq_len=16";
  const Outcome whole = f.train(child + " --out whole");
  REQUIRE(whole.exit_code == 0);

  const fs::path log = f / "stopped.log";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string command = "cd " + shell_quote(f.scratch.path.string()) + " && exec " +
                                shell_quote(POSLAB_BINARY) + " train" + f.settings + child +
                                " --out stopped >" + shell_quote(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path metrics = f / "stopped" / "metrics.csv";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (read_file(metrics).find("\n500,") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO(read_file(log));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 128 + SIGTERM);
  REQUIRE(fs::exists(f / "stopped" / "init_from.json"));

  fs::rename(f / "parent", f / "parent.gone");  // a resumed child never reads its parent again
  const Outcome resumed = f.train(child + " --out stopped --resume");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resumed after step"));
  CHECK(same_files(f / "whole" / "checkpoint", f / "stopped" / "checkpoint"));
  CHECK(json_of(f / "stopped" / "eval.json")["provenance"]["init_from"] ==
        json_of(f / "whole" / "eval.json")["provenance"]["init_from"]);
}
