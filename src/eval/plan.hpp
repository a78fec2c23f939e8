// The evaluation plan of a run: every registered mode (eval/mode.hpp) the config asks for,
// prepared (checked) before anything is written, then run on the trained model. `poslab train`
// (train/run.hpp) makes one plan per run; what it writes as eval.json's "evaluations" is what
// run_plan returns, in the order of eval/modes.cpp.
#pragma once

#include <iosfwd>
#include <memory>
#include <vector>

#include "eval/mode.hpp"

namespace poslab {

struct EvalPlan {
  std::vector<std::unique_ptr<PreparedEvaluation>> modes;  // those the config asks for
};

// Prepares every registered mode the config wants, in order; throws the first mode's error (nothing evaluated).
EvalPlan prepare_plan(const Config& cfg, const RunFacts& facts);

// Evaluates `model` on every mode of the plan, in order: all their rows.
EvalRows run_plan(EvalPlan& plan, TransformerLM<float>& model, const BeforeEach& before_each,
                  std::ostream& out);

}  // namespace poslab
