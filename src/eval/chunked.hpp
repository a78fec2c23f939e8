// Evaluation with segment recurrence exactly as in training: a source of batches is read segment
// by segment and the model's memory carries the left context from one batch to the next, unless
// the source says a batch starts afresh (first_of_pass). The memory length may differ from the
// one used in training: that is the state-reuse experiment; the segment length may differ too:
// that is the length-generalization experiment.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch_source.hpp"
#include "train/copy_distance.hpp"
#include "model/transformer.hpp"

namespace poslab {

struct EvalResult {
  double loss = 0;         // mean cross-entropy over scored tokens, nats per token
  double accuracy = 0;     // argmax accuracy over scored tokens
  double exact_match = 0;  // fraction of rows (with a scored token) whose scored tokens are all right
  long tokens = 0;         // scored tokens
  long rows = 0;           // rows with a scored token: the instances exact_match is over
  int batches = 0;
  std::vector<double> loss_by_position;  // [L] mean loss of scored tokens at each segment position
};

// Reads max_batches batches (0 = one pass) from the start of `source`. mem_len: memory length
// (0 = none). The model's memory is reset before and after; its trained memory length restored.
// Positions are contiguous (0..L-1), unless sample_positions: then a model trained with
// randomized positions keeps sampling them, as Ruoss et al.'s reference code does at test time.
// token_losses, if given, receives the loss of every scored token in reading order (batch by
// batch, row by row, position by position): with the same source, batch and segment length,
// token k is the same text whatever the memory, so two evaluations can be compared token by
// token (the relative effective context length needs it, notebooks/recl.py).
// copy_distance, if given, accumulates the loss of every scored token by copy distance
// (train/copy_distance.hpp, eval.copy_distance); its buckets must cover the source's length.
EvalResult evaluate(TransformerLM<float>& model, BatchSource& source, int max_batches,
                    int mem_len, bool continue_positions = false, bool sample_positions = false,
                    std::vector<float>* token_losses = nullptr,
                    CopyDistanceLoss* copy_distance = nullptr);

// The same over a token stream (the validation split of a corpus), cut into `batch` rows.
EvalResult evaluate_stream(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                           int batch, int seq_len, int mem_len, int max_batches,
                           bool continue_positions = false);

}  // namespace poslab
