// The training batches of PoSE (train.pose_target_len > 0): rows of L tokens whose position ids
// skip to cover the target length L' (the draws: data/pose_sampling.hpp).
//
// Text. As StreamBatcher, the corpus is cut into B streams of S = n / B tokens. Batch t gives
// row b the window of span = 5 L tokens that starts at column t * L of stream b, and from it
// the two chunks: inputs[i] = window[v_c + i], targets[i] = window[v_c + i + 1] (chunk c holds
// i), the token that follows in the text, also at the end of chunk 1. (The released code
// concatenates the chunks and lets the model predict chunk 2's first token from chunk 1's last;
// a text stream gives the true next token instead.) A pass ends where the next window would not
// fit: (S - 1 - span) / L + 1 batches.
//
// Positions. Each batch draws one (r1, u1, u2) for all its rows and writes the ids into
// Batch::positions [L]; the model's attention takes one position vector per call, shared by the
// rows (nn/attention.hpp). The released code draws per example: the distribution of one row is
// the same, rows of a batch are no longer independent. The content offsets (v1, v2) are drawn
// per row.
//
// Determinism: one Rng seeded from train.seed draws, per batch, (r1, u1, u2) and then each row's
// (v1, v2); resuming replays the batches from the first, as for every training source. No
// memory: the rows of consecutive batches do not continue each other (train.pose_target_len
// requires memory.mem_len = 0, checked by the config loader).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.hpp"
#include "data/batch_source.hpp"
#include "data/pose_sampling.hpp"

namespace poslab {

class PoseBatcher : public BatchSource {
 public:
  // Throws std::runtime_error when the tokens cannot fill one batch's windows (fewer than
  // B * (5 L + 1) tokens) and std::invalid_argument when L < 2 or L' < L.
  PoseBatcher(std::shared_ptr<const std::vector<std::int32_t>> tokens, int batch, int len,
              std::int64_t target_len, PoseVariant variant, std::uint64_t seed);

  bool next(Batch& out) override;
  void reset() override { next_index_ = 0; }
  std::int64_t batches_per_pass() const override { return batches_per_pass_; }
  int batch() const override { return batch_; }
  int len() const override { return len_; }

  std::int64_t span() const { return span_; }
  // The draws of the last batch (tests).
  const PoseSkips& last_skips() const { return skips_; }
  const std::vector<PoseContent>& last_contents() const { return contents_; }

 private:
  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
  int batch_, len_;
  std::int64_t target_len_;
  PoseVariant variant_;
  Rng rng_;
  std::int64_t span_;              // 5 L
  std::int64_t stream_length_;     // S = n / B
  std::int64_t batches_per_pass_;  // (S - 1 - span) / L + 1
  std::int64_t next_index_ = 0;
  PoseSkips skips_;
  std::vector<PoseContent> contents_;  // [B]
};

}  // namespace poslab
