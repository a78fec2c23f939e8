#include "data/pose_batcher.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace poslab {

PoseBatcher::PoseBatcher(std::shared_ptr<const std::vector<std::int32_t>> tokens, int batch, int len,
                         std::int64_t target_len, PoseVariant variant, std::uint64_t seed)
    : tokens_(std::move(tokens)),
      batch_(batch),
      len_(len),
      target_len_(target_len),
      variant_(variant),
      rng_(seed),
      span_(std::int64_t(kPoseSpanFactor) * len),
      contents_(std::size_t(batch > 0 ? batch : 0)) {
  if (!tokens_) throw std::invalid_argument("PoseBatcher: no tokens");
  if (batch <= 0 || len < 2 || target_len < len)
    throw std::invalid_argument("PoSE batches need B >= 1, L >= 2 and L' >= L (B = " +
                                std::to_string(batch) + ", L = " + std::to_string(len) +
                                ", L' = " + std::to_string(target_len) + ")");
  stream_length_ = std::int64_t(tokens_->size()) / batch;
  if (stream_length_ < span_ + 1)
    throw std::runtime_error(
        "train.pose_target_len: PoSE reads windows of 5 x train.seq_len = " +
        std::to_string(span_) + " tokens (+1 target) from each of train.batch_size = " +
        std::to_string(batch) + " streams, but the train split has only " +
        std::to_string(tokens_->size()) + " tokens (" + std::to_string(stream_length_) +
        " per stream)");
  batches_per_pass_ = (stream_length_ - 1 - span_) / len + 1;
}

bool PoseBatcher::next(Batch& out) {
  const int B = batch_, L = len_;
  out.resize(B, L, false);  // every target is scored
  out.positions.resize(std::size_t(L));
  const std::int64_t start = next_index_ * L;  // window start in each stream: t * L
  out.start = start;
  out.first_of_pass = (next_index_ == 0);

  // One position draw per batch, then one content draw per row.
  skips_ = sample_pose_skips(rng_, L, target_len_, variant_);
  pose_position_ids(skips_, L, out.positions.data());
  for (int b = 0; b < B; ++b) {
    const PoseContent c = sample_pose_content(rng_, L, span_, variant_);
    contents_[std::size_t(b)] = c;
    const std::int32_t* window = tokens_->data() + std::int64_t(b) * stream_length_ + start;
    std::int32_t* inputs = out.inputs.data() + std::size_t(b) * L;   // [L]
    std::int32_t* targets = out.targets.data() + std::size_t(b) * L; // [L]
    for (int i = 0; i < L; ++i) {
      const std::int64_t at = (i < skips_.chunk1_len ? c.offset1 : c.offset2) + i;  // v_c + i
      inputs[i] = window[at];
      targets[i] = window[at + 1];  // at + 1 <= span: inside stream b (start + span <= S - 1)
    }
  }

  ++next_index_;
  if (next_index_ == batches_per_pass_) next_index_ = 0;
  return true;
}

}  // namespace poslab
