// Language-model evaluation over a token stream, with segment recurrence exactly as in training:
// the stream is cut into B contiguous rows, read segment by segment, and the model's memory
// carries the left context from one segment to the next (memory length may differ from the one
// used in training: that is the state-reuse experiment).
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.hpp"

namespace poslab {

struct EvalResult {
  double loss = 0;      // mean cross-entropy, nats per token
  double accuracy = 0;  // next-token argmax accuracy
  long tokens = 0;
  int batches = 0;
  std::vector<double> loss_by_position;  // [L] mean loss at each position inside a segment
};

// tokens: the evaluation split. batch, seq_len: B and L. mem_len: memory length (0 = none).
// max_batches: 0 = one whole pass. The model's memory is reset before and after.
EvalResult evaluate_stream(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                           int batch, int seq_len, int mem_len, int max_batches,
                           bool continue_positions = false);

}  // namespace poslab
