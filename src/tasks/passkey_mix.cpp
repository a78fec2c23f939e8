#include "tasks/passkey_mix.hpp"

#include <stdexcept>
#include <utility>

#include "tasks/task.hpp"

namespace poslab {

PasskeyMix::PasskeyMix(std::unique_ptr<BatchSource> inner, PasskeyGenerator generator,
                       double fraction, std::uint64_t seed)
    : inner_(std::move(inner)),
      generator_(std::move(generator)),
      fraction_(fraction),
      rng_(task_seed(seed, Split::train)),
      text_(std::size_t(inner_->len()) + 1) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw std::invalid_argument("train.passkey_fraction must lie in (0, 1] to mix passkey "
                                "instances, got " + std::to_string(fraction));
  generator_.check_length(inner_->len());
}

bool PasskeyMix::next(Batch& out) {
  inner_->next(out);
  const int B = out.batch, L = out.len;
  for (int b = 0; b < B; ++b) {
    // One uniform per row whatever the outcome, then the instance's own draws: the rows chosen
    // depend only on the seed.
    if (!(rng_.uniform() < fraction_)) continue;
    // The key line after 0..F filler bytes, each equally likely (not round(u F) for a uniform
    // u, which gives 0 and F half the weight of the others).
    const int F = generator_.filler_bytes(L);
    const int filler_before = int(rng_.below(std::uint64_t(F) + 1));
    generator_.generate_after_filler(L, filler_before, rng_, text_.data());
    std::int32_t* in = out.inputs.data() + std::size_t(b) * L;    // [L]
    std::int32_t* tgt = out.targets.data() + std::size_t(b) * L;  // [L]
    for (int i = 0; i < L; ++i) {
      in[i] = text_[i];
      tgt[i] = text_[i + 1];
    }
    if (!out.weights.empty())  // a source that scores some targets only: score the whole row
      for (int i = 0; i < L; ++i) out.weights[std::size_t(b) * L + i] = 1.0f;
    ++rows_replaced_;
  }
  return true;
}

}  // namespace poslab
