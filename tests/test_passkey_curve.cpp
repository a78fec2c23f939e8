// Retrieval read during training (train/passkey_curve.hpp, train.eval_passkey_instances): the
// curve file, that it leaves the training's bits alone, that its reads are the real evaluation,
// and the config's refusals.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "process_helpers.hpp"
#include "study_helpers.hpp"
#include "train/passkey_curve.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A tiny language model at 64 bytes with a passkey grid of one length and two depths.
std::string curve_config(const fs::path& corpus, int mem_len) {
  return "[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nd_inner = 32\n"
         "[encoding]\ntype = \"rope\"\n"
         "[memory]\nmem_len = " + std::to_string(mem_len) + "\n"
         "[data]\npath = \"" + corpus.string() + "\"\n"
         "[train]\nseq_len = 64\nbatch_size = 2\nsteps = 6\neval_every = 2\neval_batches = 1\n"
         "passkey_fraction = 0.5\n"
         "[eval]\nbatches = 1\nsplit = \"valid\"\npasskey_length_factors = [1]\n"
         "passkey_depths = [0, 1]\npasskey_instances = 3\npasskey_format = \"compact\"\n"
         "passkey_filler = \"sentence\"\n";
}

std::vector<std::vector<std::string>> csv_rows(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_file(file));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string cell; std::getline(l, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("passkey curve: a row per cell at every eval_every steps and after the last; the "
          "training's bits unchanged; the reads are the evaluation's",
          "[passkey][curve]") {
  const int mem_len = GENERATE(0, 16);
  ScratchDirectory scratch;
  write_file(scratch.path / "run.toml", curve_config(write_corpus(scratch.path), mem_len));
  auto train = [&](const std::string& name, const std::string& extra) {
    const Outcome r = run_poslab("train --config run.toml --out " + name + extra, scratch.path);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  const Outcome with = train("with", " --set train.eval_passkey_instances=3");
  train("without", "");
  INFO("memory " << mem_len);
  CHECK_THAT(with.out, Contains("passkey (validation, 3 per cell) at step 2, exact match by "
                                "length: 64: "));
  CHECK_THAT(with.out, Contains("passkey curve: "));
  CHECK_FALSE(fs::exists(scratch.path / "without" / "passkey_curve.csv"));

  const auto rows = csv_rows(scratch.path / "with" / "passkey_curve.csv");
  REQUIRE(rows.size() == 1 + 3 * 2);  // header + steps 2, 4, 6 x depths 0, 1
  CHECK(rows[0] == std::vector<std::string>{"step", "factor", "seq_len", "depth", "instances",
                                            "exact_match", "greedy_exact_match",
                                            "digit_accuracy", "loss"});
  const std::vector<std::string> steps = {"2", "2", "4", "4", "6", "6"};
  for (std::size_t i = 1; i < rows.size(); ++i) {
    CHECK(rows[i][0] == steps[i - 1]);
    CHECK(rows[i][2] == "64");
    CHECK(rows[i][4] == "3");
    CHECK(std::stod(rows[i][8]) > 0);  // a digit's cross-entropy
  }
  CHECK(rows[1][8] != rows[5][8]);  // the model changed between steps 2 and 6

  // Reading during training changes nothing the training computes.
  for (const fs::directory_entry& f : fs::directory_iterator(scratch.path / "without" / "checkpoint")) {
    INFO(f.path().filename());
    CHECK(read_file(f.path()) == read_file(scratch.path / "with" / "checkpoint" / f.path().filename()));
  }
  const nlohmann::json a = json_of(scratch.path / "with" / "eval.json"),
                       b = json_of(scratch.path / "without" / "eval.json");
  CHECK(a["loss"].get<double>() == b["loss"].get<double>());
  CHECK(a["train_loss"].get<double>() == b["train_loss"].get<double>());

  // The read after the last step is the final evaluation of the same instances (eval.split is
  // valid here, with as many instances): the same digit loss, to the rounding of other rows per
  // forward pass.
  int matched = 0;
  for (const nlohmann::json& e : a["evaluations"])
    if (e["kind"] == "passkey") {
      const std::size_t row = e["passkey_depth"].get<double>() == 0 ? 5 : 6;
      CHECK(std::stod(rows[row][8]) == Approx(e["loss"].get<double>()).epsilon(1e-5));
      CHECK(std::stod(rows[row][5]) == e["exact_match"].get<double>());
      ++matched;
    }
  CHECK(matched == 2);
}

TEST_CASE("passkey curve: refused without a grid or without eval_every, naming the key",
          "[passkey][curve]") {
  ScratchDirectory scratch;
  write_file(scratch.path / "run.toml", curve_config(write_corpus(scratch.path), 0));
  const Outcome no_grid = run_poslab(
      "train --config run.toml --out x --set train.eval_passkey_instances=3 "
      "--set 'eval.passkey_length_factors=[]'", scratch.path);
  CHECK(no_grid.exit_code != 0);
  CHECK_THAT(no_grid.err, Contains("train.eval_passkey_instances = 3") &&
                              Contains("eval.passkey_length_factors is empty"));
  const Outcome no_every = run_poslab(
      "train --config run.toml --out x --set train.eval_passkey_instances=3 "
      "--set train.eval_every=0", scratch.path);
  CHECK(no_every.exit_code != 0);
  CHECK_THAT(no_every.err, Contains("train.eval_every is 0"));
  CHECK_FALSE(fs::exists(scratch.path / "x"));  // nothing written
}

TEST_CASE("passkey curve: a read puts back the memory the training carries", "[passkey][curve]") {
  // In `poslab train` the validation loss read at the same steps restarts the memory anyway;
  // the curve itself must still leave the model as it found it (a caller without a validation
  // read, or another order, would otherwise train on a cleared memory).
  poslab::Config c;
  c.model.d_model = 16;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.d_inner = 32;
  c.encoding.type = "rope";
  c.encoding.options = poslab::Options::defaults(poslab::find_encoding("rope")->options);
  c.memory.mem_len = 16;
  c.train.seq_len = 64;
  c.train.batch_size = 2;
  c.train.eval_passkey_instances = 2;
  c.eval.passkey_length_factors = {1};
  c.eval.passkey_depths = {0.5};
  c.eval.passkey_format = "compact";
  poslab::TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(5);
  std::vector<std::int32_t> tokens(2 * 8), targets(2 * 8);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = int(i * 7 % 256), targets[i] = int(i * 3 % 256);
  model.forward(tokens.data(), targets.data(), nullptr, 2, 8, 0, true);  // fills the memory
  const auto before = model.carried_state();
  REQUIRE(before.rows > 0);
  ScratchDirectory scratch;
  poslab::PasskeyCurve curve(c, scratch.path,
                             poslab::PasskeyGenerator(poslab::PasskeyFiller::sentence, nullptr,
                                                      "the sentence", poslab::PasskeyFormat::compact),
                             0);
  const auto cells = curve.read(model, 10);
  REQUIRE(cells.size() == 1);
  CHECK(cells[0].instances == 2);
  const auto after = model.carried_state();
  CHECK(after.rows == before.rows);
  CHECK(after.batch == before.batch);
  CHECK(after.memory == before.memory);
}
