// Passkey instances mixed into the training stream of a language model (train.passkey_fraction).
//
// Why: in the paper the key is said twice, so a language model can answer by copying, an
// induction head's job. A small byte-level model trained on fortunes may never have needed to
// copy five digits from far back, and then fails the test at every length, including the one it
// was trained at: a floor, not a measurement of the encoding. Check that first (a model trained
// at the evaluation length, passkey at factor 1 without the mix); if it fails, mix instances
// into a small fraction of the training rows, the same fraction for every arm of a study.
//
// How: after the wrapped source fills a batch, each row independently, with probability
// `fraction`, is replaced by one passkey instance of the batch's length L (passkey.hpp):
// inputs = text[0, L), targets = text[1, L]. Its key line follows 0, 1, ..., F of the F filler
// bytes, each with probability 1 / (F + 1) (a uniform depth rounded to round(d F) would give the
// two ends, the evaluation's depths 0 and 1, half that); its filler comes
// from the TRAIN split (corpus) or is the paper's sentence. Every target of the row is scored,
// as everywhere in language modelling (the batch's weights stay empty), so the model learns the
// whole instance, the answer included.
//
// The choice of rows, the keys, depths and filler windows come from one Rng seeded with
// task_seed(train.seed, train), which does not depend on the encoding or the model: every arm of
// a study with the same seed sees the very same training data. Resuming replays the source from
// the start, so the stream continues exactly. With fraction 0 nothing is wrapped (runs without
// the option are bit-identical to older ones).
//
// With memory (Transformer-XL recurrence), a replaced row breaks that row's stream for one
// segment: the next segment's memory holds the passkey instance instead of the text before it.
// The batch's first_of_pass and start are those of the wrapped source.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.hpp"
#include "data/batch_source.hpp"
#include "tasks/passkey.hpp"

namespace poslab {

class PasskeyMix : public BatchSource {
 public:
  // `generator` cuts its filler from the train split; fraction in (0, 1]. Throws
  // std::invalid_argument when an instance does not fit in the inner source's length.
  PasskeyMix(std::unique_ptr<BatchSource> inner, PasskeyGenerator generator, double fraction,
             std::uint64_t seed);

  bool next(Batch& out) override;
  // Training streams never repeat: the Rng continues (like InstanceBatcher's training source).
  void reset() override { inner_->reset(); }
  std::int64_t batches_per_pass() const override { return inner_->batches_per_pass(); }
  int batch() const override { return inner_->batch(); }
  int len() const override { return inner_->len(); }

  std::int64_t rows_replaced() const { return rows_replaced_; }  // so far, for tests

 private:
  std::unique_ptr<BatchSource> inner_;
  PasskeyGenerator generator_;
  double fraction_;
  Rng rng_;
  std::vector<std::int32_t> text_;  // [L + 1] one instance
  std::int64_t rows_replaced_ = 0;
};

}  // namespace poslab
