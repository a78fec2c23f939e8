// DeBERTa's disentangled attention: He, Liu, Gao & Chen (2021), "DeBERTa: Decoding-enhanced
// BERT with Disentangled Attention", ICLR, section 3.1.
//
// Each token is represented by two vectors, its content and its relative position, and the score
// sums the cross terms between them (the position-to-position term is dropped: with relative
// positions it carries no information about the pair):
//
//   A_ij = Q^c_i . K^c_j                    content-to-content   (computed by Attention)
//        + Q^c_i . K^r[delta(i, j)]         content-to-position  (c2p)
//        + K^c_j . Q^r[delta(j, i)]         position-to-content  (p2c)
//   S_ij = A_ij / sqrt(3 d_h)               three terms summed, so 3x the variance (score_scale)
//
// with Q^c = x W_q, K^c = x W_k (the attention's q and k) and the relative embeddings
//
//   Q^r = P W_qr,  K^r = P W_kr      P [2k, d] shared by all layers; W_qr, W_kr [d, d] per layer
//
// and the bucketed relative distance (positions i = q_pos[i], j = k_pos[j], memory included):
//
//   delta(i, j) = 0            if i - j <= -k
//               = 2k - 1       if i - j >= k
//               = i - j + k    otherwise
//
// In a causal model i - j >= 0 on every visible cell, so c2p only reads rows k .. 2k-1 of K^r and
// p2c only rows 0 .. k of Q^r (delta(j, i) = k - (i - j), or 0 from i - j >= k on). Values carry
// content only. Per head h every vector is the column slice [h d_h, (h+1) d_h).
//
// Choices where the paper leaves freedom (documented defaults):
//   - k (option `k`) = 64. The paper uses k = 512 = the maximum sequence length, i.e. no
//     clipping inside a training sequence; 64 does the same for the short segments of small CPU
//     models and clips beyond (every distance >= k - 1 shares row 2k - 1).
//   - No bias on the two projections and no LayerNorm on P (DeBERTa v1's pos_q_proj has a bias,
//     which adds a per-key constant in p2c and is kept out here for symmetry with K^r).
//   - Options c2p / p2c switch a term off (the paper's ablation); the scale follows the number of
//     terms summed, 1/sqrt((1 + c2p + p2c) d_h).
//   - The index of the p2c term (option `p2c_reference`). The paper writes Q^r[delta(j, i)]
//     (default); Microsoft's and Hugging Face's code build p2c from the same relative-position
//     matrix as c2p, which amounts to Q^r[delta(i, j)] (with `p2c_reference = true`). In a
//     causal model the paper's index reads rows 0 .. k of Q^r, the code's rows k .. 2k - 1.
//     Both give the same model class; which rows are trained differs.
//   - Init N(0, init_std) for P, W_qr, W_kr. P has no weight decay (a positional table), W_qr and
//     W_kr are matrices and do.
//
// Efficient form (default). delta takes at most 2k values, so both terms are a small matmul and
// a gather, never an [L, K, d_h] tensor:
//   Kr  = P[a1..b1] W_kr                  [n1, d]   rows reached by c2p (n1 <= k causal)
//   G1  = scale * q_h Kr_h^T              [B L, H, n1]  one gemm per head
//   Qr  = P[a2..b2] W_qr                  [n2, d]   rows reached by p2c (n2 <= k + 1 causal)
//   G2  = scale * Qr_h k_bh^T             [B, H, n2, K]  one gemm per (b, h)
//   scores[b, h, i, j] += G1[b L + i, h, delta(i,j) - a1] + G2[b, h, delta(j,i) - a2, j]
// G2 is stored label-major so that the p2c gather of a query row reads along j: every key k or
// more back has label 0, one contiguous run (a key-major layout costs a cache line per key).
// Backward: scatter dS into dG1 (by query row) and dG2, then
//   dq_h += scale dG1_h Kr_h,  dKr_h = scale dG1_h^T q_h               (one gemm each per head)
//   dk_bh += scale dG2_bh^T Qr_h,  dQr_h += scale dG2_bh k_bh           (per (b, h))
//   dW_kr += P^T dKr,  dP += dKr W_kr^T  (and the same for Q^r with W_qr).
// Cost O((B L + B K) H n d_h + n d^2) plus one gather per cell, instead of O(B H L K d_h);
// the far prefix of each row (keys k or more back) needs no gather at all. Kr and Qr are cached
// per layer for the backward pass (scores_backward follows the scores_forward of the same layer
// and geometry, as everywhere in poslab). Option `naive` is the pair-by-pair reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

// delta(i, j) as a function of x = i - j, in [0, 2k).
inline int deberta_delta(std::int64_t x, int k) {
  if (x <= -k) return 0;
  if (x >= k) return 2 * k - 1;
  return int(x) + k;
}

template <class T>
class Deberta : public Encoding<T> {
 public:
  Deberta(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        d_(s.d_model),
        H_(s.n_heads),
        dh_(s.d_head),
        n_layers_(s.n_layers),
        k_(int(o.get_int("k"))),
        c2p_enabled_(o.get_bool("c2p")),
        p2c_enabled_(o.get_bool("p2c")),
        p2c_sign_(o.get_bool("p2c_reference") ? 1 : -1),
        naive_(o.get_bool("naive")),
        init_std_(o.get_double("init_std")) {
    if (o.get_int("k") < 1) throw std::invalid_argument("deberta: k must be >= 1");
    if (H_ * dh_ != d_) throw std::invalid_argument("deberta: d_model must equal n_heads * d_head");
    const std::size_t d = d_;
    if (c2p_enabled_ || p2c_enabled_)
      P_ = arena.add("deberta.P", {std::size_t(2 * k_), d}, false);
    for (int n = 0; n < s.n_layers; ++n) {
      const std::string prefix = "layer" + std::to_string(n) + ".deberta.";
      if (p2c_enabled_) W_qr_.push_back(arena.add(prefix + "W_qr", {d, d}, true));
      if (c2p_enabled_) W_kr_.push_back(arena.add(prefix + "W_kr", {d, d}, true));
    }
    Kr_.resize(s.n_layers);
    Qr_.resize(s.n_layers);
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    auto normal = [&](Param p) { fill_normal(arena, p, rng, init_std_); };
    if (c2p_enabled_ || p2c_enabled_) normal(P_);
    for (int n = 0; n < n_layers_; ++n) {
      if (p2c_enabled_) normal(W_qr_[n]);
      if (c2p_enabled_) normal(W_kr_[n]);
    }
  }

  // 1/sqrt(3 d_h) with both terms: one d_h-sized dot product per summed term.
  T score_scale(int d_head) const override {
    return T(1) / std::sqrt(T(1 + int(c2p_enabled_) + int(p2c_enabled_)) * T(d_head));
  }

  bool has_score_terms() const override { return c2p_enabled_ || p2c_enabled_; }

  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* scores) override {
    check(layer, g);
    if (naive_) return naive_forward(layer, g, q, k, scale, scores);
    compute_labels(g);
    // This call's heads h0 .. h0 + Hc - 1 (all H but in evaluation by chunks of heads): scores
    // [B, Hc, L, K], G1 [B L, Hc, n1] and G2 [B Hc n2, K] hold head h at position c = h - h0.
    const int B = g.batch, L = g.q_len, K = g.k_len, d = d_, dh = dh_;
    const int h0 = g.head_begin, Hc = g.heads();
    const int n1 = lab_c2p_.count(), n2 = lab_p2c_.count();
    const auto q_all = matrix(q, B * L, d);  // [B L, H d_h]
    const auto k_all = matrix(k, B * K, d);  // [B K, H d_h]
    if (n1 > 0) {
      // Kr = P[a1 ..] W_kr   [n1, d];   G1[:, c, :] = scale * q_h Kr_h^T   [B L, n1] per head
      ensure_shape(Kr_[layer], {std::size_t(n1), std::size_t(d)});
      parallel_multiply(matrix(Kr_[layer]), P_rows(lab_c2p_.lo, n1), weight(W_kr_[layer]));
      ensure_shape(G1_, {std::size_t(B) * L * Hc, std::size_t(n1)});
      const auto Kr = matrix(std::as_const(Kr_[layer]));
#pragma omp parallel for schedule(static)
      for (int c = 0; c < Hc; ++c) {  // [B L, n1] = [B L, d_h] [d_h, n1]
        const int h = h0 + c;
        multiply(G1_head(c, Hc, B * L, n1), q_all.column_block(h * dh, dh),
                 Kr.column_block(h * dh, dh).t(), scale);
      }
    }
    if (n2 > 0) {
      // Qr = P[a2 ..] W_qr   [n2, d];   G2[b, c] = scale * Qr_h k_bh^T   [n2, K] per (b, h)
      ensure_shape(Qr_[layer], {std::size_t(n2), std::size_t(d)});
      parallel_multiply(matrix(Qr_[layer]), P_rows(lab_p2c_.lo, n2), weight(W_qr_[layer]));
      ensure_shape(G2_, {std::size_t(B) * Hc * n2, std::size_t(K)});
      const auto Qr = matrix(std::as_const(Qr_[layer]));
#pragma omp parallel for schedule(static)
      for (int bc = 0; bc < B * Hc; ++bc) {
        const int b = bc / Hc, h = h0 + bc % Hc;
        // [n2, K] = [n2, d_h] [d_h, K]
        multiply(matrix(G2_).row_block(bc * n2, n2), Qr.column_block(h * dh, dh),
                 k_all.block(b * K, h * dh, K, dh).t(), scale);
      }
    }
    // scores[b, c, i, j] += G1[(b L + i) Hc + c, c2p_ij] + G2[b Hc + c, p2c_ij, j]. Keys k or
    // more back (the prefix [lo, far) of the visible row) all have the end labels: c2p adds one
    // constant, p2c one contiguous row of G2; only the band of near keys needs a gather.
#pragma omp parallel for schedule(static)
    for (int bc = 0; bc < B * Hc; ++bc) {
      const int b = bc / Hc, c = bc % Hc;
      for (int i = 0; i < L; ++i) {
        T* s = scores + (long(bc) * L + i) * K;
        const int lo = row_lo_[i], far = row_far_[i], hi = row_hi_[i];
        if (n1 > 0) {
          const int* l1 = lab_c2p_.label.data() + long(i) * K;
          const T* G1i = G1_.data() + (long(b) * L + i) * Hc * n1 + long(c) * n1;
          const T end = far > lo ? G1i[l1[lo]] : T(0);
          for (int j = lo; j < far; ++j) s[j] += end;
          for (int j = far; j <= hi; ++j) s[j] += G1i[l1[j]];
        }
        if (n2 > 0) {
          const int* l2 = lab_p2c_.label.data() + long(i) * K;
          const T* G2bh = G2_.data() + long(bc) * n2 * K;
          const T* end = far > lo ? G2bh + long(l2[lo]) * K : nullptr;
          for (int j = lo; j < far; ++j) s[j] += end[j];
          for (int j = far; j <= hi; ++j) s[j] += G2bh[long(l2[j]) * K + j];
        }
      }
    }
  }

  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dscores, T* dq, T* dk) override {
    check(layer, g);
    require_all_heads(g, "deberta");  // dscores [B, H, L, K]
    if (naive_) return naive_backward(layer, g, q, k, scale, dscores, dq, dk);
    compute_labels(g);
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_, d = d_, dh = dh_;
    const int n1 = lab_c2p_.count(), n2 = lab_p2c_.count();
    if (n1 > 0 && Kr_[layer].shape(0) != std::size_t(n1))
      throw std::logic_error("deberta: scores_backward without the matching scores_forward");
    if (n2 > 0 && Qr_[layer].shape(0) != std::size_t(n2))
      throw std::logic_error("deberta: scores_backward without the matching scores_forward");
    // Scatter dS: dG1 by (query row, c2p label), dG2 by (p2c label, key). The entries written
    // for one (b, h) are those of that (b, h) only, so the threads never collide. The far prefix
    // of a row sums into one c2p entry in a register (adding into one memory slot over and over
    // would make every add wait for the previous store) and into one contiguous row of dG2.
    if (n1 > 0) ensure_zeros(G1_, {std::size_t(B) * L * H, std::size_t(n1)});
    if (n2 > 0) ensure_zeros(G2_, {std::size_t(B) * H * n2, std::size_t(K)});
    // The far prefixes' c2p sums are made kRows rows at a time, each in its serial order
    // (core/ordered_sums.hpp): the same sums, with kRows chains of adds side by side.
    constexpr int kRows = 8;
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      for (int i0 = 0; i0 < L; i0 += kRows) {
        T far_sums[kRows];
        if (n1 > 0) {
          const T* rows[kRows];
          int begin[kRows], end[kRows];
          for (int r = 0; r < kRows; ++r) {
            const int i = std::min(i0 + r, L - 1);
            rows[r] = dscores + (long(bh) * L + i) * K;
            begin[r] = i0 + r < L ? row_lo_[i] : 0;
            end[r] = i0 + r < L ? row_far_[i] : 0;  // rows past L: empty
          }
          ordered_row_sums(rows, begin, end, far_sums);
        }
        for (int i = i0; i < std::min(L, i0 + kRows); ++i) {
          const T* ds = dscores + (long(bh) * L + i) * K;
          const int lo = row_lo_[i], far = row_far_[i], hi = row_hi_[i];
          if (n1 > 0) {
            const int* l1 = lab_c2p_.label.data() + long(i) * K;
            T* dG1i = G1_.data() + (long(b) * L + i) * H * n1 + long(h) * n1;
            if (far > lo) dG1i[l1[lo]] += far_sums[i - i0];  // sum of ds over [lo, far)
            for (int j = far; j <= hi; ++j) dG1i[l1[j]] += ds[j];
          }
          if (n2 > 0) {
            const int* l2 = lab_p2c_.label.data() + long(i) * K;
            T* dG2bh = G2_.data() + long(bh) * n2 * K;
            if (far > lo) {
              T* end = dG2bh + long(l2[lo]) * K;
              for (int j = lo; j < far; ++j) end[j] += ds[j];
            }
            for (int j = far; j <= hi; ++j) dG2bh[long(l2[j]) * K + j] += ds[j];
          }
        }
      }
    }
    const auto q_all = matrix(q, B * L, d), dq_all = matrix(dq, B * L, d);  // [B L, H d_h]
    const auto k_all = matrix(k, B * K, d), dk_all = matrix(dk, B * K, d);  // [B K, H d_h]
    if (n1 > 0) {
      ensure_shape(dKr_, {std::size_t(n1), std::size_t(d)});
      const auto Kr = matrix(std::as_const(Kr_[layer]));
      // Per head: dq_h += scale dG1_h Kr_h  [B L, d_h];  dKr_h = scale dG1_h^T q_h  [n1, d_h]
#pragma omp parallel for schedule(static)
      for (int h = 0; h < H; ++h) {
        const auto dG1_h = G1_head(h, H, B * L, n1);  // [B L, n1], row stride H n1
        multiply(dq_all.column_block(h * dh, dh), dG1_h, Kr.column_block(h * dh, dh), scale,
                 T(1));
        multiply(matrix(dKr_).column_block(h * dh, dh), dG1_h.t(), q_all.column_block(h * dh, dh),
                 scale);
      }
      project_backward(lab_c2p_.lo, W_kr_[layer], matrix(std::as_const(dKr_)));
    }
    if (n2 > 0) {
      ensure_zeros(dQr_, {std::size_t(n2), std::size_t(d)});
      const auto Qr = matrix(std::as_const(Qr_[layer]));
      // Per (b, h): dk_bh += scale dG2_bh^T Qr_h  [K, d_h];  dQr_h += scale dG2_bh k_bh  [n2, d_h].
      // The batch runs inside one thread per head: dQr_h sums over b.
#pragma omp parallel for schedule(static)
      for (int h = 0; h < H; ++h)
        for (int b = 0; b < B; ++b) {
          const auto dG2_bh = matrix(std::as_const(G2_)).row_block((b * H + h) * n2, n2);
          multiply(dk_all.block(b * K, h * dh, K, dh), dG2_bh.t(), Qr.column_block(h * dh, dh),
                   scale, T(1));
          multiply(matrix(dQr_).column_block(h * dh, dh), dG2_bh,
                   k_all.block(b * K, h * dh, K, dh), scale, T(1));
        }
      project_backward(lab_p2c_.lo, W_qr_[layer], matrix(std::as_const(dQr_)));
    }
  }

 private:
  // The labels of one term on the [L, K] grid (-1 on masked cells) and the range [lo, hi] of
  // table rows they reach; labels are stored relative to lo.
  struct Labels {
    std::vector<int> label;
    int lo = 0, hi = -1;
    bool on = false;
    int count() const { return on && hi >= lo ? hi - lo + 1 : 0; }
  };

  // Rows [first, first + n) of the table P [2k, d], and of its gradient.
  ConstMatrixView<T> P_rows(int first, int n) const {
    return matrix(arena_.value(P_), 2 * k_, d_).row_block(first, n);
  }
  MatrixView<T> P_grad_rows(int first, int n) {
    return matrix(arena_.grad(P_), 2 * k_, d_).row_block(first, n);
  }
  // A projection W_qr or W_kr, [d, d].
  ConstMatrixView<T> weight(Param W) const { return matrix(arena_.value(W), d_, d_); }
  // Head number c of G1 [B L, Hc, n1] (head h0 + c of a call), seen as [B L, Hc n1]: columns
  // [c n1, (c+1) n1), row stride Hc n1.
  MatrixView<T> G1_head(int c, int Hc, int BL, int n1) {
    return matrix(G1_.data(), BL, Hc * n1).column_block(c * n1, n1);
  }

  void check(int layer, const AttentionGeometry& g) const {
    if (g.n_heads != H_ || g.d_head != dh_)
      throw std::invalid_argument("deberta: geometry does not match the shape it was built for");
    if (layer < 0 || layer >= n_layers_) throw std::out_of_range("deberta: no such layer");
  }

  // c2p: delta(i, j) of x = q_pos[i] - k_pos[j];  p2c: delta(j, i) of x = k_pos[j] - q_pos[i]
  // (the paper), or delta(i, j) like c2p with p2c_reference (p2c_sign_ = +1).
  // Also the visible range [lo, hi] of every query row and the end `far` of its prefix of keys
  // k or more back (x >= k: c2p label 2k - 1, p2c label 0; with increasing key positions these
  // come first, with any other order the prefix is just shorter).
  // A training step asks for them in the forward and backward pass of every layer, with the
  // same mask and positions: they are kept and rebuilt only when those change.
  void compute_labels(const AttentionGeometry& g) {
    if (labels_key_.same_as_last(g)) return;
    const int L = g.q_len, K = g.k_len;
    row_lo_.resize(L);
    row_hi_.resize(L);
    row_far_.resize(L);
    for (int i = 0; i < L; ++i) {
      const int lo = g.first_visible(i), hi = g.last_visible(i);
      int far = lo;
      while (far <= hi && g.q_pos[i] - g.k_pos[far] >= k_) ++far;
      row_lo_[i] = lo;
      row_hi_[i] = hi;
      row_far_[i] = far;
    }
    lab_c2p_.on = c2p_enabled_;
    lab_p2c_.on = p2c_enabled_;
    for (Labels* t : {&lab_c2p_, &lab_p2c_}) {
      t->label.assign(std::size_t(L) * K, -1);
      t->lo = 2 * k_;
      t->hi = -1;
    }
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j) {
        if (!g.visible(i, j)) continue;
        const std::int64_t x = g.q_pos[i] - g.k_pos[j];
        lab_c2p_.label[std::size_t(i) * K + j] = deberta_delta(x, k_);
        lab_p2c_.label[std::size_t(i) * K + j] = deberta_delta(p2c_sign_ * x, k_);
      }
    for (Labels* t : {&lab_c2p_, &lab_p2c_}) {
      for (int l : t->label)
        if (l >= 0) {
          t->lo = std::min(t->lo, l);
          t->hi = std::max(t->hi, l);
        }
      if (t->hi >= t->lo)
        for (int& l : t->label)
          if (l >= 0) l -= t->lo;
    }
  }

  // R = P[first .. first+n) W:   dW += P_rows^T dR   [d, d],   dP_rows += dR W^T   [n, d]
  void project_backward(int first, Param W, ConstMatrixView<T> dR) {
    const int n = dR.rows();
    parallel_multiply(matrix(arena_.grad(W), d_, d_), P_rows(first, n).t(), dR, T(1), T(1));
    parallel_multiply(P_grad_rows(first, n), dR, weight(W).t(), T(1), T(1));
  }

  // ------------------------------------------------------------------------------------------
  // Naive reference: the paper's equation pair by pair, with the full tables
  // Q^r = P W_qr and K^r = P W_kr [2k, d] computed by plain loops. O(B H L K d_h + k d^2).
  // ------------------------------------------------------------------------------------------
  // R[r, c] = sum_a P[r, a] W[a, c]
  std::vector<T> naive_project(Param W) const {
    const int d = d_, rows = 2 * k_;
    const T* P = arena_.value(P_);
    const T* w = arena_.value(W);
    std::vector<T> R(std::size_t(rows) * d, T(0));
    for (int r = 0; r < rows; ++r)
      for (int a = 0; a < d; ++a)
        for (int c = 0; c < d; ++c) R[long(r) * d + c] += P[long(r) * d + a] * w[long(a) * d + c];
    return R;
  }

  // scores [B, Hc, L, K]: block (b, h - h0) for the call's heads h = h0 .. h0 + Hc - 1.
  void naive_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                     T* scores) const {
    const int B = g.batch, L = g.q_len, K = g.k_len, Hc = g.heads(), d = d_, dh = dh_;
    const std::vector<T> Kr = c2p_enabled_ ? naive_project(W_kr_[layer]) : std::vector<T>();
    const std::vector<T> Qr = p2c_enabled_ ? naive_project(W_qr_[layer]) : std::vector<T>();
    for (int b = 0; b < B; ++b)
      for (int h = g.head_begin; h < g.head_end(); ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const std::int64_t x = g.q_pos[i] - g.k_pos[j];
            const T* qi = q + (long(b) * L + i) * d + h * dh;
            const T* kj = k + (long(b) * K + j) * d + h * dh;
            T a = 0;
            if (c2p_enabled_) {  // Q^c_i . K^r[delta(i, j)]
              const T* kr = Kr.data() + long(deberta_delta(x, k_)) * d + h * dh;
              for (int c = 0; c < dh; ++c) a += qi[c] * kr[c];
            }
            if (p2c_enabled_) {  // K^c_j . Q^r[delta(j, i)]  (delta(i, j) with p2c_reference)
              const T* qr = Qr.data() + long(deberta_delta(p2c_sign_ * x, k_)) * d + h * dh;
              for (int c = 0; c < dh; ++c) a += kj[c] * qr[c];
            }
            scores[((long(b) * Hc + h - g.head_begin) * L + i) * K + j] += scale * a;
          }
  }

  void naive_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      const T* dscores, T* dq, T* dk) {
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_, d = d_, dh = dh_, rows = 2 * k_;
    const std::vector<T> Kr = c2p_enabled_ ? naive_project(W_kr_[layer]) : std::vector<T>();
    const std::vector<T> Qr = p2c_enabled_ ? naive_project(W_qr_[layer]) : std::vector<T>();
    std::vector<T> dKr(Kr.size(), T(0)), dQr(Qr.size(), T(0));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const T ds = scale * dscores[((long(b) * H + h) * L + i) * K + j];
            const std::int64_t x = g.q_pos[i] - g.k_pos[j];
            const long qi = (long(b) * L + i) * d + h * dh, kj = (long(b) * K + j) * d + h * dh;
            if (c2p_enabled_) {
              const long r = long(deberta_delta(x, k_)) * d + h * dh;
              for (int c = 0; c < dh; ++c) {
                dq[qi + c] += ds * Kr[r + c];
                dKr[r + c] += ds * q[qi + c];
              }
            }
            if (p2c_enabled_) {
              const long r = long(deberta_delta(p2c_sign_ * x, k_)) * d + h * dh;
              for (int c = 0; c < dh; ++c) {
                dk[kj + c] += ds * Qr[r + c];
                dQr[r + c] += ds * k[kj + c];
              }
            }
          }
    // R = P W:  dW[a, c] += sum_r P[r, a] dR[r, c],   dP[r, a] += sum_c dR[r, c] W[a, c]
    auto project_back = [&](Param W, const std::vector<T>& dR) {
      const T* P = arena_.value(P_);
      const T* w = arena_.value(W);
      T* dW = arena_.grad(W);
      T* dP = arena_.grad(P_);
      for (int r = 0; r < rows; ++r)
        for (int a = 0; a < d; ++a)
          for (int c = 0; c < d; ++c) {
            dW[long(a) * d + c] += P[long(r) * d + a] * dR[long(r) * d + c];
            dP[long(r) * d + a] += dR[long(r) * d + c] * w[long(a) * d + c];
          }
    };
    if (c2p_enabled_) project_back(W_kr_[layer], dKr);
    if (p2c_enabled_) project_back(W_qr_[layer], dQr);
  }

  ParameterArena<T>& arena_;
  int d_, H_, dh_, n_layers_, k_;
  bool c2p_enabled_, p2c_enabled_;
  int p2c_sign_;  // -1: the paper's delta(j, i); +1: the reference code's delta(i, j)
  bool naive_;
  double init_std_;
  Param P_;                        // [2k, d], shared by all layers
  std::vector<Param> W_qr_, W_kr_;  // [d, d] per layer

  // Work buffers. Kr_, Qr_ hold each layer's projected rows from forward to backward.
  Labels lab_c2p_, lab_p2c_;                    // [L, K] each
  std::vector<int> row_lo_, row_hi_, row_far_;  // [L]: visible keys, end of the far prefix
  GeometryKey labels_key_;  // the mask and positions of the labels and rows above
  std::vector<xt::xtensor<T, 2>> Kr_, Qr_;  // per layer: [n1, d], [n2, d]
  xt::xtensor<T, 2> G1_, G2_, dKr_, dQr_;   // [B L Hc, n1], [B Hc n2, K], [n1, d], [n2, d]
};

}  // namespace

EncodingInfo deberta_encoding_info() {
  return {"deberta",
          EncodingFamily::relative,
          "DeBERTa disentangled attention: content-to-position and position-to-content terms "
          "from a shared table of 2k relative embeddings, scaled by 1/sqrt(3 d_h)",
          "He et al. 2021",
          {
              {"k", std::int64_t(64),
               "bucket range: relative distances beyond +-k share the end rows of the 2k-row "
               "table P (the paper: k = 512 = max length)",
               1, 1 << 20},
              {"c2p", true, "content-to-position term Q^c_i . K^r[delta(i, j)]"},
              {"p2c", true, "position-to-content term K^c_j . Q^r[delta(j, i)]"},
              {"p2c_reference", false,
               "index p2c by delta(i, j), as Microsoft's and Hugging Face's code effectively do "
               "(default: the paper's delta(j, i))"},
              {"naive", false, "use the pair-by-pair reference implementation (slow; for tests)"},
              {"init_std", 0.02,
               "standard deviation of the N(0, std) initialisation of P, W_qr and W_kr", 0},
          },
          factory_float<Deberta>(),
          factory_double<Deberta>()};
}

}  // namespace poslab
