// An evaluation mode: one kind of measurement a finished training makes (chunked segments,
// passkey retrieval, streaming caches, ...), written as rows of eval.json's "evaluations".
//
// A mode is prepared from the run's config BEFORE anything is written (every check that can
// fail on the config happens there: memory, data long enough, a generator that can fill the
// longest instance), and evaluated once the model is trained:
//
//     wanted(cfg)              does the config ask for this mode (its keys set)?
//     prepare(cfg, facts)      -> PreparedEvaluation  what to evaluate, checked
//                              throws                 the config asks for what cannot be run
//     evaluate(model, ...)     appends its rows, one per setting (a length, a cell, a cache)
//
// A setting the model cannot run is a row with its "error" and a null "loss", not an exception:
// the run's other rows still count. The modes are listed once, in eval/modes.cpp, and run in
// that order (eval/plan.hpp); docs/07, "Add an evaluation mode", builds one.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "model/transformer.hpp"

namespace poslab {

// What the plan needs to know of a run besides its config.
struct RunFacts {
  // The training source is a generated task of independent rows (tasks/instance_batcher.hpp),
  // not a corpus stream: exact match counts instances, and the gate settings exist.
  bool independent_rows = false;
};

// Rows of eval.json's "evaluations", in order.
using EvalRows = std::vector<nlohmann::json>;

// Called before each unit of work (a setting, a cell, the stream's modes): a stop request
// (SIGTERM) ends the evaluation there, by throwing.
using BeforeEach = std::function<void()>;

// One mode, prepared for one run: checked, ready to evaluate a model.
class PreparedEvaluation {
 public:
  virtual ~PreparedEvaluation() = default;
  // Appends this mode's rows to `rows`, printing one line per row to `out`.
  virtual void evaluate(TransformerLM<float>& model, const BeforeEach& before_each,
                        EvalRows& rows, std::ostream& out) = 0;
};

struct EvalMode {
  std::string name;      // "chunked", "passkey", "stream", ...
  std::string measures;  // one line: what its rows measure, and after whom
  std::function<bool(const Config&)> wanted;
  std::function<std::unique_ptr<PreparedEvaluation>(const Config&, const RunFacts&)> prepare;
};

// Every mode, in the order a run evaluates them (eval/modes.cpp).
const std::vector<EvalMode>& registered_eval_modes();

// The mode called `name`; throws std::invalid_argument naming the registered ones.
const EvalMode& find_eval_mode(const std::string& name);

}  // namespace poslab
