// Evaluation speed with and without state reuse (`poslab bench --reuse`; Dai et al. 2019,
// "Transformer-XL", Table 9): how many predicted tokens per second each way of giving every
// prediction A tokens of context reaches, on a freshly initialized model and random tokens (speed
// depends on neither the weights nor the text).
//
//   vanilla      a forward pass over the A tokens ending at every predicted token (stride 1)
//   per-segment  the same window, moved by L = train.seq_len tokens, scoring its last L
//   reuse        segments of L tokens with a memory of A - L cached states (Transformer-XL)
//
// Each is one untimed pass (buffers of this shape), then the median of 3 timed passes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "model/transformer.hpp"

namespace poslab {

struct ReuseSpeed {
  double vanilla = 0, per_segment = 0, reuse = 0;  // predicted tokens per second
};

class ReuseSpeedBench {
 public:
  // The model of cfg (initialized from train.seed) and random tokens enough for the longest
  // attention length and every timed target of the three modes; `targets` predicted tokens are
  // timed for vanilla, more for the faster modes.
  ReuseSpeedBench(const Config& cfg, long longest_attn_len, long targets);

  // The three speeds at attention length A (> train.seq_len, or std::invalid_argument).
  ReuseSpeed measure(int attn_len);

 private:
  int segment_;
  long targets_;
  std::vector<std::int32_t> tokens_;
  std::unique_ptr<TransformerLM<float>> model_;
};

}  // namespace poslab
