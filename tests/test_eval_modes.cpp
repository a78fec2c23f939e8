// The conformance kit of the evaluation modes (eval/mode.hpp), like the encodings' kit
// (test_conformance.cpp): every registered mode, prepared on a tiny language model's config
// that asks for all of them, must
//   - make at least one row, each with a kind, a seq_len, a split and a loss (a finite number,
//     or null beside an "error");
//   - read its input: two models that differ only in their parameters (init seeds 1 and 2) give
//     rows of different losses, row by row.
// A mode that ignores the model (here: rows of constants) fails the second check; one that
// makes no row fails the first. docs/07, "Add an evaluation mode", runs a new mode through it.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>

#include "config/load.hpp"
#include "eval/mode.hpp"
#include "eval/plan.hpp"
#include "train/registered_choices.hpp"

namespace {

using poslab::Config;
using poslab::EvalMode;
using poslab::EvalRows;

// A byte-level model of 1 layer on Debian's fortunes, with every mode's keys set: the passkey
// grid at 128 bytes (the paper's prompt needs 103), a stream of 100 bytes.
Config kit_config() {
  return poslab::config_from_string(R"(
[model]
d_model = 16
n_layers = 1
n_heads = 2
d_inner = 32
[encoding]
type = "transformer_xl"
[memory]
mem_len = 16
[train]
seq_len = 32
batch_size = 4
threads = 1
[eval]
batches = 2
length_factors = [2.0]
passkey_length_factors = [4.0]
passkey_depths = [0.5]
passkey_instances = 2
stream_length = 100
stream_recent = 11
)", "kit.toml", poslab::registered_choices());
}

EvalRows rows_of(const EvalMode& mode, const Config& cfg, std::uint64_t seed) {
  poslab::TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(seed);
  EvalRows rows;
  std::ostringstream out;
  mode.prepare(cfg, poslab::RunFacts{})->evaluate(model, [] {}, rows, out);
  return rows;
}

// What is wrong with `mode` by the kit's two checks, or "" if nothing.
std::string eval_mode_problem(const EvalMode& mode, const Config& cfg) {
  const EvalRows a = rows_of(mode, cfg, 1), b = rows_of(mode, cfg, 2);
  if (a.empty()) return mode.name + ": no row";
  if (a.size() != b.size()) return mode.name + ": the number of rows depends on the model";
  for (std::size_t i = 0; i < a.size(); ++i) {
    const nlohmann::json& row = a[i];
    const std::string which = mode.name + " row " + std::to_string(i) + " " + row.dump();
    for (const char* key : {"kind", "seq_len", "split", "loss"})
      if (!row.contains(key)) return which + ": no \"" + key + "\"";
    if (row["loss"].is_null()) {
      if (!row.contains("error")) return which + ": a null loss without an error";
      continue;
    }
    if (!row["loss"].is_number() || !std::isfinite(row["loss"].get<double>()))
      return which + ": the loss is not a finite number";
    if (row["loss"] == b[i]["loss"])
      return which + ": the same loss for two different models (the mode ignores its input)";
  }
  return "";
}

// A mode that ignores what it is given: one row of constants.
class ConstantRows : public poslab::PreparedEvaluation {
 public:
  void evaluate(poslab::TransformerLM<float>&, const poslab::BeforeEach& before_each,
                EvalRows& rows, std::ostream&) override {
    before_each();
    rows.push_back({{"kind", "constant"}, {"seq_len", 32}, {"split", "valid"}, {"loss", 2.5}});
  }
};

}  // namespace

TEST_CASE("eval modes: every registered mode makes rows that read the model", "[eval_modes]") {
  const Config cfg = kit_config();
  REQUIRE(poslab::registered_eval_modes().size() >= 4);
  for (const EvalMode& mode : poslab::registered_eval_modes()) {
    INFO("mode " << mode.name << ": " << mode.measures);
    CHECK(eval_mode_problem(mode, cfg) == "");
  }
}

TEST_CASE("eval modes: the kit refuses a mode that ignores its input", "[eval_modes]") {
  const EvalMode constant{.name = "constant",
                          .measures = "nothing",
                          .wanted = [](const Config&) { return true; },
                          .prepare = [](const Config&, const poslab::RunFacts&) {
                            return std::unique_ptr<poslab::PreparedEvaluation>(
                                std::make_unique<ConstantRows>());
                          }};
  CHECK_THAT(eval_mode_problem(constant, kit_config()),
             Catch::Matchers::Contains("the same loss for two different models"));
}

TEST_CASE("eval modes: a plan evaluates the modes a config wants, in registered order",
          "[eval_modes]") {
  Config cfg = kit_config();
  cfg.eval.length_factors = {};
  poslab::EvalPlan plan = poslab::prepare_plan(cfg, poslab::RunFacts{});
  CHECK(plan.modes.size() == 3);  // chunked, passkey, stream; not the example (wanted: never)
  poslab::TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(1);
  int units = 0;  // before_each: once per chunked setting, per passkey cell, for the stream
  std::ostringstream out;
  const EvalRows rows = poslab::run_plan(plan, model, [&units] { ++units; }, out);
  REQUIRE(rows.size() == 1 + 1 + 4);  // main; one passkey cell; four stream modes
  CHECK(rows[0]["kind"] == "main");
  CHECK(rows[1]["kind"] == "passkey");
  CHECK(rows[2]["kind"] == "stream_sinks");
  CHECK(units == 3);
  cfg.eval.stream_length = 0;
  cfg.eval.passkey_length_factors = {};
  CHECK(poslab::prepare_plan(cfg, poslab::RunFacts{}).modes.size() == 1);
}

TEST_CASE("eval modes: the example's context gain is its two losses' difference",
          "[eval_modes]") {
  const EvalRows rows = rows_of(poslab::find_eval_mode("example_context_gain"), kit_config(), 1);
  REQUIRE(rows.size() == 1);
  const nlohmann::json& row = rows[0];
  CHECK(row["seq_len"] == 32);
  CHECK(row["context_gain"].get<double>() ==
        Approx(row["first_position_loss"].get<double>() - row["loss"].get<double>()));
  CHECK_THROWS_WITH(poslab::find_eval_mode("nope"),
                    Catch::Matchers::Contains("unknown evaluation mode 'nope'"));
}
