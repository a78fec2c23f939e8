// Transformer-XL relative positional encoding (Dai et al. 2019, section 3.3 and appendix B).
//
// ---------------------------------------------------------------------------------------------
// 1. Where the four terms come from
// ---------------------------------------------------------------------------------------------
// With absolute encodings the input of position i is E_{x_i} + U_i, and the score of query i
// against key j is (single head, before the 1/sqrt(d_h) scale)
//
//   A^abs_ij = (E_{x_i} + U_i)^T W_q^T W_k (E_{x_j} + U_j)
//            = E_{x_i}^T W_q^T W_k E_{x_j}       (a) content  . content
//            + E_{x_i}^T W_q^T W_k U_j           (b) content  . key position
//            + U_i^T     W_q^T W_k E_{x_j}       (c) query position . content
//            + U_i^T     W_q^T W_k U_j           (d) query position . key position
//
// Transformer-XL rewrites each term so that only the distance i - j appears:
//   - the key's absolute position U_j becomes the relative R_{i-j} (R: the sinusoid table of
//     Vaswani et al., no parameters), projected by its own matrix W_kR (not W_k);
//   - the query's position U_i^T W_q^T, which no longer exists, becomes a learned vector: u in
//     the content term (c), v in the positional term (d). The same for every query position.
//
//   A^rel_ij = q_i . k_j               (a) content-based addressing    (computed by Attention)
//            + q_i . (W_kR R_{i-j})    (b) content-dependent positional bias
//            + u   . k_j               (c) global content bias
//            + v   . (W_kR R_{i-j})    (d) global positional bias
//
// with q_i = W_q h_i, k_j = W_k h_j, every term scaled by 1/sqrt(d_h), then causal mask and
// softmax. Per head h, u_h and v_h have d_h entries; in poslab's layout (layer input times W)
// the positional keys of all heads are Rk = R W_kR, [distances, H*d_h], head h = columns
// [h*d_h, (h+1)*d_h). Shaw et al. (2018) keep (a) and (b) only, with a learned table in place of
// W_kR R: set term_c = term_d = false for that comparison.
//
// Parameters (names in the arena):
//   layer{n}.xl.W_kR  [d, H*d_h]  per layer, weight decay on        (only if term (b) or (d) is on)
//   xl.u, xl.v        [H, d_h]    shared by all layers (official PyTorch code), no weight decay
//   layer{n}.xl.u/.v  [H, d_h]    per layer with untie_uv = true (TF code / HF `untie_r`)
// all N(0, init_std). u exists only with term (c), v only with term (d).
//
// ---------------------------------------------------------------------------------------------
// 2. Computing (b) + (d) in linear, not quadratic, cost
// ---------------------------------------------------------------------------------------------
// Naively (option naive = true, kept as the reference for the tests) one builds W_kR R_{i-j} for
// every visible pair: O(L K d^2) work per layer. But with contiguous positions (query i at s + i,
// key j at s - M + j, what TransformerLM passes) the distance i + M - j takes only K values,
// 0..K-1, so:
//
//   R      [K, d]       R[c] = sinusoid(K-1-c)  (distances K-1 down to 0: the official pos_seq)
//   Rk     [K, H d_h]   = R W_kR                       one gemm per layer
//   dvec_h [K]          = Rk_h v_h                     (d) one value per distance and head
//   BD     [L, K]       = q_h Rk_h^T + dvec_h          (b) + (d) per distance: one gemm per (b, h)
//   scores[i][j]       += scale * rel_shift(BD)[i][j]  distance column -> key column
//   cvec   [K]          = k_h u_h                      (c) one value per key
//   scores[i][j]       += scale * cvec[j]
//
// rel_shift (rel_shift.hpp, with a worked example) is the pad-and-reshape trick of the official
// code. Its output is correct only on causal cells j <= i + M; the other cells receive garbage
// that the attention's causal mask removes before the softmax (the masked softmax never reads
// them and sets their probabilities to exactly 0). We write BD straight into the padded buffer
// (the product's C is rel_shift_input_view, row stride K + 1), so the shift moves no data.
//
// Positions that are not contiguous (randomized positions, or any caller passing its own) break
// the "column c = distance K-1-c" layout. Then we fall back to a gather: the table holds every
// clamped distance between the smallest and the largest visible one, BD is computed against it
// the same way, and each visible cell reads its column dmax - dist(i, j). Same cost class, a few
// more table rows; only visible cells are written.
//
// clamp_len > 0: every distance above clamp_len uses R[clamp_len] (the official `clamp_len`),
// applied when the table of distances is built; nothing else changes.
//
// ---------------------------------------------------------------------------------------------
// 3. Backward (each step transposed, accumulating into dq, dk and the parameter gradients)
// ---------------------------------------------------------------------------------------------
//   dBD      = rel_shift^T(dS)        causal cells only: garbage cells never receive gradient
//                                      (and dS is exactly 0 there anyway)
//   dq_h    += scale * dBD Rk_h                                (b)
//   dRk_h   += scale * dBD^T q_h                               (b)
//   csum[c]  = sum_{b,i} dBD[i][c]                             (d)
//   dv_h    += scale * csum^T Rk_h,  dRk_h += scale * csum v_h^T
//   dW_kR   += R^T dRk                                         one gemm per layer
//   s_j      = sum_i dS_ij                                     (c)
//   dk_j    += scale * s_j u_h,      du_h += scale * s^T k_h
// The loop runs in parallel over heads, with the batch inside: dq, dk, du_h, dv_h and the head's
// columns of dRk are then written by one thread only.
//
// Work buffers keep their memory between calls (core/buffer.hpp), so a training step allocates
// nothing after the first. The forward caches Rk per layer for the backward; as everywhere in
// poslab, scores_backward must follow the scores_forward of the same layer and geometry.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "core/init_normal.hpp"
#include "encodings/registry.hpp"
#include "encodings/rel_shift.hpp"
#include "encodings/sinusoid.hpp"

namespace poslab {

namespace {

// Grows a flat buffer when needed, never shrinks it: the gather fallback's table size can change
// every step (randomized positions), and this keeps it from reallocating each time.
template <class T>
T* grow(xt::xtensor<T, 1>& buffer, std::size_t n) {
  if (buffer.size() < n) buffer.resize({n});
  return buffer.data();
}

template <class T>
class TransformerXL : public Encoding<T> {
 public:
  TransformerXL(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        d_(s.d_model),
        H_(s.n_heads),
        dh_(s.d_head),
        clamp_len_(o.get_int("clamp_len")),
        untie_uv_(o.get_bool("untie_uv")),
        term_a_(o.get_bool("term_a")),
        term_b_(o.get_bool("term_b")),
        term_c_(o.get_bool("term_c")),
        term_d_(o.get_bool("term_d")),
        naive_(o.get_bool("naive")),
        init_std_(o.get_double("init_std")) {
    if (H_ * dh_ != d_)
      throw std::invalid_argument("transformer_xl: d_model must equal n_heads * d_head");
    const std::size_t d = d_, H = H_, dh = dh_;
    if (uses_R())
      for (int n = 0; n < s.n_layers; ++n)
        W_kR_.push_back(arena.add("layer" + std::to_string(n) + ".xl.W_kR", {d, H * dh}, true));
    const int n_uv = untie_uv_ ? s.n_layers : 1;
    for (int n = 0; n < n_uv; ++n) {
      const std::string prefix = untie_uv_ ? "layer" + std::to_string(n) + ".xl." : "xl.";
      if (term_c_) u_.push_back(arena.add(prefix + "u", {H, dh}, false));
      if (term_d_) v_.push_back(arena.add(prefix + "v", {H, dh}, false));
    }
    Rk_.resize(s.n_layers);
    table_of_layer_.resize(s.n_layers);
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    auto normal = [&](Param p) { fill_normal(arena, p, rng, init_std_); };
    for (Param p : W_kR_) normal(p);
    for (std::size_t n = 0; n < std::max(u_.size(), v_.size()); ++n) {
      if (n < u_.size()) normal(u_[n]);
      if (n < v_.size()) normal(v_[n]);
    }
  }

  bool has_content_term() const override { return term_a_; }
  bool has_score_terms() const override { return term_b_ || term_c_ || term_d_; }

  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* scores) override {
    if (naive_) return naive_forward(layer, g, q, k, scale, scores);
    // This call's heads h0 .. h0 + Hc - 1 (all H but in evaluation by chunks of heads); scores
    // [B, Hc, L, K], block b Hc + (h - h0) for head h.
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_, dh = dh_;
    const int h0 = g.head_begin, Hc = g.heads();

    // Positional keys of every distance in the table: Rk = R W_kR   [n, H*d_h]
    Table t;
    ConstMatrixView<T> Rk;  // [n, H d_h], head h = columns [h d_h, (h+1) d_h)
    T* dvec = nullptr;
    if (uses_R()) {
      t = prepare_table(g);
      table_of_layer_[layer] = t;
      ensure_shape(Rk_[layer], {std::size_t(t.n), std::size_t(d)});
      // Rk [n, d] = R [n, d] W_kR [d, H d_h]
      multiply(matrix(Rk_[layer]), matrix(R_), W_kR(layer));
      Rk = matrix(Rk_[layer]);
      // (d) v_h . Rk_h[c]: one value per head and distance   dvec [H, n], rows h0 .. h0+Hc-1
      if (term_d_) {
        dvec = grow(dvec_, std::size_t(H_) * t.n);
        const T* v = arena_.value(v_[uv(layer)]);
        for (int h = h0; h < h0 + Hc; ++h)  // dvec_h [1, n] = v_h [1, d_h] Rk_h^T [d_h, n]
          multiply(row_vector(dvec + long(h) * t.n, t.n), row_vector(v + h * dh, dh),
                   Rk.column_block(h * dh, dh).t());
      }
      if (t.contiguous)
        ensure_shape(pad_, {std::size_t(B) * Hc, rel_shift_padded_size(L, K)});
      else
        grow(gather_, std::size_t(B) * Hc * L * t.n);
    }
    if (term_c_) ensure_shape(cvec_, {std::size_t(B) * Hc, std::size_t(K)});
    const T* u = term_c_ ? arena_.value(u_[uv(layer)]) : nullptr;
    const auto q_all = matrix(q, B * L, d);  // [B L, H d_h]
    const auto k_all = matrix(k, B * K, d);  // [B K, H d_h]

#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * Hc; ++bh) {  // block bh of scores [B, Hc, L, K]
      const int b = bh / Hc, h = h0 + bh % Hc;
      const auto q_bh = q_all.block(b * L, h * dh, L, dh);  // [L, d_h], row stride d
      const auto k_bh = k_all.block(b * K, h * dh, K, dh);  // [K, d_h], row stride d
      T* S = scores + long(bh) * L * K;                     // [L, K]

      if (uses_R() && t.contiguous) {
        T* pad = pad_.data() + long(bh) * rel_shift_padded_size(L, K);
        // BD [L, K] inside pad [L, K+1] (row stride K+1), column c = distance K-1-c
        const auto BD = rel_shift_input_view(pad, L, K);
        add_positional_terms(q_bh, Rk.column_block(h * dh, dh),
                             term_d_ ? dvec + long(h) * K : nullptr, BD);
        rel_shift_zero_pad(pad, L, K);
        const T* shifted = rel_shift_output(pad, L);  // [L, K]: distance i+M-j where j <= i+M
        // Every cell, as the official code does: non-causal cells get garbage here, and only
        // the causal mask of the softmax makes that harmless (see rel_shift.hpp).
        for (long c = 0; c < long(L) * K; ++c) S[c] += scale * shifted[c];
      } else if (uses_R()) {
        // BD [L, n], column c = distance dmax - c
        const auto BD = matrix(gather_.data() + long(bh) * L * t.n, L, t.n);
        add_positional_terms(q_bh, Rk.column_block(h * dh, dh),
                             term_d_ ? dvec + long(h) * t.n : nullptr, BD);
        for (int i = 0; i < L; ++i) {
          const T* BD_i = BD.row(i);
          for (int j = 0; j < K; ++j)
            if (g.visible(i, j)) S[long(i) * K + j] += scale * BD_i[t.column(distance(g, i, j))];
        }
      }
      if (term_c_) {
        // (c) u_h . k_j, one value per key    cvec [K]
        T* c = cvec_.data() + long(bh) * K;
        multiply(row_vector(c, K), row_vector(u + h * dh, dh), k_bh.t());  // [1, K]
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) S[long(i) * K + j] += scale * c[j];
      }
    }
  }

  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dscores, T* dq, T* dk) override {
    require_all_heads(g, "transformer_xl");  // dscores [B, H, L, K]
    if (naive_) return naive_backward(layer, g, q, k, scale, dscores, dq, dk);
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_, H = H_, dh = dh_;

    Table t;
    ConstMatrixView<T> Rk;  // [n, H d_h]
    MatrixView<T> dRk;      // [n, H d_h]
    T* csum = nullptr;
    if (uses_R()) {
      t = prepare_table(g);  // the same table as the forward: recomputed only if it changed
      if (t.n != table_of_layer_[layer].n || t.dmax != table_of_layer_[layer].dmax ||
          Rk_[layer].shape(0) != std::size_t(t.n))
        throw std::logic_error("transformer_xl: scores_backward without the matching forward");
      Rk = matrix(Rk_[layer]);
      ensure_zeros(dRk_, {std::size_t(t.n), std::size_t(d)});
      dRk = matrix(dRk_);
      if (term_d_) {
        csum = grow(csum_, std::size_t(H) * t.n);
        std::fill(csum, csum + std::size_t(H) * t.n, T(0));
      }
      if (t.contiguous)
        ensure_shape(dpad_, {std::size_t(H), rel_shift_padded_size(L, K)});
      else
        grow(dgather_, std::size_t(H) * L * t.n);
    }
    if (term_c_) ensure_shape(srow_, {std::size_t(H), std::size_t(K)});
    const T* u = term_c_ ? arena_.value(u_[uv(layer)]) : nullptr;
    const T* v = term_d_ ? arena_.value(v_[uv(layer)]) : nullptr;
    T* du = term_c_ ? arena_.grad(u_[uv(layer)]) : nullptr;
    T* dv = term_d_ ? arena_.grad(v_[uv(layer)]) : nullptr;
    const auto q_all = matrix(q, B * L, d), dq_all = matrix(dq, B * L, d);  // [B L, H d_h]
    const auto k_all = matrix(k, B * K, d), dk_all = matrix(dk, B * K, d);  // [B K, H d_h]

    // In parallel over heads only: all the writes of head h (dq, dk columns of h, dRk columns
    // of h, du_h, dv_h, its work rows) are disjoint from those of the other heads.
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; ++h) {
      // Head h of Rk and dRk: [n, d_h], row stride d
      const auto Rk_h = uses_R() ? Rk.column_block(h * dh, dh) : ConstMatrixView<T>();
      const auto dRk_h = uses_R() ? dRk.column_block(h * dh, dh) : MatrixView<T>();
      T* csum_h = term_d_ ? csum + long(h) * t.n : nullptr;
      for (int b = 0; b < B; ++b) {
        const T* dS = dscores + (long(b) * H + h) * L * K;  // [L, K], 0 on masked cells
        // Head h of batch row b: [L, d_h] and [K, d_h], row stride d
        const auto q_bh = q_all.block(b * L, h * dh, L, dh);
        const auto k_bh = k_all.block(b * K, h * dh, K, dh);
        const auto dq_bh = dq_all.block(b * L, h * dh, L, dh);
        const auto dk_bh = dk_all.block(b * K, h * dh, K, dh);

        if (uses_R()) {
          // dBD [L, n]: the gradient of the per-distance scores.
          ConstMatrixView<T> dBD;
          if (t.contiguous) {
            T* dpad = dpad_.data() + long(h) * rel_shift_padded_size(L, K);
            rel_shift_backward(dS, L, K, dpad);  // causal cells only
            dBD = rel_shift_input_view(dpad, L, K);  // row stride K+1
          } else {
            T* dg = dgather_.data() + long(h) * L * t.n;
            std::fill(dg, dg + long(L) * t.n, T(0));
            for (int i = 0; i < L; ++i)
              for (int j = 0; j < K; ++j)
                if (g.visible(i, j))
                  dg[long(i) * t.n + t.column(distance(g, i, j))] += dS[long(i) * K + j];
            dBD = matrix(dg, L, t.n);
          }
          if (term_b_) {
            // (b) BD = q_h Rk_h^T:  dq_h += scale * dBD Rk_h,  dRk_h += scale * dBD^T q_h
            multiply(dq_bh, dBD, Rk_h, scale, T(1));         // [L, d_h] = [L, n] [n, d_h]
            multiply(dRk_h, dBD.t(), q_bh, scale, T(1));     // [n, d_h] = [n, L] [L, d_h]
          }
          if (term_d_)  // (d) BD[i][c] += dvec_h[c]: the gradient of dvec is a column sum
            for (int i = 0; i < L; ++i) {
              const T* dBD_i = dBD.row(i);
              for (int c = 0; c < t.n; ++c) csum_h[c] += dBD_i[c];
            }
        }
        if (term_c_) {
          // (c) S[i][j] += scale * u_h . k_j:  s_j = sum_i dS_ij,
          //     dk_j += scale * s_j u_h,  du_h += scale * sum_j s_j k_j
          T* s = srow_.data() + long(h) * K;
          std::fill(s, s + K, T(0));
          for (int i = 0; i < L; ++i)
            for (int j = 0; j < K; ++j) s[j] += dS[long(i) * K + j];
          //     dk_h [K, d_h] += scale s [K, 1] u_h [1, d_h]
          //     du_h [1, d_h] += scale s^T [1, K] k_h [K, d_h]
          multiply(dk_bh, column_vector(s, K), row_vector(u + h * dh, dh), scale, T(1));
          multiply(row_vector(du + h * dh, dh), row_vector(s, K), k_bh, scale, T(1));
        }
      }
      if (term_d_) {
        // (d) dvec_h = Rk_h v_h:  dv_h += scale * csum^T Rk_h,  dRk_h += scale * csum v_h^T
        //     [1, d_h] = [1, n] [n, d_h],     [n, d_h] = [n, 1] [1, d_h]
        multiply(row_vector(dv + h * dh, dh), row_vector(csum_h, t.n), Rk_h, scale, T(1));
        multiply(dRk_h, column_vector(csum_h, t.n), row_vector(v + h * dh, dh), scale, T(1));
      }
    }
    // Rk = R W_kR:  dW_kR += R^T dRk   [d, n] x [n, H*d_h]
    if (uses_R()) multiply(W_kR_grad(layer), matrix(R_).t(), dRk, T(1), T(1));
  }

 private:
  // The distances a table covers: column c holds (clamped) distance dmax - c, c in [0, n).
  // Contiguous positions: dmax = K - 1, n = K, and the rel-shift places the columns.
  struct Table {
    bool contiguous = false;
    std::int64_t dmax = 0;
    int n = 0;
    int column(std::int64_t dist) const { return int(dmax - dist); }
  };

  bool uses_R() const { return term_b_ || term_d_; }
  int uv(int layer) const { return untie_uv_ ? layer : 0; }

  std::int64_t clamp(std::int64_t dist) const {
    return clamp_len_ > 0 ? std::min<std::int64_t>(dist, clamp_len_) : dist;
  }
  // The clamped distance from query i to key j, from the positions.
  std::int64_t distance(const AttentionGeometry& g, int i, int j) const {
    return clamp(g.q_pos[i] - g.k_pos[j]);
  }

  // Query i at s + i and key j at s - M + j, for some s: then distance(i, j) = i + M - j.
  static bool contiguous(const AttentionGeometry& g) {
    const std::int64_t s = g.q_pos[0];
    for (int i = 0; i < g.q_len; ++i)
      if (g.q_pos[i] != s + i) return false;
    for (int j = 0; j < g.k_len; ++j)
      if (g.k_pos[j] != s - g.mem_len + j) return false;
    return g.k_len >= g.q_len;
  }

  // Chooses the table for this geometry and (re)builds R [n, d] if its distances changed.
  Table prepare_table(const AttentionGeometry& g) {
    Table t;
    t.contiguous = contiguous(g);
    std::int64_t dmin = 0;
    if (t.contiguous) {
      t.dmax = g.k_len - 1;  // pos_seq = arange(klen-1, -1, -1)
      dmin = 0;
    } else {
      bool any = false;
      for (int i = 0; i < g.q_len; ++i)
        for (int j = 0; j < g.k_len; ++j)
          if (g.visible(i, j)) {
            const std::int64_t e = distance(g, i, j);
            t.dmax = any ? std::max(t.dmax, e) : e;
            dmin = any ? std::min(dmin, e) : e;
            any = true;
          }
    }
    t.n = int(t.dmax - dmin + 1);
    // Row c of R is the sinusoid of distance clamp(dmax - c). With contiguous positions and
    // clamp_len, the rows beyond clamp_len repeat R[clamp_len] (the official clamp of pos_seq).
    table_dist_.resize(t.n);  // std::vector: keeps its capacity
    bool same = table_valid_ && R_.shape(0) == std::size_t(t.n);
    for (int c = 0; c < t.n; ++c) {
      const std::int64_t e = clamp(t.dmax - c);
      same = same && table_key_[c] == e;
      table_dist_[c] = e;
    }
    if (!same) {
      ensure_shape(R_, {std::size_t(t.n), std::size_t(d_)});
      sinusoid_table(table_dist_.data(), t.n, d_, R_.data());
      table_key_ = table_dist_;
      table_valid_ = true;
    }
    return t;
  }

  // BD [rows, n] = q_h Rk_h^T (term b) + dvec_h (term d, broadcast over rows).
  // q_h [rows, d_h], Rk_h [n, d_h], dvec_h [n]; BD may have any row stride.
  void add_positional_terms(ConstMatrixView<T> q_h, ConstMatrixView<T> Rk_h, const T* dvec_h,
                            MatrixView<T> BD) const {
    const int rows = BD.rows(), n = BD.cols();
    if (term_b_)  // (b) q_i . Rk_h[c]
      multiply(BD, q_h, Rk_h.t());
    else
      for (int i = 0; i < rows; ++i) std::fill(BD.row(i), BD.row(i) + n, T(0));
    if (dvec_h)  // (d) v_h . Rk_h[c]
      for (int i = 0; i < rows; ++i) {
        T* BD_i = BD.row(i);
        for (int c = 0; c < n; ++c) BD_i[c] += dvec_h[c];
      }
  }

  // W_kR of a layer and its gradient, [d, H d_h].
  ConstMatrixView<T> W_kR(int layer) const { return matrix(arena_.value(W_kR_[layer]), d_, d_); }
  MatrixView<T> W_kR_grad(int layer) { return matrix(arena_.grad(W_kR_[layer]), d_, d_); }

  // ---- The naive reference: every visible pair on its own, from the positions ----

  // r [H*d_h] = W_kR^T R_dist (all heads), Rrow [d] = the sinusoid of dist.
  void positional_key(int layer, std::int64_t dist, T* Rrow, T* r) const {
    sinusoid_table(&dist, 1, d_, Rrow);
    multiply(row_vector(r, d_), row_vector(Rrow, d_), W_kR(layer));  // [1, d]
  }

  static T dot(const T* a, const T* b, int n) {
    T s = 0;
    for (int t = 0; t < n; ++t) s += a[t] * b[t];
    return s;
  }

  // scores [B, Hc, L, K]: block (b, h - h0) for the call's heads h = h0 .. h0 + Hc - 1.
  void naive_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                     T* scores) {
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_, dh = dh_, Hc = g.heads();
    std::vector<T> Rrow(d), r(d);
    const T* u = term_c_ ? arena_.value(u_[uv(layer)]) : nullptr;
    const T* v = term_d_ ? arena_.value(v_[uv(layer)]) : nullptr;
    for (int b = 0; b < B; ++b)
      for (int h = g.head_begin; h < g.head_end(); ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const T* q_i = q + (long(b) * L + i) * d + h * dh;
            const T* k_j = k + (long(b) * K + j) * d + h * dh;
            if (uses_R()) positional_key(layer, distance(g, i, j), Rrow.data(), r.data());
            const T* r_h = r.data() + h * dh;  // W_kR R_{i-j}, head h
            T a = 0;
            if (term_b_) a += dot(q_i, r_h, dh);         // (b)
            if (term_c_) a += dot(u + h * dh, k_j, dh);  // (c)
            if (term_d_) a += dot(v + h * dh, r_h, dh);  // (d)
            scores[((long(b) * Hc + h - g.head_begin) * L + i) * K + j] += scale * a;
          }
  }

  void naive_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      const T* dscores, T* dq, T* dk) {
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_, H = H_, dh = dh_;
    std::vector<T> Rrow(d), r(d), dr(dh);
    const T* u = term_c_ ? arena_.value(u_[uv(layer)]) : nullptr;
    const T* v = term_d_ ? arena_.value(v_[uv(layer)]) : nullptr;
    T* du = term_c_ ? arena_.grad(u_[uv(layer)]) : nullptr;
    T* dv = term_d_ ? arena_.grad(v_[uv(layer)]) : nullptr;
    T* dW = uses_R() ? arena_.grad(W_kR_[layer]) : nullptr;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const T gr = scale * dscores[((long(b) * H + h) * L + i) * K + j];
            const T* q_i = q + (long(b) * L + i) * d + h * dh;
            const T* k_j = k + (long(b) * K + j) * d + h * dh;
            T* dq_i = dq + (long(b) * L + i) * d + h * dh;
            T* dk_j = dk + (long(b) * K + j) * d + h * dh;
            if (uses_R()) positional_key(layer, distance(g, i, j), Rrow.data(), r.data());
            const T* r_h = r.data() + h * dh;
            std::fill(dr.begin(), dr.end(), T(0));
            for (int t = 0; t < dh; ++t) {
              if (term_b_) {  // (b) q_i . r_h
                dq_i[t] += gr * r_h[t];
                dr[t] += gr * q_i[t];
              }
              if (term_c_) {  // (c) u_h . k_j
                dk_j[t] += gr * u[h * dh + t];
                du[h * dh + t] += gr * k_j[t];
              }
              if (term_d_) {  // (d) v_h . r_h
                dv[h * dh + t] += gr * r_h[t];
                dr[t] += gr * v[h * dh + t];
              }
            }
            // r_h = (R_dist W_kR)[head h columns]:  dW_kR[m][h*dh + t] += R_dist[m] dr[t]
            if (uses_R())
              for (int m = 0; m < d; ++m)
                for (int t = 0; t < dh; ++t) dW[long(m) * d + h * dh + t] += Rrow[m] * dr[t];
          }
  }

  ParameterArena<T>& arena_;
  int d_, H_, dh_;
  std::int64_t clamp_len_;
  bool untie_uv_, term_a_, term_b_, term_c_, term_d_, naive_;
  double init_std_;
  std::vector<Param> W_kR_, u_, v_;

  // The sinusoid table of the current distances and the distances it was built for.
  xt::xtensor<T, 2> R_;
  std::vector<std::int64_t> table_dist_, table_key_;
  bool table_valid_ = false;
  // Per layer, from the forward: Rk = R W_kR [n, d] and its table.
  std::vector<xt::xtensor<T, 2>> Rk_;
  std::vector<Table> table_of_layer_;
  // Work buffers.
  xt::xtensor<T, 2> pad_, dpad_, cvec_, srow_, dRk_;
  xt::xtensor<T, 1> dvec_, gather_, dgather_, csum_;
};

}  // namespace

EncodingInfo transformer_xl_encoding_info() {
  return {
      "transformer_xl",
      EncodingFamily::relative,
      "Transformer-XL: q.k + q.W_kR R_{i-j} + u.k + v.W_kR R_{i-j}, sinusoid R, rel-shift",
      "Dai et al. 2019",
      {
          {"clamp_len", std::int64_t(0), "distances above this use R[clamp_len] (0 = no clamp)", 0},
          {"untie_uv", false, "one u, v per layer instead of one pair shared by all layers"},
          {"term_a", true, "content term q_i.k_j (false: the attention skips q.k)"},
          {"term_b", true, "content-dependent positional term q_i.W_kR R_{i-j}"},
          {"term_c", true, "global content bias u.k_j"},
          {"term_d", true, "global positional bias v.W_kR R_{i-j}"},
          {"naive", false, "reference path: W_kR R_{i-j} for every (i, j) pair (tests)"},
          {"init_std", 0.02, "std of the N(0, std) init of W_kR, u and v", 0.0},
      },
      factory_float<TransformerXL>(),
      factory_double<TransformerXL>()};
}

}  // namespace poslab
