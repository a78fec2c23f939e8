// The passkey evaluation mode: passkey retrieval (Mohtashami & Jaggi 2023) as an evaluation of a
// byte-level language model (tasks/passkey.hpp has the instance; this file scores a model on a
// grid of them, one row of eval.json per cell, kind "passkey").
//
// For every cell (length L = round(train.seq_len * f), depth d) of the grid
// eval.passkey_length_factors x eval.passkey_depths, eval.passkey_instances instances are read
// in ONE forward pass each (rows of a batch, no memory: each instance is one segment), and the
// answer " NNNNN" (kPasskeyAnswer bytes, the last targets of the row) is scored two ways:
//
//   teacher-forced   the argmax of the model at each digit, given the true text before it
//                    (the space and the earlier digits included). exact_match: all 5 digits
//                    right; accuracy: the fraction of digits right; loss: their mean
//                    cross-entropy (nats).
//   greedy           what greedy decoding after "The pass key is" writes: 6 bytes, each the
//                    argmax given the prompt and the bytes written before it; right if they are
//                    " NNNNN" exactly (the paper's test: generate as many tokens as the answer
//                    holds and compare).
//
// Greedy decoding needs no second pass. The model is causal: its logits at position p depend
// only on the inputs at positions <= p. Up to the first byte where the teacher-forced argmax is
// wrong, greedy decoding has written exactly the true bytes, so its inputs there are the
// teacher-forced inputs and it writes that wrong argmax too; if no byte is wrong it writes the
// answer. Hence
//     greedy right  <=>  the teacher-forced argmax is right at the space AND at all 5 digits,
// so greedy exact match <= teacher-forced exact match, the two differing only by the space.
// (tests/test_passkey.cpp decodes step by step with real models and checks this.)
//
// The instances of a cell come from Rng(task_seed(eval.passkey_seed, eval.split)), restarted for
// every cell: instance i has the same key (and, at one length, the same filler window) at every
// depth, so depths are compared on paired instances. They do not depend on the run's training
// seed or encoding: every run of a study reads the same instances.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "data/batch_source.hpp"
#include "model/transformer.hpp"
#include "tasks/passkey.hpp"

namespace poslab {

// The score of one instance from its row of logits.
struct PasskeyRowScore {
  int digits_right = 0;     // teacher-forced argmax right at this many of the 5 digits
  bool space_right = false; // ... and at the space before them
  double digit_loss = 0;    // sum over the 5 digits of -log softmax(logits)[digit]
  bool exact() const { return digits_right == kPasskeyDigits; }
  bool greedy() const { return space_right && exact(); }
};

// logits: [L, V] the model's output for inputs = text[0, L); text: [L + 1] the instance. The
// answer is the last kPasskeyAnswer bytes of the text, predicted at positions L - 6 .. L - 1.
PasskeyRowScore score_passkey_row(const float* logits, int L, int V, const std::int32_t* text);

// One cell of the grid.
struct PasskeyCellResult {
  double factor = 0;  // of train.seq_len
  int seq_len = 0;    // L
  double depth = 0;
  long instances = 0;
  double exact_match = 0;         // teacher-forced, all 5 digits
  double greedy_exact_match = 0;  // greedy decoding, " NNNNN" exactly
  double digit_accuracy = 0;      // teacher-forced, per digit
  double loss = 0;                // mean cross-entropy of a digit, nats
};

// The cells of cfg.eval's grid, in the order factors (increasing) x depths (as configured).
struct PasskeyCell {
  double factor;
  int seq_len;
  double depth;
};
std::vector<PasskeyCell> passkey_cells(const Config& cfg);

// Evaluates one cell: `instances` instances of length cell.seq_len, `rows` per forward pass.
// The model's memory is off during it (restored after). `generator` supplies the filler.
PasskeyCellResult evaluate_passkey_cell(TransformerLM<float>& model,
                                        const PasskeyGenerator& generator, const PasskeyCell& cell,
                                        int instances, int rows, std::uint64_t seed, Split split);

// The passkey grid's instance generator, with everything that can fail checked before a model
// is built (poslab train and poslab eval --passkey): its filler split holds the longest cell's
// filler, and that cell's evaluation fits in memory. `what` names the evaluation in the error.
PasskeyGenerator checked_passkey_generator(const Config& cfg, const std::string& what);

// One cell as a row of eval.json, kind "passkey": `exact_match` and `accuracy` teacher-forced
// (all 5 digits; per digit), `loss` the digits' mean cross-entropy, `passkey_greedy_exact_match`
// greedy decoding. A cell the model cannot run is recorded with its error. One line to `out`.
nlohmann::json evaluate_passkey(TransformerLM<float>& model, const Config& cfg,
                                const PasskeyGenerator& generator, const PasskeyCell& cell,
                                std::ostream& out);

}  // namespace poslab
