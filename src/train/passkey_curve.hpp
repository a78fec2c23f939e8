// Retrieval against training steps: a passkey read *during* training (issue 48).
//
// A model learns to retrieve late and abruptly (16,000-32,000 steps for the 2-layer, width-64
// models at 64 bytes), and a fine-tune may need far more steps than it is given. A single read
// at the end cannot tell "not yet" from "never"; the curve can. Every train.eval_every steps and
// after the last, PasskeyCurve reads train.eval_passkey_instances instances per cell of the
// eval.passkey grid (lengths eval.passkey_length_factors x depths eval.passkey_depths) on the
// VALIDATION split (the curve is for choosing budgets, so it never touches the test split), and
// appends one row per cell to RUN/passkey_curve.csv:
//
//   step, factor, seq_len, depth, instances, exact_match, greedy_exact_match, digit_accuracy,
//   loss
//
// scored as the final passkey evaluation scores them (eval/passkey_eval.hpp), on the same
// instances (the first n of the grid's validation instances). The read leaves the training
// untouched: the memory carried along the training stream is kept aside and put back, and
// nothing it does draws from the training's random generators (tests/test_passkey_curve.cpp:
// the same checkpoint with the curve and without, with memory and without).
#pragma once

#include <filesystem>
#include <vector>

#include "config/config.hpp"
#include "model/transformer.hpp"
#include "tasks/passkey.hpp"
#include "eval/passkey_eval.hpp"
#include "train/run_dir.hpp"

namespace poslab {

class PasskeyCurve {
 public:
  static constexpr const char* kFile = "passkey_curve.csv";
  static std::vector<std::string> columns();

  // `generator` must give the validation split's filler (make_passkey_generator(cfg,
  // Split::valid)), checked for the grid's longest length. A run continued from its saved state
  // after step `steps_done` first drops the rows logged after it (they are read again); a run
  // starting at step 0 keeps none.
  PasskeyCurve(const Config& cfg, const std::filesystem::path& run_dir, PasskeyGenerator generator,
               int steps_done);

  // Reads every cell after `step` training steps and appends their rows. Returns the cells.
  std::vector<PasskeyCellResult> read(TransformerLM<float>& model, int step);

 private:
  const Config& cfg_;
  PasskeyGenerator generator_;
  std::vector<PasskeyCell> cells_;
  MetricsLog log_;
};

}  // namespace poslab
