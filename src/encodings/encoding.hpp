// The positional-encoding interface: one class, four hooks, one for each place a scheme can act.
//
//   x_0 = E[tokens] + (a) PE(pos)                                 absolute: sinusoidal, learned
//   q, k = (b) rotate(q, pos_q), rotate(k, pos_k)                 RoPE
//   S_ij = scale * q_i . k_j + (c) extra_ij(q_i, k_j, pos_i, pos_j) Shaw a^K, Transformer-XL (b)-(d),
//                                                                  T5 / ALiBi / KERPLE / FIRE biases
//   z_i  = sum_j P_ij v_j     + (d) sum_j P_ij a^V_ij               Shaw a^V
//
// Every hook has its backward pass. The attention layer owns the content path (projections,
// q.k, mask, softmax, P.v) and calls the hooks in that order; an encoding only overrides what it
// uses. Hooks see whole-layer tensors so that an encoding can be efficient (one projection of a
// distance table per layer instead of one per (query, key) pair).
//
// Tensor layouts (row-major, T = float for training, double for gradient checks):
//   x      [B, L, d]           token embeddings of the current segment
//   q      [B, L, H * d_h]     head h = columns [h*d_h, (h+1)*d_h)
//   k, v   [B, K, H * d_h]     K = M + L keys: M memory rows, then the segment
//   scores [B, Hc, L, K]       logits before the mask; masked cells may hold anything
//   probs  [B, Hc, L, K]       softmax output, exactly 0 on masked cells
//   ctx    [B, L, H * d_h]     attention output before the output projection
// A call covers the heads h0 .. h0 + Hc - 1 (AttentionGeometry::head_begin, heads()): all H
// heads (h0 = 0, Hc = H) in training and whenever an evaluation's scores fit its budget; a
// range of them when evaluation makes the scores a chunk of heads at a time
// (nn/inference_scratch.hpp). q, k, v and ctx always hold all heads (head h = its columns, as
// above); the scores and probs of absolute head h are block h - h0 of the [B, Hc, L, K] buffer,
// and the encoding's per-head parameters are those of h. Backward hooks always get all heads.
// Gradients (dq, dk, dprobs, ...) have the shape of what they differentiate and are *accumulated*
// (+=), as in llm.c.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/arena.hpp"
#include "core/rng.hpp"
#include "encodings/log_n_scaling.hpp"

namespace poslab {

// The sizes an encoding is built for.
struct EncodingShape {
  int d_model = 0;
  int n_heads = 0;
  int d_head = 0;
  int n_layers = 0;
};

// Everything about one attention call that is not a tensor.
struct AttentionGeometry {
  int batch = 0;     // B
  int q_len = 0;     // L
  int mem_len = 0;   // M: memory rows in front of the segment (0 on the first segment)
  int k_len = 0;     // K = M + L
  int n_heads = 0;   // H
  int d_head = 0;    // d_h
  int window = 0;    // same_length: a query sees at most `window` keys (0 = unlimited)
  // Positions of the queries [L] and the keys [K] (memory first). The same for every batch row.
  // Relative schemes use only q_pos[i] - k_pos[j]; absolute ones read q_pos.
  const std::int64_t* q_pos = nullptr;
  const std::int64_t* k_pos = nullptr;
  // The heads of this call (after the positions, so that {B, L, M, K, H, d_h, window, q_pos,
  // k_pos} keeps meaning all heads), h0 .. h0 + Hc - 1: scores and probs are [B, Hc, L, K], block
  // h - h0 for head h. Default (head_count = 0): all H heads, h0 = 0.
  int head_begin = 0;  // h0
  int head_count = 0;  // Hc, 0 = all n_heads

  int d_model() const { return n_heads * d_head; }

  // Hc, the number of heads of this call, and one past its last head, h0 + Hc.
  int heads() const { return head_count > 0 ? head_count : n_heads; }
  int head_end() const { return head_begin + heads(); }
  bool all_heads() const { return head_begin == 0 && heads() == n_heads; }

  // The attention mask (Transformer-XL, with memory): key j is visible to query i iff
  // j <= i + M, and, with same_length, only the last `window` of those.
  bool visible(int i, int j) const { return first_visible(i) <= j && j <= last_visible(i); }
  // The keys visible to query i form the contiguous range [first_visible(i), last_visible(i)].
  int last_visible(int i) const { return std::min(k_len - 1, i + mem_len); }
  int first_visible(int i) const {
    return window > 0 ? std::max(0, last_visible(i) - window + 1) : 0;
  }
};

// Backward hooks run after a training forward, which always covers all heads: a call with a
// range of heads there is a caller's mistake, refused rather than half done.
inline void require_all_heads(const AttentionGeometry& g, const char* who) {
  if (!g.all_heads())
    throw std::logic_error(std::string(who) + ": backward hooks take all heads at once (got " +
                           "heads " + std::to_string(g.head_begin) + " .. " +
                           std::to_string(g.head_end() - 1) + " of " + std::to_string(g.n_heads) +
                           ")");
}

template <class T>
class Encoding {
 public:
  virtual ~Encoding() = default;

  // Called once after the arena is allocated: initialise this encoding's parameters.
  virtual void init(ParameterArena<T>& /*arena*/, Rng& /*rng*/) {}

  // Scale of the content score q.k (1/sqrt(d_h) by default; DeBERTa uses 1/sqrt(3 d_h)).
  virtual T score_scale(int d_head) const { return T(1) / std::sqrt(T(d_head)); }

  // Log-n scaling of the logits, row by row (log_n_scaling.hpp): options `log_n` and
  // `log_n_len`, which every encoding has; EncodingInfo::make sets it. The attention applies it
  // (nn/attention.hpp), after the score hook (c) and before the softmax.
  LogNScaling log_n;

  // Whether the attention computes the content term q.k at all (Transformer-XL's term (a);
  // switched off only for its ablation).
  virtual bool has_content_term() const { return true; }

  // (a) x[B, L, d] += PE(q_pos)
  virtual void embed_forward(const AttentionGeometry&, T* /*x*/) {}
  virtual void embed_backward(const AttentionGeometry&, const T* /*dx*/) {}

  // (b) transform q [B, L, H d_h] and k [B, K, H d_h] in place (RoPE rotates them). Backward
  // maps dq' and dk' in place to dq and dk with the TRANSPOSE of the forward's Jacobian,
  // dx = J^T dy: for a rotation that is the inverse rotation, for a scaled rotation a R (xPos,
  // RoPE with YaRN's factor) it is a R^T, not the inverse R^T / a (docs/07, "Another hook").
  virtual bool has_qk_transform() const { return false; }
  virtual void qk_forward(int /*layer*/, const AttentionGeometry&, T* /*q*/, T* /*k*/) {}
  virtual void qk_backward(int /*layer*/, const AttentionGeometry&, T* /*dq*/, T* /*dk*/) {}

  // (c) scores[B, Hc, L, K] += terms of heads h0 .. h0 + Hc - 1. `scale` is the content
  // scale; the encoding decides whether its terms are scaled too (Shaw, Transformer-XL: yes;
  // T5, ALiBi: no).
  virtual bool has_score_terms() const { return false; }
  virtual void scores_forward(int /*layer*/, const AttentionGeometry&, const T* /*q*/,
                              const T* /*k*/, T /*scale*/, T* /*scores*/) {}
  // dscores is exactly 0 on masked cells. Accumulates into dq, dk and the encoding's parameters.
  virtual void scores_backward(int /*layer*/, const AttentionGeometry&, const T* /*q*/,
                               const T* /*k*/, T /*scale*/, const T* /*dscores*/, T* /*dq*/,
                               T* /*dk*/) {}

  // (d) ctx[B, L, H*d_h] += sum_j probs_ij a_ij, for the columns of heads h0 .. h0 + Hc - 1
  // (probs [B, Hc, L, K])
  virtual bool has_value_terms() const { return false; }
  virtual void values_forward(int /*layer*/, const AttentionGeometry&, const T* /*probs*/,
                              T* /*ctx*/) {}
  // Accumulates into dprobs and the encoding's parameters.
  virtual void values_backward(int /*layer*/, const AttentionGeometry&, const T* /*probs*/,
                               const T* /*dctx*/, T* /*dprobs*/) {}
};

}  // namespace poslab
