#include "train/passkey_curve.hpp"

#include "train/training_state.hpp"

namespace poslab {

std::vector<std::string> PasskeyCurve::columns() {
  return {"step",      "factor",      "seq_len",         "depth",         "instances",
          "exact_match", "greedy_exact_match", "digit_accuracy", "loss"};
}

namespace {
// The rows logged after the saved step go (they are read again); then the log appends.
MetricsLog open_curve(const std::filesystem::path& run_dir, int steps_done) {
  const std::filesystem::path file = run_dir / PasskeyCurve::kFile;
  drop_metrics_after(file, steps_done);  // 0: a fresh start keeps only the header
  return MetricsLog(file, PasskeyCurve::columns());
}
}  // namespace

PasskeyCurve::PasskeyCurve(const Config& cfg, const std::filesystem::path& run_dir,
                           PasskeyGenerator generator, int steps_done)
    : cfg_(cfg),
      generator_(std::move(generator)),
      cells_(passkey_cells(cfg)),
      log_(open_curve(run_dir, steps_done)) {}

std::vector<PasskeyCellResult> PasskeyCurve::read(TransformerLM<float>& model, int step) {
  // evaluate_passkey_cell clears the memory; the training stream's is kept aside and put back,
  // so a model trained with memory continues exactly as without the read.
  const TransformerLM<float>::CarriedState carried = model.carried_state();
  std::vector<PasskeyCellResult> results;
  // One instance per row of a forward pass, as many rows as the instances (at most a batch).
  const int rows = std::min(cfg_.train.eval_passkey_instances, cfg_.train.batch_size);
  for (const PasskeyCell& cell : cells_) {
    const PasskeyCellResult r =
        evaluate_passkey_cell(model, generator_, cell, cfg_.train.eval_passkey_instances, rows,
                              cfg_.eval.passkey_seed, Split::valid);
    log_.append({step, r.factor, r.seq_len, r.depth, r.instances, r.exact_match,
                 r.greedy_exact_match, r.digit_accuracy, r.loss});
    results.push_back(r);
  }
  model.restore_carried_state(carried);
  return results;
}

}  // namespace poslab
