// Multi-head causal self-attention with memory, and the four positional hooks.
//
// Input: x [B, K, d], where the first M rows of each batch element are memory (cached inputs of
// this layer from earlier segments, Transformer-XL) and the last L rows are the current segment.
// Queries come from the segment only; keys and values from all K = M + L rows.
//
//   q = x[:, M:] W_q      k = x W_k      v = x W_v                  [B, *, H d_h]
//   (b) q, k = encoding rotation (RoPE)
//   S_h = scale * q_h k_h^T  + (c) encoding score terms              [B, H, L, K]
//   P_h = softmax(S_h) over visible keys (j <= i + M)               [B, H, L, K]
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

#include "core/arena.hpp"
#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "core/rng.hpp"
#include "encodings/encoding.hpp"
#include "nn/linear.hpp"

namespace poslab {

template <class T>
class Attention {
 public:
  Attention(ParameterArena<T>& arena, const std::string& prefix, int d_model, int n_heads)
      : arena_(arena), d_(d_model), H_(n_heads), dh_(d_model / n_heads) {
    const std::size_t d = d_model;
    W_q = arena.add(prefix + "W_q", {d, d});
    W_k = arena.add(prefix + "W_k", {d, d});
    W_v = arena.add(prefix + "W_v", {d, d});
    W_o = arena.add(prefix + "W_o", {d, d});
  }

  void init(Rng& rng, double std) {
    for (Param p : {W_q, W_k, W_v, W_o}) {
      T* w = arena_.value(p);
      for (std::size_t i = 0; i < p.size; ++i) w[i] = T(rng.normal(0.0, std));
    }
  }

  // x [B, K, d] -> out [B, L, d]. Caches what backward needs.
  void forward(const T* x, const AttentionGeometry& g, Encoding<T>& enc, int layer, T* out) {
    const int B = g.batch, L = g.q_len, K = g.k_len, M = g.mem_len, d = d_;
    ensure_shape(q_, {std::size_t(B), std::size_t(L), std::size_t(d)});
    ensure_shape(k_, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(v_, {std::size_t(B), std::size_t(K), std::size_t(d)});
    ensure_shape(probs_, {std::size_t(B), std::size_t(H_), std::size_t(L), std::size_t(K)});
    ensure_shape(ctx_, {std::size_t(B), std::size_t(L), std::size_t(d)});

    // Projections. Queries: rows M..K-1 of each batch element (one call when there is no memory).
    segment_rows_gemm(x, arena_.value(W_q), q_.data(), B, L, M);
    linear_forward<T>(x, arena_.value(W_k), nullptr, k_.data(), B * K, d, d);
    linear_forward<T>(x, arena_.value(W_v), nullptr, v_.data(), B * K, d, d);

    // (b) rotations of q and k (RoPE); q_, k_ keep the rotated values for backward.
    if (enc.has_qk_transform()) enc.qk_forward(layer, g, q_.data(), k_.data());

    // (a) of the score: content term, S = scale * q_h k_h^T, one BLAS call per (b, h).
    scale_ = enc.score_scale(dh_);
    content_ = enc.has_content_term();
    T* S = probs_.data();
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H_; ++bh) {
      const int b = bh / H_, h = bh % H_;
      gemm<T>(Trans::No, Trans::Yes, L, K, dh_, content_ ? scale_ : T(0), q_head(b, h), d,
              k_head(b, h), d, T(0), S + long(bh) * L * K, K);
    }
    // (c) positional score terms.
    if (enc.has_score_terms()) enc.scores_forward(layer, g, q_.data(), k_.data(), scale_, S);

    // Causal softmax (masked cells become exactly 0), then z_h = P_h v_h.
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H_; ++bh) {
      const int b = bh / H_, h = bh % H_;
      T* P = S + long(bh) * L * K;
      for (int i = 0; i < L; ++i) masked_softmax_row(P + long(i) * K, i, g);
      gemm<T>(Trans::No, Trans::No, L, dh_, K, T(1), P, K, v_head(b, h), d, T(0),
              ctx_.data() + long(b) * L * d + h * dh_, d);
    }
    // (d) positional value terms.
    if (enc.has_value_terms()) enc.values_forward(layer, g, probs_.data(), ctx_.data());

    linear_forward<T>(ctx_.data(), arena_.value(W_o), nullptr, out, B * L, d, d);
  }

  // dout [B, L, d]; x is the forward input. Accumulates dx [B, K, d] (memory rows included;
  // the caller drops them: memory is stop-gradient) and the parameter gradients.
  void backward(const T* dout, const T* x, const AttentionGeometry& g, Encoding<T>& enc,
                int layer, T* dx) {
    const int B = g.batch, L = g.q_len, K = g.k_len, M = g.mem_len, d = d_;
    ensure_zeros(dctx_, {std::size_t(B), std::size_t(L), std::size_t(d)});
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

    // out = z W_o
    linear_backward<T>(dout, ctx_.data(), arena_.value(W_o), dctx_.data(), arena_.grad(W_o),
                       nullptr, B * L, d, d);
    // (d) value terms: gradient into P and the encoding's tables.
    if (value_terms) enc.values_backward(layer, g, probs_.data(), dctx_.data(), dprobs_.data());
    // z_h = P_h v_h:  dP_h += dz_h v_h^T,  dv_h = P_h^T dz_h. Then the softmax backward,
    // dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), written over dP. Masked cells get exactly 0.
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H_; ++bh) {
      const int b = bh / H_, h = bh % H_;
      const T* P = probs_.data() + long(bh) * L * K;
      T* dP = dprobs_.data() + long(bh) * L * K;
      const T* dz = dctx_.data() + long(b) * L * d + h * dh_;
      gemm<T>(Trans::No, Trans::Yes, L, K, dh_, T(1), dz, d, v_head(b, h), d,
              value_terms ? T(1) : T(0), dP, K);
      gemm<T>(Trans::Yes, Trans::No, K, dh_, L, T(1), P, K, dz, d, T(0),
              dv_.data() + long(b) * K * d + h * dh_, d);
      for (int i = 0; i < L; ++i) {
        const T* p = P + long(i) * K;
        T* dp = dP + long(i) * K;
        T dot = 0;
        for (int j = 0; j < K; ++j) dot += p[j] * dp[j];
        for (int j = 0; j < K; ++j) dp[j] = p[j] * (dp[j] - dot);
      }
      // Content score S = scale * q k^T:  dq_h = scale * dS k_h,  dk_h = scale * dS^T q_h.
      const T content_scale = content_ ? scale_ : T(0);
      gemm<T>(Trans::No, Trans::No, L, dh_, K, content_scale, dP, K, k_head(b, h), d, T(0),
              dq_.data() + long(b) * L * d + h * dh_, d);
      gemm<T>(Trans::Yes, Trans::No, K, dh_, L, content_scale, dP, K, q_head(b, h), d, T(0),
              dk_.data() + long(b) * K * d + h * dh_, d);
    }
    // (c) positional score terms, then (b) the rotation, backwards.
    if (enc.has_score_terms())
      enc.scores_backward(layer, g, q_.data(), k_.data(), scale_, dprobs_.data(), dq_.data(),
                          dk_.data());
    if (enc.has_qk_transform()) enc.qk_backward(layer, g, dq_.data(), dk_.data());

    // Projections.
    linear_backward<T>(dk_.data(), x, arena_.value(W_k), dx, arena_.grad(W_k), nullptr, B * K, d,
                       d);
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

  Param W_q, W_k, W_v, W_o;

 private:
  const T* q_head(int b, int h) const { return q_.data() + long(b) * q_.shape(1) * d_ + h * dh_; }
  const T* k_head(int b, int h) const { return k_.data() + long(b) * k_.shape(1) * d_ + h * dh_; }
  const T* v_head(int b, int h) const { return v_.data() + long(b) * v_.shape(1) * d_ + h * dh_; }

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

  // Softmax over the keys visible to query i; every other cell is set to exactly 0.
  static void masked_softmax_row(T* s, int i, const AttentionGeometry& g) {
    const int K = g.k_len;
    const int lo = g.first_visible(i), hi = g.last_visible(i);
    T smax = -std::numeric_limits<T>::infinity();
    for (int j = lo; j <= hi; ++j) smax = std::max(smax, s[j]);
    T sum = 0;
    for (int j = lo; j <= hi; ++j) {
      s[j] = std::exp(s[j] - smax);
      sum += s[j];
    }
    const T inv = T(1) / sum;
    for (int j = 0; j < lo; ++j) s[j] = 0;
    for (int j = lo; j <= hi; ++j) s[j] *= inv;
    for (int j = hi + 1; j < K; ++j) s[j] = 0;
  }

  ParameterArena<T>& arena_;
  int d_, H_, dh_;
  T scale_ = 1;
  bool content_ = true;
  xt::xtensor<T, 3> q_, k_, v_, ctx_, dq_, dk_, dv_, dctx_;
  xt::xtensor<T, 4> probs_, dprobs_;
};

}  // namespace poslab
