// The chunked evaluation mode: the loss, accuracy and exact match of held-out data read in
// non-overlapping segments, with segment recurrence exactly as in training. A source of batches
// is read segment by segment and the model's memory carries the left context from one batch to
// the next, unless the source says a batch starts afresh (first_of_pass). The memory length may
// differ from the one used in training: that is the state-reuse experiment (Dai et al. 2019,
// Table 9 and section 3.3); the segment length may differ too: that is the length-generalization
// experiment (Press et al. 2022; for tasks Deletang et al. 2023, Ruoss et al. 2023).
//
// The settings of the mode (chunked_settings): main, gate, length, memory, their
// randomized-position and sliding-window versions, one row each.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"

#include "data/batch_source.hpp"
#include "eval/copy_distance.hpp"
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
// (eval/copy_distance.hpp, eval.copy_distance); its buckets must cover the source's length.
EvalResult evaluate(TransformerLM<float>& model, BatchSource& source, int max_batches,
                    int mem_len, bool continue_positions = false, bool sample_positions = false,
                    std::vector<float>* token_losses = nullptr,
                    CopyDistanceLoss* copy_distance = nullptr);

// The same over a token stream (the validation split of a corpus), cut into `batch` rows.
EvalResult evaluate_stream(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                           int batch, int seq_len, int mem_len, int max_batches,
                           bool continue_positions = false);

// One setting of the chunked mode: which data, at which length and memory.
struct EvalSetting {
  std::string kind;     // "main", "gate", "length" or "memory"
  double factor = 1.0;  // of train.seq_len (length) or of the memory (memory)
  int seq_len = 0;
  int mem_len = 0;
  int longer_than = 0;  // tasks, "length": only instances longer than this (0 = train.seq_len)
  bool gate = false;    // tasks: only the largest training sizes
  // Models trained with randomized positions: sample positions at evaluation too (kind
  // "length_sampled"), from a fixed seed so that every run reads the same positions.
  bool sample_positions = false;
  // Sliding-window evaluation (eval.stride; kinds "main_sliding", "length_sliding"): windows of
  // seq_len bytes moving by `stride`, each scoring its last `stride` bytes, no memory. 0 = the
  // usual non-overlapping chunks.
  int stride = 0;
};

// The settings of a run, main first:
//   main    as configured (eval.seq_len, eval.mem_len)
//   gate    tasks of independent sequences: the largest instance sizes seen in training
//   length  segment train.seq_len * f for each length factor, with the trained memory. For a
//           task, each factor tests only instances longer than those of the factor before it
//           (factors taken in increasing order), so no two factors test the same sizes.
//   memory  memory train.seq_len * f for each memory factor, segment train.seq_len
//   gate_sampled, length_sampled   models trained with randomized positions: gate and length
//           again, with positions sampled at evaluation too
//   main_sliding, length_sliding   eval.stride > 0: main and length again in sliding windows
std::vector<EvalSetting> chunked_settings(const Config& cfg, bool independent_rows);

// "the main evaluation (segment 64, memory 0)": names a setting in messages.
std::string setting_name(const EvalSetting& s);

// The batches of one setting, from the split eval.split, eval.batch_size rows each; throws if
// the split is too short for the setting's length.
std::unique_ptr<BatchSource> evaluation_source(const Config& cfg, const EvalSetting& s);

// Evaluates one setting as a row of eval.json. A setting the model cannot run (a learned table
// too short for the length) is recorded with its error, not dropped. peak_memory_mb is the peak
// resident memory of the process during this setting alone; tokens_per_second the scored tokens
// over the wall time of the setting's evaluation (the loss by copy distance included when
// eval.copy_distance is on: compare the rows of one study on one machine, not a benchmark).
// token_losses: as evaluate()'s.
nlohmann::json evaluate_setting(TransformerLM<float>& model, const Config& cfg,
                                const EvalSetting& s, std::ostream& out,
                                std::vector<float>* token_losses = nullptr);

}  // namespace poslab
