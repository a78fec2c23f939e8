#include "eval/plan.hpp"

namespace poslab {

EvalPlan prepare_plan(const Config& cfg, const RunFacts& facts) {
  EvalPlan plan;
  for (const EvalMode& mode : registered_eval_modes())
    if (mode.wanted(cfg)) plan.modes.push_back(mode.prepare(cfg, facts));
  return plan;
}

EvalRows run_plan(EvalPlan& plan, TransformerLM<float>& model, const BeforeEach& before_each,
                  std::ostream& out) {
  EvalRows rows;
  for (const std::unique_ptr<PreparedEvaluation>& mode : plan.modes)
    mode->evaluate(model, before_each, rows, out);
  return rows;
}

}  // namespace poslab
