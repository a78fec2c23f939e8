// Multi-head causal self-attention with memory, and the four positional hooks.
//
// Input: x [B, K, d], where the first M rows of each batch element are memory (cached inputs of
// this layer from earlier segments, Transformer-XL) and the last L rows are the current segment.
// Queries come from the segment only; keys and values from all K = M + L rows.
//
//   q = x[:, M:] W_q      k = x W_k      v = x W_v                  [B, *, H d_h]
//   (b) q, k = encoding rotation (RoPE)
//   S_h = scale * q_h k_h^T  + (c) encoding score terms              [B, H, L, K]
//   S_h[i, :] *= f(n_i), log-n scaling if the encoding asks for it   (n_i = keys query i sees)
//   P_h = softmax(S_h) over visible keys (j <= i + M)               [B, H, L, K]
//     with a learned sink logit (model.sink_logit, gpt-oss): one scalar s_h per head joins each
//     row's denominator and carries no value, P_ij = exp(S_ij) / (exp(s_h) + sum_j' exp(S_ij'))
//   z_h = P_h v_h  + (d) encoding value terms                       [B, L, H d_h]
//   out = z W_o                                                    [B, L, d]
//
// No biases on the projections (as in Transformer-XL). Heads are column slices of q, k, v, so
// each per-head product is one BLAS call with leading dimension d and no copy.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.hpp"
#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "core/ordered_sums.hpp"
#include "core/row_max.hpp"
#include "core/vector_exp.hpp"
#include "core/rng.hpp"
#include "encodings/encoding.hpp"
#include "nn/inference_scratch.hpp"
#include "nn/linear.hpp"

namespace poslab {

template <class T>
class Attention {
 public:
  // sink_logit: add the learned per-head sink logit s_h [H] (gpt-oss), initialised to 0
  // (softmax_1, "zero sink"), without weight decay.
  Attention(ParameterArena<T>& arena, const std::string& prefix, int d_model, int n_heads,
            bool sink_logit = false)
      : arena_(arena), d_(d_model), H_(n_heads), dh_(d_model / n_heads), has_sink_(sink_logit) {
    const std::size_t d = d_model;
    W_q = arena.add(prefix + "W_q", {d, d});
    W_k = arena.add(prefix + "W_k", {d, d});
    W_v = arena.add(prefix + "W_v", {d, d});
    W_o = arena.add(prefix + "W_o", {d, d});
    if (has_sink_) sink = arena.add(prefix + "sink", {std::size_t(n_heads)}, /*weight_decay=*/false);
  }

  void init(Rng& rng, double std) {
    for (Param p : {W_q, W_k, W_v, W_o}) {
      T* w = arena_.value(p);
      for (std::size_t i = 0; i < p.size; ++i) w[i] = T(rng.normal(0.0, std));
    }
    if (has_sink_) std::fill_n(arena_.value(sink), H_, T(0));  // draws nothing from rng
  }

  // x [B, K, d] -> out [B, L, d]. Caches what backward needs, in this layer's own buffers.
  void forward(const T* x, const AttentionGeometry& g, Encoding<T>& enc, int layer, T* out) {
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_;
    ensure_shape(q_, {std::size_t(B), std::size_t(L), std::size_t(d)});
    ensure_shape(k_, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(v_, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(probs_, {std::size_t(B), std::size_t(H_), std::size_t(L), std::size_t(K)});
    ensure_shape(ctx_, {std::size_t(B), std::size_t(L), std::size_t(d)});
    if (has_sink_) sink_probs_.resize(std::size_t(B) * H_ * L);  // [B, H, L]
    forward_in_chunks(x, g, enc, layer, out, q_, k_, v_, ctx_, probs_, {B, H_},
                      /*inference_only=*/false);
  }

  // The same function for evaluation only (nn/inference_scratch.hpp): the buffers are the
  // scratch shared by all layers, the scores are made a chunk of (batch rows, heads) at a time,
  // and nothing is kept for backward (backward after this is an error the model prevents).
  void forward_inference(const T* x, const AttentionGeometry& g, Encoding<T>& enc, int layer,
                         T* out, InferenceScratch<T>& s) {
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_;
    const InferenceChunk chunk = inference_chunk(B, H_, L, K, sizeof(T), s.score_budget_bytes);
    ensure_shape(s.q, {std::size_t(B), std::size_t(L), std::size_t(d)});
    ensure_shape(s.k, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(s.v, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(s.scores, {std::size_t(chunk.rows), std::size_t(chunk.heads), std::size_t(L),
                            std::size_t(K)});
    ensure_shape(s.ctx, {std::size_t(B), std::size_t(L), std::size_t(d)});
    forward_in_chunks(x, g, enc, layer, out, s.q, s.k, s.v, s.ctx, s.scores, chunk,
                      /*inference_only=*/true);
  }

  // dout [B, L, d]; x is the forward input. Writes dx [B, K, d] (memory rows included; the
  // caller drops them: memory is stop-gradient) and accumulates the parameter gradients.
  void backward(const T* dout, const T* x, const AttentionGeometry& g, Encoding<T>& enc, int layer,
                T* dx) {
    const int B = g.batch, L = g.q_len, K = g.k_len, M = g.mem_len, d = d_;
    ensure_shape(dctx_, {std::size_t(B), std::size_t(L), std::size_t(d)});
    // dP starts from the value terms' gradient if the encoding has value terms, else from the
    // first product below (beta = 0): no pass to zero B H L K cells first.
    const bool value_terms = enc.has_value_terms();
    if (value_terms)
      ensure_zeros(dprobs_, {std::size_t(B), std::size_t(H_), std::size_t(L), std::size_t(K)});
    else
      ensure_shape(dprobs_, {std::size_t(B), std::size_t(H_), std::size_t(L), std::size_t(K)});
    ensure_shape(dq_, {std::size_t(B), std::size_t(L), std::size_t(d)});
    ensure_shape(dk_, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(dv_, {std::size_t(B), std::size_t(K), std::size_t(d)});

    // out = z W_o: dz = dout W_o^T is written (beta 0), the rest of the layer adds to it.
    linear_backward<T>(dout, ctx_.data(), arena_.value(W_o), dctx_.data(), arena_.grad(W_o),
                       nullptr, B * L, d, d, /*dx_beta=*/T(0));
    // (d) value terms: gradient into P and the encoding's tables.
    if (value_terms) enc.values_backward(layer, g, probs_.data(), dctx_.data(), dprobs_.data());
    // z_h = P_h v_h:  dP_h += dz_h v_h^T,  dv_h = P_h^T dz_h. Then the softmax backward,
    // dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), written over dP. Masked cells get exactly 0.
    // The sink logit's gradient: p_i^sink = exp(s_h) / (exp(s_h) + sum_j exp(S_ij)) is one more
    // softmax cell whose dP is 0 (no value), so ds_h = sum_{b,i} p_i^sink (0 - sum_k P_ik dP_ik).
    // One partial sum per (b, h), added in a fixed order after the loop.
    if (has_sink_) sink_grad_parts_.assign(std::size_t(B) * H_, T(0));
    constexpr int kRows = 8;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H_; ++bh) {
      const int b = bh / H_, h = bh % H_;
      const auto P = per_head(std::as_const(probs_), bh);  // [L, K]
      const auto dP = per_head(dprobs_, bh);                // [L, K]
      const auto dz = head(std::as_const(dctx_), b, h);     // [L, d_h], row stride d
      multiply(dP, dz, head(v_, b, h).t(), T(1), value_terms ? T(1) : T(0));  // dP_h += dz_h v_h^T
      multiply(head(dv_, b, h), P.t(), dz);  // dv_h [K, d_h] = P_h^T [K, L] dz_h [L, d_h]
      // kRows rows at a time: their dot products side by side, each in its serial order
      // (core/ordered_sums.hpp), then the rows rewritten.
      for (int i0 = 0; i0 < L; i0 += kRows) {
        const T* p[kRows];
        const T* dp[kRows];
        for (int r = 0; r < kRows; ++r) {
          const int i = std::min(i0 + r, L - 1);  // rows past L repeat the last: discarded
          p[r] = P.row(i);
          dp[r] = dP.row(i);
        }
        T dot[kRows];  // sum_k P_ik dP_ik
        ordered_row_dots(p, dp, K, dot);
        if (has_sink_)
          for (int i = i0; i < std::min(L, i0 + kRows); ++i)
            sink_grad_parts_[bh] -= sink_probs_[std::size_t(bh) * L + i] * dot[i - i0];
        for (int i = i0; i < std::min(L, i0 + kRows); ++i) {
          T* dpi = dP.row(i);
          const T* pi = p[i - i0];
          for (int j = 0; j < K; ++j) dpi[j] = pi[j] * (dpi[j] - dot[i - i0]);
        }
      }
      // Log-n scaling, S'_i = f_i S_i: dS_i = f_i dS'_i, for the content term and the hooks.
      if (log_n_applied_)
        for (int i = 0; i < L; ++i) {
          T* dpi = dP.row(i);
          for (int j = 0; j < K; ++j) dpi[j] *= row_factor_[i];
        }
      // Content score S = scale * q k^T:  dq_h = scale * dS k_h,  dk_h = scale * dS^T q_h.
      const T content_scale = content_ ? scale_ : T(0);
      multiply(head(dq_, b, h), dP, head(k_, b, h), content_scale);      // [L, d_h]
      multiply(head(dk_, b, h), dP.t(), head(q_, b, h), content_scale);  // [K, d_h]
    }
    if (has_sink_) {
      T* ds = arena_.grad(sink);  // [H]
      for (int bh = 0; bh < B * H_; ++bh) ds[bh % H_] += sink_grad_parts_[bh];
    }
    // (c) positional score terms, then (b) the rotation, backwards.
    if (enc.has_score_terms())
      enc.scores_backward(layer, g, q_.data(), k_.data(), scale_, dprobs_.data(), dq_.data(),
                          dk_.data());
    if (enc.has_qk_transform()) enc.qk_backward(layer, g, dq_.data(), dk_.data());

    // Projections. dx = dk W_k^T (written: beta 0) + dv W_v^T + dq W_q^T (segment rows).
    linear_backward<T>(dk_.data(), x, arena_.value(W_k), dx, arena_.grad(W_k), nullptr, B * K, d, d,
                       /*dx_beta=*/T(0));
    linear_backward<T>(dv_.data(), x, arena_.value(W_v), dx, arena_.grad(W_v), nullptr, B * K, d,
                       d);
    for (int b = 0; b < B; ++b) {
      const T* xs = x + (long(b) * K + M) * d;
      const T* dqb = dq_.data() + long(b) * L * d;
      linear_backward<T>(dqb, xs, arena_.value(W_q), dx + (long(b) * K + M) * d,
                         arena_.grad(W_q), nullptr, L, d, d);
    }
  }

  // The attention weights of the last forward pass, [B, H, L, K] (for plots and tests).
  const xt::xtensor<T, 4>& probs() const { return probs_; }
  // The queries of the last training-path forward pass, [B, L, H * d_h], after the encoding's
  // rotation (hook (b)) if it has one (for `poslab explore`'s positional terms).
  const xt::xtensor<T, 3>& queries() const { return q_; }

  Param W_q, W_k, W_v, W_o;
  Param sink;  // [H], only with sink_logit
  bool has_sink_logit() const { return has_sink_; }

 private:
  // The forward pass over buffers q [B, L, d], k, v [B, K, d], ctx [B, L, d] and probs
  // [R, Hc, L, K], for R = chunk.rows batch rows and Hc = chunk.heads heads at a time. With
  // R = B and Hc = H there is one chunk and these are exactly the calls of a whole-batch pass.
  // The chunk of rows b0 .. b0 + R - 1 and heads h0 .. h0 + Hc - 1 gives the score and value
  // hooks a geometry with batch = R, head_begin = h0, head_count = Hc and pointers offset to
  // row b0; its (b, h) scores are block (b - b0) Hc + (h - h0) of probs. (The last chunk of
  // heads may have fewer than Hc; it uses the front of the buffer.)
  void forward_in_chunks(const T* x, const AttentionGeometry& g, Encoding<T>& enc, int layer,
                         T* out, xt::xtensor<T, 3>& q, xt::xtensor<T, 3>& k, xt::xtensor<T, 3>& v,
                         xt::xtensor<T, 3>& ctx, xt::xtensor<T, 4>& probs, InferenceChunk chunk,
                         bool inference_only) {
    const int B = g.batch, L = g.q_len, K = g.k_len, M = g.mem_len, d = d_;
    // Log-n scaling (encodings/log_n_scaling.hpp): f_i = max(1, ln n_i / ln L) for the n_i keys
    // query i sees. Off (the default), nothing below multiplies anything.
    const bool log_n = enc.log_n.active(inference_only);
    if (!inference_only) log_n_applied_ = log_n;  // what backward must undo
    if (log_n) {
      row_factor_.resize(L);  // [L]
      for (int i = 0; i < L; ++i)
        row_factor_[i] = T(enc.log_n.factor(g.last_visible(i) - g.first_visible(i) + 1));
    }

    // Projections. Queries: rows M..K-1 of each batch element (one call when there is no memory).
    segment_rows_gemm(x, arena_.value(W_q), q.data(), B, L, M);
    linear_forward<T>(x, arena_.value(W_k), nullptr, k.data(), B * K, d, d);
    linear_forward<T>(x, arena_.value(W_v), nullptr, v.data(), B * K, d, d);

    // (b) rotations of q and k (RoPE), whole batch; q, k keep the rotated values for backward.
    if (enc.has_qk_transform()) enc.qk_forward(layer, g, q.data(), k.data());

    scale_ = enc.score_scale(dh_);
    content_ = enc.has_content_term();
    for (int b0 = 0; b0 < B; b0 += chunk.rows)
      for (int h0 = 0; h0 < H_; h0 += chunk.heads) {
        const int R = std::min(chunk.rows, B - b0), Hc = std::min(chunk.heads, H_ - h0);
        AttentionGeometry part = g;
        part.batch = R;
        part.head_begin = h0;
        part.head_count = Hc;
        const T* q_part = q.data() + long(b0) * L * d;  // rows b0.. of q [B, L, d]
        const T* k_part = k.data() + long(b0) * K * d;  // rows b0.. of k [B, K, d]
        T* ctx_part = ctx.data() + long(b0) * L * d;    // rows b0.. of ctx [B, L, d]

        // (a) of the score: content term, S = scale * q_h k_h^T, one BLAS call per (b, h).
#pragma omp parallel for schedule(static)
        for (int bh = 0; bh < R * Hc; ++bh) {
          const int b = b0 + bh / Hc, h = h0 + bh % Hc;
          // S_bh [L, K] = scale * q_h [L, d_h] k_h^T [d_h, K]
          multiply(per_head(probs, bh), head(q, b, h), head(k, b, h).t(),
                   content_ ? scale_ : T(0));
        }
        // (c) positional score terms.
        if (enc.has_score_terms())
          enc.scores_forward(layer, part, q_part, k_part, scale_, probs.data());

        // Causal softmax (masked cells become exactly 0), then z_h = P_h v_h.
#pragma omp parallel for schedule(static)
        for (int bh = 0; bh < R * Hc; ++bh) {
          const int b = b0 + bh / Hc, h = h0 + bh % Hc;
          const auto P = per_head(probs, bh);  // [L, K], the scores until the softmax
          if (log_n)  // S_i *= f_i on the visible keys (the others are masked next)
            for (int i = 0; i < L; ++i) {
              T* si = P.row(i);
              for (int j = g.first_visible(i); j <= g.last_visible(i); ++j) si[j] *= row_factor_[i];
            }
          // The sink logit s_h (not scaled, not log-n scaled: appended after both, as gpt-oss);
          // -inf when there is none, which adds exactly 0 to every denominator.
          const T s_h = has_sink_ ? arena_.value(sink)[h] : -std::numeric_limits<T>::infinity();
          T* p_sink = has_sink_ && !inference_only ? sink_probs_.data() + long(b * H_ + h) * L
                                                   : nullptr;  // [L] of this (b, h)
          for (int i0 = 0; i0 < L; i0 += kSoftmaxRows)
            masked_softmax_rows(P, i0, std::min(kSoftmaxRows, L - i0), g, s_h,
                                p_sink ? p_sink + i0 : nullptr);
          multiply(head(ctx, b, h), P, head(v, b, h));  // z_h [L, d_h] = P_h [L, K] v_h [K, d_h]
        }
        // (d) positional value terms.
        if (enc.has_value_terms()) enc.values_forward(layer, part, probs.data(), ctx_part);
      }

    linear_forward<T>(ctx.data(), arena_.value(W_o), nullptr, out, B * L, d, d);
  }

  // Head h of batch row b of x [B, R, H d_h] (q, k, v, ctx and their gradients): the block
  // rows [b R, (b+1) R), columns [h d_h, (h+1) d_h) of x seen as [B R, d]. [R, d_h], row stride d.
  // (A const x gives a read-only view.)
  template <class Tensor3>
  auto head(Tensor3& x, int b, int h) const {
    const int R = int(x.shape(1));
    return matrix(x).block(b * R, h * dh_, R, dh_);
  }
  // The [L, K] block number bh of scores, probabilities or their gradients [B, H, L, K] seen
  // as [B H L, K]: batch row b and head h for bh = b H + h (of a chunk [R, Hc, L, K]: its block
  // (b - b0) Hc + (h - h0)).
  template <class Tensor4>
  static auto per_head(Tensor4& x, int bh) {
    const int L = int(x.shape(2));
    return matrix(x).row_block(bh * L, L);
  }

  // y[B, L, d] = (rows M..M+L-1 of every x[b]) W
  void segment_rows_gemm(const T* x, const T* W, T* y, int B, int L, int M) const {
    const int K = M + L;
    if (M == 0) {
      linear_forward<T>(x, W, nullptr, y, B * L, d_, d_);
      return;
    }
    for (int b = 0; b < B; ++b)
      linear_forward<T>(x + (long(b) * K + M) * d_, W, nullptr, y + long(b) * L * d_, L, d_, d_);
  }

  // Softmax over the keys visible to each query i0 .. i0 + n - 1 (n <= kSoftmaxRows) of one
  // head's scores P [L, K], in place; every other cell is set to exactly 0:
  //   P_ij = exp(S_ij - m_i) / (exp(s - m_i) + sum_j' exp(S_ij' - m_i)),
  //   m_i = max(s, max_j S_ij),   j, j' visible,   s = the sink logit (-inf: none, term 0)
  // and p_sink[r] = exp(s - m_i) / (same denominator) for row i = i0 + r if p_sink is given.
  // The rows' sums are made side by side, each in its serial order (core/ordered_sums.hpp).
  static constexpr int kSoftmaxRows = 8;
  static void masked_softmax_rows(MatrixView<T> P, int i0, int n, const AttentionGeometry& g,
                                  T sink_logit, T* p_sink) {
    const int K = g.k_len;
    const T* rows[kSoftmaxRows];
    int begin[kSoftmaxRows], end[kSoftmaxRows];  // visible keys [begin, end) of each row
    for (int r = 0; r < kSoftmaxRows; ++r) {
      const int i = i0 + std::min(r, n - 1);
      rows[r] = P.row(i);
      begin[r] = r < n ? g.first_visible(i) : 0;  // rows past n: empty
      end[r] = r < n ? g.last_visible(i) + 1 : 0;
    }
    T sink_term[kSoftmaxRows];  // exp(s - m_i)
    for (int r = 0; r < n; ++r) {
      T* s = P.row(i0 + r);
      const T m = std::max(row_max(s, begin[r], end[r]), sink_logit);
      exp_shifted(s + begin[r], m, s + begin[r], end[r] - begin[r]);  // s_j = exp(s_j - m), core/vector_exp.hpp
      sink_term[r] = std::exp(sink_logit - m);  // exactly 0 for s = -inf
    }
    T sum[kSoftmaxRows];
    ordered_row_sums(rows, begin, end, sum);
    for (int r = 0; r < n; ++r) {
      T* s = P.row(i0 + r);
      const T inv = T(1) / (sum[r] + sink_term[r]);
      if (p_sink) p_sink[r] = sink_term[r] * inv;
      for (int j = 0; j < begin[r]; ++j) s[j] = 0;
      for (int j = begin[r]; j < end[r]; ++j) s[j] *= inv;
      for (int j = end[r]; j < K; ++j) s[j] = 0;
    }
  }

  ParameterArena<T>& arena_;
  int d_, H_, dh_;
  T scale_ = 1;
  bool content_ = true;
  bool has_sink_ = false;       // model.sink_logit: the per-head sink logit exists
  std::vector<T> sink_probs_;       // [B, H, L] p_i^sink of the last training forward
  std::vector<T> sink_grad_parts_;  // [B H] partial ds_h of each (b, h)
  bool log_n_applied_ = false;  // the last training forward scaled its rows by row_factor_
  std::vector<T> row_factor_;   // [L] log-n factors f_i of the last forward
  xt::xtensor<T, 3> q_, k_, v_, ctx_, dq_, dk_, dv_, dctx_;
  xt::xtensor<T, 4> probs_, dprobs_;
};

}  // namespace poslab
