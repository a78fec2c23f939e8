// Evaluation speed with and without state reuse (reuse_speed.hpp): the three ways of reading a
// stream with A tokens of context per prediction (eval/sliding_window.hpp), timed.
#include "bench/reuse_speed.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "core/rng.hpp"
#include "eval/sliding_window.hpp"

namespace poslab {

namespace {

// Seconds one call of `work` takes.
template <class Work>
double seconds_of(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One warm-up pass (buffers of this shape), then the median of 3 timed passes, in predicted
// tokens per second.
template <class Evaluate>
double median_rate(Evaluate&& evaluate_once) {
  evaluate_once();
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    EvalResult result;
    const double s = seconds_of([&] { result = evaluate_once(); });
    rates.push_back(double(result.tokens) / s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[1];
}

}  // namespace

ReuseSpeedBench::ReuseSpeedBench(const Config& cfg, long longest_attn_len, long targets)
    : segment_(cfg.train.seq_len), targets_(targets) {
  // Random tokens: speed does not depend on the text, nor on the weights.
  // Enough for the longest window plus every timed target of the three modes.
  const int L = segment_;
  Rng rng(cfg.train.seed);
  tokens_.resize(std::size_t(longest_attn_len + std::max(64 * targets, 256L * L) + 4L * L));
  for (auto& t : tokens_) t = std::int32_t(rng.below(cfg.model.vocab_size));
  model_ = std::make_unique<TransformerLM<float>>(cfg.model, cfg.encoding, cfg.memory);
  model_->init(cfg.train.seed);
}

ReuseSpeed ReuseSpeedBench::measure(int A) {
  const int L = segment_;
  const long targets = targets_;
  if (A <= L) throw std::invalid_argument("bench --reuse: every attention length must exceed "
                                          "the segment length " + std::to_string(L));
  // Windows per forward pass: at most 8,192 tokens, so that the [B, H, A, A] attention
  // weights of one pass stay bounded.
  SlidingWindowOptions vanilla{.attn_len = A, .stride = 1, .max_targets = targets,
                               .batch = std::max(1, 8192 / A)};
  SlidingWindowOptions segment = vanilla;
  segment.stride = L;
  segment.max_targets = std::max(targets * 8, 16L * L);  // cheaper per token: time more
  const long reuse_targets = std::max(targets * 64, 256L * L);
  TransformerLM<float>& model = *model_;
  ReuseSpeed speed;
  speed.vanilla = median_rate([&] { return evaluate_sliding_window(model, tokens_, vanilla); });
  speed.per_segment =
      median_rate([&] { return evaluate_sliding_window(model, tokens_, segment); });
  speed.reuse =
      median_rate([&] { return evaluate_with_reuse(model, tokens_, L, A - L, reuse_targets, 1); });
  return speed;
}

}  // namespace poslab
