// Resumable training (train/training_state.hpp, train/stop_request.hpp): a training stopped after
// any step and continued from its saved state ends bit-identical to one that was never stopped:
// parameters, Adam's moments, the memory it carries, the loss curve and the metrics rows.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "model/transformer.hpp"
#include "process_helpers.hpp"
#include "tasks/make_source.hpp"
#include "train/run_dir.hpp"
#include "train/stop_request.hpp"
#include "train/train.hpp"
#include "train/training_state.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A small text with some structure, written to a file: the corpus of the language-model cases.
fs::path write_line_corpus(const fs::path& dir) {
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "line " + std::to_string(i % 37) + ": the quick brown fox " + std::to_string(i * 7 % 11) + "\n";
  const fs::path file = dir / "corpus.txt";
  write_file_atomically(file, text);
  return file;
}

Config tiny(const std::string& variant, const fs::path& corpus) {
  Config c;
  c.model.d_model = 16;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.d_inner = 32;
  c.train.seq_len = 8;
  c.train.batch_size = 3;
  c.train.steps = 30;
  c.train.warmup_steps = 4;
  c.train.log_every = 4;
  c.train.threads = 1;
  c.data.path = corpus.string();
  c.encoding.type = "transformer_xl";
  c.memory.mem_len = 8;  // memory carried across steps: part of the saved state
  if (variant == "randomized positions") {  // a random generator carried across steps
    c.encoding.type = "sinusoidal";
    c.memory.mem_len = 0;
    c.train.randomized_positions = true;
    c.train.max_position = 64;
  } else if (variant == "PoSE") {  // rows drawn by a generator the source replays
    c.encoding.type = "rope";
    c.memory.mem_len = 0;
    c.train.pose_target_len = 32;
  } else if (variant == "copy task") {  // a generated task: the data position is replayed draws
    c.encoding.type = "shaw";
    c.memory.mem_len = 0;
    c.task.name = "copy";
  }
  return c;
}

// Passes batches through and asks the trainer to stop, as SIGTERM would, while it draws the
// batch of step `stop_at` (1-based): the trainer finishes that step, saves and throws.
class StopAtStep : public BatchSource {
 public:
  StopAtStep(BatchSource& inner, int stop_at) : inner_(inner), stop_at_(stop_at) {}
  bool next(Batch& out) override {
    if (++served_ == stop_at_) request_stop(SIGTERM);
    return inner_.next(out);
  }
  void reset() override { inner_.reset(); }
  std::int64_t batches_per_pass() const override { return inner_.batches_per_pass(); }
  int batch() const override { return inner_.batch(); }
  int len() const override { return inner_.len(); }

 private:
  BatchSource& inner_;
  int stop_at_, served_ = 0;
};

struct TrainedState {
  std::vector<float> values, m, v, memory;
  std::vector<double> losses;  // the steps this process trained
  double final_train_loss = 0;
};

TrainedState outcome_of(const TransformerLM<float>& model, const TrainReport& report) {
  const ParameterArena<float>& arena = model.arena();
  const std::size_t P = arena.count();
  return {{arena.values(), arena.values() + P}, {arena.adam_m(), arena.adam_m() + P},
          {arena.adam_v(), arena.adam_v() + P}, model.carried_state().memory, report.losses,
          report.final_train_loss};
}

// The metrics rows without the two wall-clock columns (tokens_per_second, elapsed_s).
std::vector<std::string> metrics_without_timing(const fs::path& csv) {
  std::vector<std::string> rows;
  std::istringstream in(read_file(csv));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream cells_in(line);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    if (cells.size() >= 6) cells.erase(cells.begin() + 4, cells.begin() + 6);
    std::string kept;
    for (const std::string& cell : cells) kept += cell + ",";
    rows.push_back(kept);
  }
  return rows;
}

// Trains `c` in run directory `dir`: from step 0, or from its saved state; stopped at step
// `stop_at` if > 0. Returns what the model ends with.
TrainedState train_in(const Config& c, const fs::path& dir, bool from_saved_state, int stop_at = 0) {
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(c.train.seed);
  auto source = make_batch_source(c, SourceSpec{.split = Split::train, .len = c.train.seq_len});
  StopAtStep stopping(*source, stop_at);
  RunDirectory run = RunDirectory::create(dir);
  if (from_saved_state) drop_metrics_after(run.file("metrics.csv"), saved_steps_done(dir));
  MetricsLog metrics = run.metrics(training_metrics_columns());
  const Resumable resumable{.run_dir = dir, .save_every = 7, .from_saved_state = from_saved_state,
                            .threads = 1};
  std::ostringstream quiet;
  const TrainReport report =
      train_model(model, c, stopping, nullptr, &metrics, quiet, &resumable);
  return outcome_of(model, report);
}

}  // namespace

TEST_CASE("a training stopped after any step and resumed ends bit-identical to one never stopped",
          "[resume]") {
  const std::string variant = GENERATE(as<std::string>{}, "XL memory", "randomized positions",
                                       "PoSE", "copy task");
  const int stop_at = GENERATE(1, 7, 13, 29);  // the first step, a save step, any, the last but one
  INFO(variant << ", stopped after step " << stop_at);
  ScratchDirectory scratch;
  const Config c = tiny(variant, write_line_corpus(scratch.path));
  set_threads(1);

  const TrainedState whole = train_in(c, scratch.path / "whole", false);
  REQUIRE(whole.losses.size() == 30);

  const fs::path dir = scratch.path / "stopped";
  try {
    train_in(c, dir, false, stop_at);
    FAIL("the stop request did not stop the training");
  } catch (const TrainingInterrupted& stopped) {
    CHECK(stopped.signal == SIGTERM);
    CHECK(stopped.steps_done == stop_at);
  }
  request_stop(0);
  REQUIRE(has_training_state(dir));
  CHECK(saved_steps_done(dir) == stop_at);

  const TrainedState resumed = train_in(c, dir, true);
  CHECK(resumed.losses.size() == std::size_t(30 - stop_at));
  CHECK(std::vector<double>(whole.losses.end() - resumed.losses.size(), whole.losses.end()) ==
        resumed.losses);
  CHECK(resumed.final_train_loss == whole.final_train_loss);
  CHECK(resumed.values == whole.values);  // float ==: bit for bit (no NaN in a trained model)
  CHECK(resumed.m == whole.m);
  CHECK(resumed.v == whole.v);
  CHECK(resumed.memory == whole.memory);
  CHECK(metrics_without_timing(dir / "metrics.csv") ==
        metrics_without_timing(scratch.path / "whole" / "metrics.csv"));
}

TEST_CASE("the state is saved every save_every steps and after the last", "[resume]") {
  ScratchDirectory scratch;
  Config c = tiny("XL memory", write_line_corpus(scratch.path));
  c.train.steps = 10;
  set_threads(1);
  const fs::path dir = scratch.path / "run";
  train_in(c, dir, false);  // save_every 7: after steps 7 and 10
  CHECK(saved_steps_done(dir) == 10);
  remove_training_state(dir);
  CHECK_FALSE(has_training_state(dir));
  CHECK_FALSE(fs::exists(dir / "resume"));
}

TEST_CASE("a saved state that does not fit the model is refused and changes nothing", "[resume]") {
  ScratchDirectory scratch;
  const Config c = tiny("XL memory", write_line_corpus(scratch.path));
  set_threads(1);
  const fs::path dir = scratch.path / "run";
  train_in(c, dir, false);

  SECTION("another width") {
    Config wider = c;
    wider.model.d_model = 24;
    TransformerLM<float> model(wider.model, wider.encoding, wider.memory);
    model.init(1);
    const std::vector<float> before(model.arena().values(),
                                    model.arena().values() + model.arena().count());
    CHECK_THROWS_WITH(load_training_state(dir, model),
                      Contains(dir.string()) && Contains("parameters"));
    CHECK(std::vector<float>(model.arena().values(),
                             model.arena().values() + model.arena().count()) == before);
  }
  SECTION("a truncated arena file") {
    fs::resize_file(dir / "resume" / "arena.f32", 12);
    TransformerLM<float> model(c.model, c.encoding, c.memory);
    model.init(1);
    CHECK_THROWS_WITH(load_training_state(dir, model),
                      Contains("arena.f32") && Contains("is 12 bytes"));
  }
  SECTION("a damaged state.json") {
    write_file_atomically(dir / "resume" / "state.json", "{\"format\": ");
    TransformerLM<float> model(c.model, c.encoding, c.memory);
    model.init(1);
    CHECK_THROWS_WITH(load_training_state(dir, model), Contains("state.json"));
  }
}

TEST_CASE("drop_metrics_after keeps the header and the rows up to the saved step", "[resume]") {
  ScratchDirectory scratch;
  const fs::path csv = scratch.path / "metrics.csv";
  write_file_atomically(csv, "step,loss\n4,2.5\n8,2.1\n12,1.9\n");
  drop_metrics_after(csv, 8);
  CHECK(read_file(csv) == "step,loss\n4,2.5\n8,2.1\n");
  write_file_atomically(csv, "step,loss\nx,2.5\n");
  CHECK_THROWS_WITH(drop_metrics_after(csv, 8), Contains("line 2"));
}

// The whole path as a user meets it: `poslab train` gets SIGTERM (Slurm's time limit, scancel,
// a stopped `poslab run`), exits 143 with its state saved, and `--resume` finishes it to the very
// checkpoint an uninterrupted run writes.
TEST_CASE("poslab train stopped by SIGTERM and resumed writes the uninterrupted run's checkpoint",
          "[resume][cli]") {
  ScratchDirectory scratch;
  const fs::path corpus = write_line_corpus(scratch.path);
  write_file_atomically(scratch.path / "run.toml", "");  // every key from --set
  const std::string settings =
      " --config run.toml --set data.path=" + shell_quote(corpus.string()) +
      " --set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2"
      " --set model.d_inner=32 --set train.seq_len=16 --set train.batch_size=4"
      " --set train.steps=20000 --set train.log_every=500 --set train.threads=1"
      " --set train.save_state_every=0 --set memory.mem_len=16 --set eval.batches=2"
      " --set eval.memory_factors=[1.0]";
  const testing::Outcome whole = run_poslab("train" + settings + " --out whole", scratch.path);
  REQUIRE(whole.exit_code == 0);

  // Start the same run in the background; stop it once it has logged a row.
  const fs::path log = scratch.path / "stopped.log";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const std::string command = "cd " + shell_quote(scratch.path.string()) + " && exec " +
                                shell_quote(POSLAB_BINARY) + " train" + settings +
                                " --out stopped >" + shell_quote(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path metrics = scratch.path / "stopped" / "metrics.csv";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_file(metrics).find("\n500,") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(child, SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO(read_file(log));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 128 + SIGTERM);  // stopped before the end, not finished
  CHECK_THAT(read_file(log), Contains("the training state is saved") && Contains("--resume"));
  CHECK_FALSE(fs::exists(scratch.path / "stopped" / "eval.json"));
  const int saved = saved_steps_done(scratch.path / "stopped");
  CHECK(saved >= 500);
  CHECK(saved < 20000);

  const testing::Outcome resumed = run_poslab("train" + settings + " --out stopped --resume", scratch.path);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resumed after step " + std::to_string(saved)));
  CHECK_FALSE(fs::exists(scratch.path / "stopped" / "resume"));  // finished: checkpoint/ suffices
  for (const fs::directory_entry& file : fs::directory_iterator(scratch.path / "whole" / "checkpoint")) {
    INFO(file.path().filename());
    CHECK(read_file(scratch.path / "stopped" / "checkpoint" / file.path().filename()) ==
          read_file(file.path()));
  }
}
