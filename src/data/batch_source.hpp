// Where training and evaluation batches come from: a text corpus (StreamBatcher) or a generated
// task (src/tasks). The trainer and the evaluator only see this interface.
#pragma once

#include <cstdint>
#include <vector>

namespace poslab {

// What a set of batches is for. The three are different random draws (tasks) or different parts
// of the corpus (lm), so that nothing tuned on `valid` leaks into the numbers reported on `test`:
//   train  the endless stream the model learns from
//   valid  a fixed set used while developing and tuning (evaluations during training, sweeps)
//   test   a fixed set read only for final results
enum class Split { train, valid, test };

// "train", "valid", "test": for messages and result files.
inline const char* split_name(Split split) {
  switch (split) {
    case Split::train: return "train";
    case Split::valid: return "valid";
    case Split::test: return "test";
  }
  return "?";
}

// One batch of B rows of L tokens. The caller owns it and passes it to next() again and again;
// once the vectors have their size, refilling it allocates nothing.
struct Batch {
  int batch = 0;                      // B: rows
  int len = 0;                        // L: tokens per row (segment length)
  std::vector<std::int32_t> inputs;   // [B, L] row-major: inputs[b * L + i]
  std::vector<std::int32_t> targets;  // [B, L] the token that follows each input
  // [B, L] which targets are scored (1) and which are not (0): a task scores only its answer
  // tokens. Empty = every target is scored (language modelling).
  std::vector<float> weights;
  std::int64_t start = 0;             // position of column 0 within its stream (same for all rows)
  // [L] the position id of each column, the same for every row, when a source chooses them
  // (PoSE: data/pose_batcher.hpp). Empty = the model's own (0..L-1, or continued from start).
  std::vector<std::int64_t> positions;
  // True when the rows do not continue the previous batch's rows: the model's memory must be
  // cleared (first batch of a pass over a corpus; every batch of a task of independent sequences).
  bool first_of_pass = false;

  // Shapes the batch as [B, L] (weights too when `scored` says some targets are not scored).
  // Allocates only the first time a shape is seen.
  void resize(int B, int L, bool scored) {
    batch = B;
    len = L;
    inputs.resize(std::size_t(B) * L);
    targets.resize(std::size_t(B) * L);
    weights.resize(scored ? std::size_t(B) * L : 0);
  }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills `out` with the next batch. Sources are endless: this always returns true.
  virtual bool next(Batch& out) = 0;
  // Back to the first batch (an evaluation always starts from the same batches).
  virtual void reset() = 0;
  // Batches in one pass over the data (tasks: a fixed evaluation set size).
  virtual std::int64_t batches_per_pass() const = 0;
  virtual int batch() const = 0;
  virtual int len() const = 0;
};

}  // namespace poslab
