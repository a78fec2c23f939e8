// Relative position representations: Shaw, Uszkoreit & Vaswani (2018), "Self-Attention with
// Relative Position Representations", NAACL.
//
// The idea: instead of adding a position vector to the input, tell every (query, key) pair how
// far apart they are. Each pair (i, j) gets two learned vectors, one added to the key and one
// to the value (paper, eqs. 3 and 4; d_z = d_h, one head):
//
//   e_ij  = q_i . (k_j + a^K_ij) * scale                   scale = 1/sqrt(d_h), both terms
//   z_i   = sum_j alpha_ij (v_j + a^V_ij)                  alpha = softmax_j(e)
//
// and the vectors depend only on the clipped distance between the two positions:
//
//   a^K_ij = w^K[clip(j - i, k)]     a^V_ij = w^V[clip(j - i, k)]     clip(x, k) = max(-k, min(k,
//   x))
//
// The clip distance k (option `clip_k`) is the furthest distance the model can tell apart: all
// keys k or more positions back share one vector. The paper finds almost nothing to gain past
// k = 2 on translation (BLEU 12.5 at k = 0, i.e. no position information at all, 25.8 at k = 2).
//
// Causal models only ever look back, j - i <= 0, so of the paper's 2k + 1 vectors we store the
// k + 1 that can be used, indexed by the *label*
//
//   dist_ij  = q_pos[i] - k_pos[j]   (>= 0 on every visible cell)
//   label_ij = min(dist_ij, k)       row 0 = "same position", ..., row k = "k or more back".
//
// Distances come from positions, not from array indices, so memory rows (Transformer-XL) and
// any position offset are handled for free, and shifting every position leaves the output
// unchanged: the encoding is relative. Masked cells (!g.visible(i, j)) are skipped everywhere;
// their distance may be negative and must never index a table.
//
// Parameters, per layer: w^K and w^V, each [k+1, d_h] shared by the heads (the paper's setup and
// tensor2tensor's), or [H, k+1, d_h] with `per_head`. Option `keys` / `values` switch either
// table off (the paper's ablation: keys matter more than values).
//
// How to compute it. The textbook way (option `naive`, kept as the reference the tests compare
// against) builds a^K_ij for every pair: O(B H L K d_h) work, and an [L, K, d_h] tensor if it is
// materialised. The efficient way notices that a^K_ij takes only k + 1 distinct values, so the
// term splits into a small matmul and a gather:
//
//   G[i, l]      = scale * q_i . w^K[l]                    [L, k+1]  one gemm, no [L, K, d_h]
//   e_ij        += G[i, label_ij]                          gather
//
// and the value term into a bucketing and a small matmul:
//
//   Pb[i, l]     = sum_{j : label_ij = l} alpha_ij         [L, k+1]  bucket the weights
//   z_i         += sum_l Pb[i, l] w^V[l]                   [L, d_h]  one gemm
//
// That is O(L (k+1) d_h) multiply-adds plus O(L K) for the gather, instead of O(L K d_h).
// Backward runs the same steps in reverse: scatter dS into dG by label, then two gemms (dq and
// dw^K); for values, dPb = dz w^V^T, gather it back into dP, and dw^V += Pb^T dz.
//
// A table shared by the heads sees q (and ctx) [B, L, H*d_h] as one matrix [B*L*H, d_h], so each
// of those gemms is a single BLAS call for the whole layer; a per-head table sees head h as the
// column slice [B*L, d_h] with leading dimension H*d_h, one call per head. The small matrices G,
// Pb are laid out [B*L*H, k+1] (row = (b*L + i)*H + h) so that both views work on them.
//
// A call for heads h0 .. h0 + Hc - 1 only (evaluation in chunks of heads, encoding.hpp): G and Pb
// are [B*L*Hc, k+1] (row (b*L + i)*Hc + h - h0), and the products run one per head of the range
// (those heads' columns of q are not [B*L*Hc, d_h] rows), each with head h's table (per_head) or
// the shared one.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "core/init_normal.hpp"
#include "core/ordered_sums.hpp"
#include "encodings/geometry_key.hpp"
#include "encodings/registry.hpp"

namespace poslab {

namespace {

// label = min(q_pos - k_pos, k) for a visible cell. A visible key in the future of its query
// would mean the positions and the causal mask disagree: refuse rather than guess.
inline int relative_label(std::int64_t dist, int clip_k) {
  if (dist < 0)
    throw std::invalid_argument(
        "shaw: a visible key has a larger position than its query (positions must follow the "
        "causal mask)");
  return dist < clip_k ? int(dist) : clip_k;
}

template <class T>
class Shaw : public Encoding<T> {
 public:
  Shaw(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        H_(s.n_heads),
        dh_(s.d_head),
        n_layers_(s.n_layers),
        k_(int(o.get_int("clip_k"))),
        keys_(o.get_bool("keys")),
        values_(o.get_bool("values")),
        per_head_(o.get_bool("per_head")),
        naive_(o.get_bool("naive")),
        init_std_(o.get_double("init_std")) {
    if (o.get_int("clip_k") < 0) throw std::invalid_argument("shaw: clip_k must be >= 0");
    if (H_ <= 0 || dh_ <= 0) throw std::invalid_argument("shaw: needs n_heads, d_head > 0");
    // One w^K and one w^V per layer: [k+1, d_h], or [H, k+1, d_h] per head. No weight decay.
    std::vector<std::size_t> shape = {std::size_t(k_ + 1), std::size_t(dh_)};
    if (per_head_) shape.insert(shape.begin(), std::size_t(H_));
    for (int n = 0; n < s.n_layers; ++n) {
      const std::string prefix = "layer" + std::to_string(n) + ".shaw.";
      if (keys_) w_K_.push_back(arena.add(prefix + "w_K", shape, false));
      if (values_) w_V_.push_back(arena.add(prefix + "w_V", shape, false));
    }
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    for (const auto* tables : {&w_K_, &w_V_})
      for (Param p : *tables) fill_normal(arena, p, rng, init_std_);
  }

  bool has_score_terms() const override { return keys_; }
  bool has_value_terms() const override { return values_; }

  // ---------------------------------------------------------------- keys: e_ij += q_i . a^K_ij
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* /*k*/,
                      T scale, T* scores) override {
    check(layer, g);
    if (naive_) return naive_scores_forward(layer, g, q, scale, scores);
    const int used = compute_labels(g);  // table rows actually reached: min(k, max dist) + 1
    const int B = g.batch, L = g.q_len, Hc = g.heads();
    ensure_shape(G_, {std::size_t(B) * L * Hc, std::size_t(used)});

    // G = scale * q w^K^T      [B*L*Hc, used] = [B*L*Hc, d_h] . [d_h, used]   (or per head)
    for (int t = group_begin(g); t < group_end(g); ++t)
      multiply(g_group(g, G_.data(), used, t), x_group(g, q, t),
               table_rows(w_K_[layer], t, used).t(), scale);

    // scores[b, h - h0, i, j] += G[(b L + i) Hc + h - h0, label_ij]      (visible cells only)
    gather_by_label(g, G_.data(), used, scores);
  }

  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* /*k*/,
                       T scale, const T* dscores, T* dq, T* /*dk: a^K does not touch k*/) override {
    check(layer, g);
    require_all_heads(g, "shaw");
    if (naive_) return naive_scores_backward(layer, g, q, scale, dscores, dq);
    const int used = compute_labels(g);
    const int B = g.batch, L = g.q_len, H = H_;
    ensure_zeros(G_, {std::size_t(B) * L * H, std::size_t(used)});  // holds dG here

    // dG[(b L + i) H + h, label_ij] += dS[b, h, i, j]      (scatter)
    scatter_by_label(g, dscores, used, G_.data());
    // G = scale * q w^K^T:   dq += scale * dG w^K      [B*L*H, d_h] = [B*L*H, used] . [used, d_h]
    //                        dw^K += scale * dG^T q    [used, d_h]  = [used, B*L*H] . [B*L*H, d_h]
    // The groups run one after another: a shared table's gradient is one call, and a per-head
    // table's calls write disjoint blocks, so nothing races.
    for (int t = group_begin(g); t < group_end(g); ++t) {
      const auto dG = g_group(g, std::as_const(G_).data(), used, t);
      multiply(x_group(g, dq, t), dG, table_rows(w_K_[layer], t, used), scale, T(1));
      multiply(table_grad_rows(w_K_[layer], t, used), dG.t(), x_group(g, q, t), scale, T(1));
    }
  }

  // -------------------------------------------------------- values: z_i += sum_j P_ij a^V_ij
  void values_forward(int layer, const AttentionGeometry& g, const T* probs, T* ctx) override {
    check(layer, g);
    if (naive_) return naive_values_forward(layer, g, probs, ctx);
    const int used = compute_labels(g);
    bucket_probs(g, probs, used);  // Pb [B*L*Hc, used]
    // ctx += Pb w^V      [B*L*Hc, d_h] = [B*L*Hc, used] . [used, d_h]   (or per head)
    for (int t = group_begin(g); t < group_end(g); ++t)
      multiply(x_group(g, ctx, t), g_group(g, std::as_const(Pb_).data(), used, t),
               table_rows(w_V_[layer], t, used), T(1), T(1));
  }

  void values_backward(int layer, const AttentionGeometry& g, const T* probs, const T* dctx,
                       T* dprobs) override {
    check(layer, g);
    require_all_heads(g, "shaw");
    if (naive_) return naive_values_backward(layer, g, probs, dctx, dprobs);
    const int used = compute_labels(g);
    const int B = g.batch, L = g.q_len, H = H_;
    bucket_probs(g, probs, used);  // recomputed: cheaper than caching one per layer
    ensure_shape(dPb_, {std::size_t(B) * L * H, std::size_t(used)});
    for (int t = group_begin(g); t < group_end(g); ++t) {
      const auto dctx_t = x_group(g, dctx, t);
      // dPb = dctx w^V^T     [B*L*H, used] = [B*L*H, d_h] . [d_h, used]
      multiply(g_group(g, dPb_.data(), used, t), dctx_t, table_rows(w_V_[layer], t, used).t());
      // dw^V += Pb^T dctx    [used, d_h] = [used, B*L*H] . [B*L*H, d_h]
      multiply(table_grad_rows(w_V_[layer], t, used),
               g_group(g, std::as_const(Pb_).data(), used, t).t(), dctx_t, T(1), T(1));
    }
    // dP[b, h, i, j] += dPb[(b L + i) H + h, label_ij]     (gather, visible cells only)
    gather_by_label(g, dPb_.data(), used, dprobs);
  }

 private:
  // How the products of a call for heads h0 .. h0 + Hc - 1 see the tensors. A table shared by
  // the heads, all heads: one group (t = 0), q/ctx as [B*L*H, d_h] (row stride d_h), G/Pb as
  // [B*L*H, used]. Per-head table, or a range of heads: one group per head t = h0 .. h0+Hc-1,
  // the column block q[:, t*d_h : (t+1)*d_h] of [B*L, H*d_h] and G[:, t - h0, :] of
  // [B*L, Hc*used].
  bool by_head(const AttentionGeometry& g) const { return per_head_ || !g.all_heads(); }
  int group_begin(const AttentionGeometry& g) const { return by_head(g) ? g.head_begin : 0; }
  int group_end(const AttentionGeometry& g) const { return by_head(g) ? g.head_end() : 1; }
  // Group t of x = q, ctx or their gradients [B L, H d_h]:  [B L H, d_h], or [B L, d_h] with
  // row stride H d_h.
  template <class X>
  MatrixView<X> x_group(const AttentionGeometry& g, X* x, int t) const {
    const int BL = g.batch * g.q_len;
    if (by_head(g)) return matrix(x, BL, H_ * dh_).column_block(t * dh_, dh_);
    return matrix(x, BL * H_, dh_);
  }
  // Group t of G, Pb or dPb [B L Hc, used]:  all of it, or [B L, used] with row stride Hc used.
  template <class X>
  MatrixView<X> g_group(const AttentionGeometry& g, X* x, int used, int t) const {
    const int BL = g.batch * g.q_len, Hc = g.heads();
    if (by_head(g)) return matrix(x, BL, Hc * used).column_block((t - g.head_begin) * used, used);
    return matrix(x, BL * H_, used);
  }

  // The table of head h (per_head: [H, k+1, d_h]; otherwise the only one): [k+1, d_h].
  int table_of(int h) const { return per_head_ ? h : 0; }
  const T* table(Param p, int h) const {
    return arena_.value(p) + long(table_of(h)) * (k_ + 1) * dh_;
  }
  T* table_grad(Param p, int h) { return arena_.grad(p) + long(table_of(h)) * (k_ + 1) * dh_; }
  // The first `used` rows of group t's table (the labels that occur), [used, d_h], and their
  // gradient. (A group is one head, or all heads of a shared table with t = 0.)
  ConstMatrixView<T> table_rows(Param p, int t, int used) const {
    return matrix(arena_.value(p), tables() * (k_ + 1), dh_).row_block(table_of(t) * (k_ + 1),
                                                                         used);
  }
  MatrixView<T> table_grad_rows(Param p, int t, int used) {
    return matrix(arena_.grad(p), tables() * (k_ + 1), dh_).row_block(table_of(t) * (k_ + 1),
                                                                        used);
  }
  int tables() const { return per_head_ ? H_ : 1; }

  void check(int layer, const AttentionGeometry& g) const {
    if (g.n_heads != H_ || g.d_head != dh_)
      throw std::invalid_argument("shaw: geometry does not match the shape it was built for");
    if (layer < 0 || layer >= n_layers_) throw std::out_of_range("shaw: no such layer");
  }

  // labels_[i, j] = min(q_pos[i] - k_pos[j], k) on visible cells, -1 on masked ones   [L, K]
  // (the same for every batch row and head). Returns the number of table rows used, 1 + the
  // largest label, so that the gemms skip rows no pair reaches (k larger than any distance).
  // A training step asks four times per layer (keys and values, forward and backward) with the
  // same mask and positions: the labels are kept and rebuilt only when those change.
  // Also the end of each row's clipped prefix, clip_end_[i]: the visible keys lo, lo + 1, ...
  // that are k or more positions back (label k) come first in a row whose key positions
  // increase; the rest of the row, the last k keys, has the other labels.
  int compute_labels(const AttentionGeometry& g) {
    if (labels_key_.same_as_last(g)) return labels_used_;
    const int L = g.q_len, K = g.k_len;
    labels_.resize(std::size_t(L) * K);
    clip_end_.resize(L);
    int top = 0;
    for (int i = 0; i < L; ++i) {
      for (int j = 0; j < K; ++j) {
        int& lab = labels_[std::size_t(i) * K + j];
        lab = g.visible(i, j) ? relative_label(g.q_pos[i] - g.k_pos[j], k_) : -1;
        top = std::max(top, lab);
      }
      int end = g.first_visible(i);
      while (end <= g.last_visible(i) && labels_[std::size_t(i) * K + end] == k_) ++end;
      clip_end_[i] = end;
    }
    return labels_used_ = top + 1;
  }

  // row[label_j] += x[j] over the visible keys j = start..hi of one query row, where `far`
  // already holds the sum of x over the clipped prefix lo..start-1 (label k). In a long row most
  // keys sit in the clipped bucket k; that bucket is summed in a register, because adding into
  // the same memory slot over and over makes every add wait for the previous store (about 3x
  // slower).
  void scatter_row(const int* lab, const T* x, int start, int hi, int used, T* row, T far) const {
    for (int j = start; j <= hi; ++j) {
      const int l = lab[j];
      if (l == k_)
        far += x[j];
      else
        row[l] += x[j];
    }
    if (k_ < used) row[k_] += far;
  }

  // x[b, c, i, j] += M[(b L + i) Hc + c, label_ij] on visible cells, c = h - h0 for the call's
  // heads; x [B, Hc, L, K], M [B*L*Hc, used] (G into the scores, dPb into dprobs).
  void gather_by_label(const AttentionGeometry& g, const T* M, int used, T* x) const {
    const int B = g.batch, L = g.q_len, K = g.k_len, Hc = g.heads();
#pragma omp parallel for schedule(static)
    for (int bc = 0; bc < B * Hc; ++bc) {
      const int b = bc / Hc, c = bc % Hc;
      for (int i = 0; i < L; ++i) {
        const T* Mi = M + (long(b * L + i) * Hc + c) * used;
        const int* lab = labels_.data() + long(i) * K;
        T* xi = x + (long(bc) * L + i) * K;
        const int lo = g.first_visible(i), hi = g.last_visible(i);  // the labelled keys
        const T clipped = Mi[std::min(k_, used - 1)];  // label k (when the prefix is not empty)
        for (int j = lo; j < clip_end_[i]; ++j) xi[j] += clipped;  // the clipped prefix
        for (int j = clip_end_[i]; j <= hi; ++j) xi[j] += Mi[lab[j]];
      }
    }
  }

  // The transpose: M[(b L + i) Hc + c, label_ij] += x[b, c, i, j] on visible cells (dS into dG,
  // the attention weights into Pb). Each (b, c) writes its own rows of M: no races.
  void scatter_by_label(const AttentionGeometry& g, const T* x, int used, T* M) const {
    const int B = g.batch, L = g.q_len, K = g.k_len, Hc = g.heads();
    // The clipped prefixes are summed kRows rows at a time (core/ordered_sums.hpp): in order,
    // as the plain loop, with kRows chains of adds side by side.
    constexpr int kRows = 8;
#pragma omp parallel for schedule(static)
    for (int bc = 0; bc < B * Hc; ++bc) {
      const int b = bc / Hc, c = bc % Hc;
      for (int i0 = 0; i0 < L; i0 += kRows) {
        const T* rows[kRows];
        int begin[kRows], end[kRows];
        T far[kRows];
        for (int r = 0; r < kRows; ++r) {
          const int i = i0 + r;
          rows[r] = x + (long(bc) * L + std::min(i, L - 1)) * K;
          begin[r] = i < L ? g.first_visible(i) : 0;
          end[r] = i < L ? clip_end_[i] : 0;  // rows past L: empty
        }
        ordered_row_sums(rows, begin, end, far);
        for (int i = i0; i < std::min(L, i0 + kRows); ++i) {
          T* Mi = M + (long(b * L + i) * Hc + c) * used;
          scatter_row(labels_.data() + long(i) * K, rows[i - i0], clip_end_[i], g.last_visible(i),
                      used, Mi, far[i - i0]);
        }
      }
    }
  }

  // Pb[(b L + i) Hc + c, l] = sum_{j : label_ij = l} P[b, c, i, j]      [B*L*Hc, used]
  void bucket_probs(const AttentionGeometry& g, const T* probs, int used) {
    ensure_zeros(Pb_, {std::size_t(g.batch) * g.q_len * g.heads(), std::size_t(used)});
    scatter_by_label(g, probs, used, Pb_.data());
  }

  // ------------------------------------------------------------------------------------------
  // The naive reference: the paper's equations pair by pair, a^K_ij and a^V_ij looked up for
  // every visible (i, j). O(B H L K d_h); only for tests and for reading.
  // ------------------------------------------------------------------------------------------

  // Calls f(h, cell, x, row) for every visible (b, h, i, j) of the call's heads h0 .. h0+Hc-1,
  // in order: cell = the index of (b, h - h0, i, j) in [B, Hc, L, K], x = the offset of head h
  // of row (b, i) in q / ctx [B, L, H*d_h], row = the offset of a_ij's row, label_ij * d_h, in
  // head h's table.
  template <class F>
  void for_each_visible_pair(const AttentionGeometry& g, F&& f) const {
    const int B = g.batch, L = g.q_len, K = g.k_len, Hc = g.heads(), d = H_ * dh_;
    for (int b = 0; b < B; ++b)
      for (int h = g.head_begin; h < g.head_end(); ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            f(h, ((long(b) * Hc + h - g.head_begin) * L + i) * K + j, long(b * L + i) * d + h * dh_,
              long(relative_label(g.q_pos[i] - g.k_pos[j], k_)) * dh_);
          }
  }

  // e_ij += scale * q_i . a^K_ij
  void naive_scores_forward(int layer, const AttentionGeometry& g, const T* q, T scale,
                            T* scores) const {
    for_each_visible_pair(g, [&](int h, long cell, long x, long row) {
      const T* aK = table(w_K_[layer], h) + row;
      const T* qi = q + x;
      T e = 0;
      for (int c = 0; c < dh_; ++c) e += qi[c] * aK[c];
      scores[cell] += scale * e;
    });
  }

  // dq_i += scale * dS_ij a^K_ij,   da^K_ij += scale * dS_ij q_i
  void naive_scores_backward(int layer, const AttentionGeometry& g, const T* q, T scale,
                             const T* dscores, T* dq) {
    for_each_visible_pair(g, [&](int h, long cell, long x, long row) {
      const T* aK = table(w_K_[layer], h) + row;
      T* daK = table_grad(w_K_[layer], h) + row;
      const T ds = scale * dscores[cell];
      for (int c = 0; c < dh_; ++c) {
        dq[x + c] += ds * aK[c];
        daK[c] += ds * q[x + c];
      }
    });
  }

  // z_i += sum_j P_ij a^V_ij
  void naive_values_forward(int layer, const AttentionGeometry& g, const T* probs,
                            T* ctx) const {
    for_each_visible_pair(g, [&](int h, long cell, long x, long row) {
      const T* aV = table(w_V_[layer], h) + row;
      const T p = probs[cell];
      T* zi = ctx + x;
      for (int c = 0; c < dh_; ++c) zi[c] += p * aV[c];
    });
  }

  // dP_ij += dz_i . a^V_ij,   da^V_ij += P_ij dz_i
  void naive_values_backward(int layer, const AttentionGeometry& g, const T* probs,
                             const T* dctx, T* dprobs) {
    for_each_visible_pair(g, [&](int h, long cell, long x, long row) {
      const T* aV = table(w_V_[layer], h) + row;
      T* daV = table_grad(w_V_[layer], h) + row;
      const T* dzi = dctx + x;
      T dp = 0;
      for (int c = 0; c < dh_; ++c) {
        dp += dzi[c] * aV[c];
        daV[c] += probs[cell] * dzi[c];
      }
      dprobs[cell] += dp;
    });
  }

  ParameterArena<T>& arena_;
  int H_, dh_, n_layers_, k_;
  bool keys_, values_, per_head_, naive_;
  double init_std_;
  std::vector<Param> w_K_, w_V_;  // one per layer (empty if that term is off)

  // Work buffers, reshaped only when the geometry changes (nothing allocated in a training step
  // after the first). They hold nothing between calls, so one set serves every layer.
  std::vector<int> labels_;    // [L, K]
  std::vector<int> clip_end_;  // [L]: end of each row's prefix of keys k or more back
  GeometryKey labels_key_;     // the mask and positions labels_ was built for
  int labels_used_ = 0;        // and its number of table rows used
  xt::xtensor<T, 2> G_;        // [B*L*H, used]: G in forward, dG in backward
  xt::xtensor<T, 2> Pb_;       // [B*L*H, used]: bucketed attention weights
  xt::xtensor<T, 2> dPb_;      // [B*L*H, used]
};

}  // namespace

EncodingInfo shaw_encoding_info() {
  return {"shaw",
          EncodingFamily::relative,
          "Relative position representations: learned vectors a^K, a^V per clipped distance, "
          "added to keys and values",
          "Shaw et al. 2018",
          {
              {"clip_k", std::int64_t(16),
               "clip distance k: keys k or more positions back share one vector (k + 1 rows per "
               "table in a causal model; the paper finds little gain past k = 2)",
               0},
              {"keys", true, "use a^K: add w^K[label] to the keys in the score (the paper's a^K_ij)"},
              {"values", true, "use a^V: add w^V[label] to the values in the output (a^V_ij)"},
              {"per_head", false,
               "one table per head [H, k+1, d_h] instead of one per layer shared by the heads"},
              {"naive", false,
               "use the naive pair-by-pair reference implementation (slow; for tests)"},
              {"init_std", 0.02, "standard deviation of the N(0, std) initialisation of the tables",
               0},
          },
          factory_float<Shaw>(),
          factory_double<Shaw>()};
}

}  // namespace poslab
