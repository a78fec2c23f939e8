// The machinery shared by the tasks of independent sequences (copy, reverse, assoc_recall,
// induction, parity): a task says how to write ONE instance of a given size; InstanceBatcher
// turns instances into batches, chooses their sizes, and makes training and evaluation sets.
//
// Layout of a batch [B, L]: each row is one instance of T <= L tokens, left-aligned and padded:
//
//   inputs [b, :] = t_0 t_1 ... t_{T-1} PAD ... PAD           t_0 = BOS
//   targets[b, i] = inputs[b, i + 1]   (targets[b, L-1] = PAD) the next token
//   weights[b, i] = 1 if inputs[b, i + 1] is an answer token, else 0 (PAD is never one)
//
// e.g. copy, L = 12:   inputs  ^cab|cab....
//                      targets cab|cab.....
//                      weights 000011100000     (the targets 'c','a','b' of the second "cab")
//
// Every batch has first_of_pass = true (the rows are new sequences: the model must forget the
// previous batch) and start = 0 (every instance starts at position 0).
//
// Instance sizes (the task's own measure: the number of symbols to copy, of key-value pairs ...).
// A size n takes length(n) tokens; it FITS in L when length(n) <= L. Each row draws its size
// uniformly among
//   training (evaluation = false):                  every size that fits in L
//   evaluation, L > train_len:                      the sizes that fit in L but not in train_len,
//                                                   i.e. only lengths never seen in training
//   evaluation, L <= train_len:                     every size that fits in L (as in training)
// so "accuracy at 2x the training length" means accuracy on instances the model has never seen
// the size of: a test of length generalization, not of interpolation.
//
// Randomness: one Rng per source, seeded with task_seed(seed, evaluation). A training source
// continues its Rng for ever (never repeats, also across reset()); an evaluation source is a
// fixed set of kTaskEvalBatches batches: reset() reseeds, and reading past the end starts again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "tasks/task.hpp"

namespace poslab {

// max_size() of a task whose instances can be as large as a segment allows.
constexpr int kNoSizeLimit = 1 << 26;

// One task of independent sequences: which instance sizes exist and how to write one.
class InstanceGenerator {
 public:
  virtual ~InstanceGenerator() = default;
  virtual std::string name() const = 0;
  virtual int min_size() const = 0;
  virtual int max_size() const = 0;       // the largest size the task can make at all
  virtual int length(int size) const = 0; // tokens in an instance of that size; increasing in size
  // Writes one instance of `size`: length(size) tokens into `tokens`, and answer[i] = 1 where
  // tokens[i] is an answer token (0 elsewhere). Draws only from `rng`.
  virtual void generate(int size, Rng& rng, std::int32_t* tokens, std::uint8_t* answer) = 0;
};

class InstanceBatcher : public BatchSource {
 public:
  // Throws std::runtime_error (task 'NAME': ...) when no size is allowed (nothing fits in L, or in
  // evaluation nothing fits in L that does not fit in train_len) or the setup is invalid.
  InstanceBatcher(std::unique_ptr<InstanceGenerator> task, const TaskSetup& setup);

  bool next(Batch& out) override;
  void reset() override;
  std::int64_t batches_per_pass() const override { return kTaskEvalBatches; }
  int batch() const override { return setup_.batch; }
  int len() const override { return setup_.len; }

  // The sizes a row may draw (see the header comment), smallest first.
  const std::vector<int>& sizes() const { return sizes_; }

 private:
  std::unique_ptr<InstanceGenerator> task_;
  TaskSetup setup_;
  std::vector<int> sizes_;
  Rng rng_;
  std::int64_t index_ = 0;             // batches since the last reset (evaluation wraps at 16)
  std::vector<std::int32_t> tokens_;   // [L] scratch: one instance
  std::vector<std::uint8_t> answer_;   // [L]
};

}  // namespace poslab
