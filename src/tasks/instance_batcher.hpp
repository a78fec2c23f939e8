// The machinery shared by the tasks of independent sequences (copy, reverse, assoc_recall,
// induction, parity, sort): a task says how to write ONE instance of a given size;
// InstanceBatcher turns instances into batches, chooses their sizes, and makes training and
// evaluation sets.
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
// uniformly among the sizes of a BAND, which depends on what the source is for:
//
//   training (split train):        every size that fits in L
//   evaluation (valid / test):
//     gate:                        the largest sizes seen in training: of the sizes with
//                                  length(n) <= train_len (count c of them), the top ceil(c / 4),
//                                  at least one. Needs L >= train_len.
//     L > train_len:               the sizes with  longer_than < length(n) <= L,
//                                  longer_than = 0 meaning train_len (so never a seen length)
//     L <= train_len:              every size that fits in L (as in training)
//
// so "accuracy at 2x the training length" means accuracy on instances the model has never seen
// the size of: a test of length generalization, not of interpolation. A study over length
// factors f_1 < f_2 < ... sets longer_than = L_{i-1} (the previous factor's segment) for factor
// i: the bands (L_{i-1}, L_i] are then disjoint and each factor tests strictly longer instances
// than the one before (without it, 2x would draw everything in (train_len, 2 train_len] and
// repeat the sizes of 1.5x). The gate answers "did the model learn the task at all": exact match
// on the hardest instances it trained on, not carried by short, easy ones.
//
// Distinct instances: an evaluation set never contains the same instance (same tokens) twice, so
// N rows measure N different instances. A row whose draw repeats an earlier row of the set draws
// again (size and instance), up to kDrawAttempts times; if all of them repeat, the instance space
// of the band is (nearly) exhausted and the row is left EMPTY: all PAD, all weights 0, which the
// evaluator does not count as a row (eval/chunked.cpp). Training rows may repeat (they are
// never compared).
//
// Randomness: one Rng per source, seeded with task_seed(seed, split). A training source
// continues its Rng for ever (never repeats, also across reset()); an evaluation source is a
// fixed set of eval_batches batches: reset() reseeds and forgets the instances seen, and reading
// past the end starts again, so every pass reads the same batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
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
  // A row of an evaluation set redraws at most this many times to find an unseen instance.
  static constexpr int kDrawAttempts = 64;

  // Throws std::runtime_error (task 'NAME': ...) naming the lengths when the band of sizes is
  // empty (nothing fits in L; in evaluation nothing in (longer_than, L]; a gate with L <
  // train_len) or the setup is invalid.
  InstanceBatcher(std::unique_ptr<InstanceGenerator> task, const TaskSetup& setup);

  bool next(Batch& out) override;
  void reset() override;
  std::int64_t batches_per_pass() const override { return setup_.eval_batches; }
  int batch() const override { return setup_.batch; }
  int len() const override { return setup_.len; }

  // The sizes a row may draw (see the header comment), smallest first.
  const std::vector<int>& sizes() const { return sizes_; }

 private:
  std::unique_ptr<InstanceGenerator> task_;
  TaskSetup setup_;
  std::vector<int> sizes_;
  Rng rng_;
  // Draws one instance into tokens_ / answer_ and returns its length T. In an evaluation set, an
  // instance the set already holds is drawn again; returns 0 when every attempt repeated.
  int draw_instance();

  std::int64_t index_ = 0;             // batches since the last reset (evaluation wraps)
  std::vector<std::int32_t> tokens_;   // [L] scratch: one instance
  std::vector<std::uint8_t> answer_;   // [L]
  // Evaluation: the instances of the set so far, each as the raw bytes of its [T] tokens.
  std::unordered_set<std::string> seen_;
};

}  // namespace poslab
