// Counting the floating-point work of one training token, to turn tokens/s into GFLOP/s.
//
// We count the matrix products, which are all but a few percent of the work, as 2 FLOPs per
// multiply-add, for a segment of L queries attending to K = M + L keys:
//
//   per layer, forward, per token:
//     q projection          2 d^2
//     k, v projections      2 * 2 d^2 * K / L    (memory rows are projected again each segment)
//     output projection     2 d^2
//     scores q.k, P.v       2 * 2 K d            (all heads; every key column is computed, the
//                                                  causal mask only zeroes the upper triangle)
//     feed-forward          2 * 2 d d_inner
//   output layer            2 d V
//   backward = 2 x forward (a gradient for the input and one for the weights of each product)
//
// Work done by a positional encoding on top of this (Shaw's tables, Transformer-XL's W_kR R) is
// not counted: the figure is the same for every encoding, so tokens/s compares them directly.
#pragma once

#include "config/config.hpp"

namespace poslab {

inline double training_flops_per_token(const ModelConfig& m, int seq_len, int mem_len) {
  const double d = m.d_model, di = m.d_inner, V = m.vocab_size;
  const double L = seq_len, K = mem_len + seq_len;
  const double per_layer = 2 * d * d + 4 * d * d * K / L + 2 * d * d + 4 * K * d + 4 * d * di;
  const double forward = m.n_layers * per_layer + 2 * d * V;
  return 3 * forward;
}

}  // namespace poslab
