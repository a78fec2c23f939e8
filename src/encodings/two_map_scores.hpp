// Scores from two position maps, chosen per (query, key) by distance: the hook behind
// Self-Extend and ReRoPE (rope.cpp, scaling = self_extend, rerope, leaky_rerope; docs/07,
// "Scores from two position maps").
//
// A rotary encoding normally turns q_i by its position and k_j by its own (hook (b)), so the
// logit sees the distance r = t_i - t_j. These methods keep that for near keys and use other
// positions for far ones:
//
//   S_ij = scale * < R(P1_q(t_i)) q_i , R(P1_k(t_j)) k_j >   if t_i - t_j < window   (map 1, near)
//          scale * < R(P2_q(t_i)) q_i , R(P2_k(t_j)) k_j >   otherwise               (map 2, far)
//
// merged BEFORE the one softmax (the mask, log-n and the softmax follow as for any encoding).
// t_i, t_j are the stream positions of the call (AttentionGeometry::q_pos, k_pos), R(x) the
// rotation of every pair p by the angle x theta_p (rotary.hpp), and each map sends a position to
// a real number with one affine-of-groups form per side, AxisMap below:
//
//   P(t) = slope * floor(t / group) + offset
//
//   map                     query side                        key side
//   identity (both, map 1)  t                                 t
//   Self-Extend, map 2      floor(t / G) + W - W / G          floor(t / G)
//   ReRoPE, map 2           w              (slope 0)          0              (slope 0)
//   leaky ReRoPE, map 2     t / k + w (k - 1) / k             t / k
//
// How it plugs into the attention (nn/attention.hpp): the encoding turns the content term off
// (has_content_term() = false, so the attention writes S = 0) and adds the whole merged S as its
// score terms, hook (c), from the UNROTATED q and k (has_qk_transform() = false). Nothing in the
// attention changes; the chunked evaluation (a range of heads per call) works as for any score
// hook.
//
// Efficient path (TwoMapScores::forward): rotate copies of q and k under map 1 and under map 2
// (q1, k1, q2, k2: [R, L or K, H d_h]), two products per head S1 = scale q1 k1^T and
// S2 = scale q2 k2^T ([L, K], BLAS), then S += where(near, S1, S2). Cost: twice the content
// product, and the rotations of q and k twice.
//
// Backward (TwoMapScores::backward): the score gradient dS splits by the same mask,
// dS1 = dS on near cells (0 elsewhere), dS2 = dS on far cells; each path is a plain RoPE
// backward, dq_m = R_m^T (scale dS_m k_m), dk_m = R_m^T (scale dS_m^T q_m) (m = 1, 2), and
// dq += dq_1 + dq_2, dk += dk_1 + dk_2.
//
// Naive reference (two_map_scores_naive, *_naive_backward): the double loop over (i, j), each
// score from the chosen map's two positions with the angles computed in the loop. Option
// `naive = true` of rope uses it (the conformance kit's test 3 compares the two).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "core/blas.hpp"
#include "core/matrix.hpp"
#include "encodings/encoding.hpp"
#include "encodings/rotary.hpp"

namespace poslab {

// floor(t / g) for integers of any sign (C++'s / truncates toward 0).
inline std::int64_t floor_div(std::int64_t t, std::int64_t g) {
  const std::int64_t q = t / g;
  return (t % g != 0 && ((t < 0) != (g < 0))) ? q - 1 : q;
}

// One side (query or key) of a position map: P(t) = slope * floor(t / group) + offset.
struct AxisMap {
  std::int64_t group = 1;
  double slope = 1;
  double offset = 0;
  double operator()(std::int64_t t) const {
    return slope * double(floor_div(t, group)) + offset;
  }
};

struct PositionMap {
  AxisMap query, key;
};

// Map 1 where t_i - t_j < window (near), map 2 elsewhere (far).
struct TwoMapRule {
  PositionMap near, far;
  std::int64_t window = 0;
  bool is_near(std::int64_t t_i, std::int64_t t_j) const { return t_i - t_j < window; }
};

template <class T>
class TwoMapScores {
 public:
  TwoMapScores(TwoMapRule rule, std::vector<double> theta, int n_heads, int d_head)
      : rule_(rule), theta_(std::move(theta)), H_(n_heads), dh_(d_head),
        pairs_(int(theta_.size())) {}

  const TwoMapRule& rule() const { return rule_; }

  // scores [R, Hc, L, K] += S (above) for the heads of the call; q [R, L, H d_h] and
  // k [R, K, H d_h] unrotated.
  void forward(const AttentionGeometry& g, const T* q, const T* k, T scale, T* scores) {
    const int R = g.batch, Hc = g.heads(), L = g.q_len, K = g.k_len;
    prepare(g);
    rotated_copy(q, R, L, q1_table_, q1_);
    rotated_copy(k, R, K, k1_table_, k1_);
    rotated_copy(q, R, L, q2_table_, q2_);
    rotated_copy(k, R, K, k2_table_, k2_);
    near_mask(g);
    const std::size_t cells = std::size_t(L) * K;
    buffers_.resize(std::size_t(omp_get_max_threads()) * 2 * cells);
#pragma omp parallel for schedule(static)
    for (int bc = 0; bc < R * Hc; ++bc) {
      const int b = bc / Hc, h = g.head_begin + bc % Hc;
      T* S1 = buffers_.data() + std::size_t(omp_get_thread_num()) * 2 * cells;  // [L, K]
      T* S2 = S1 + cells;                                                        // [L, K]
      multiply(matrix(S1, L, K), head(q1_, b, h, L), head(k1_, b, h, K).t(), scale);
      multiply(matrix(S2, L, K), head(q2_, b, h, L), head(k2_, b, h, K).t(), scale);
      T* s = scores + std::size_t(bc) * cells;
      for (std::size_t c = 0; c < cells; ++c) s[c] += near_[c] ? S1[c] : S2[c];  // the merge
    }
  }

  // dq [B, L, H d_h] and dk [B, K, H d_h] += the gradient through S, given dscores [B, H, L, K]
  // (all heads, exactly 0 on masked cells).
  void backward(const AttentionGeometry& g, const T* q, const T* k, T scale, const T* dscores,
                T* dq, T* dk) {
    require_all_heads(g, "two-map scores");
    const int B = g.batch, H = H_, L = g.q_len, K = g.k_len, d = H_ * dh_;
    prepare(g);
    rotated_copy(q, B, L, q1_table_, q1_);
    rotated_copy(k, B, K, k1_table_, k1_);
    rotated_copy(q, B, L, q2_table_, q2_);
    rotated_copy(k, B, K, k2_table_, k2_);
    near_mask(g);
    const std::size_t cells = std::size_t(L) * K;
    dq1_.assign(std::size_t(B) * L * d, T(0));
    dq2_.assign(std::size_t(B) * L * d, T(0));
    dk1_.assign(std::size_t(B) * K * d, T(0));
    dk2_.assign(std::size_t(B) * K * d, T(0));
    buffers_.resize(std::size_t(omp_get_max_threads()) * 2 * cells);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H;
      T* dS1 = buffers_.data() + std::size_t(omp_get_thread_num()) * 2 * cells;  // [L, K]
      T* dS2 = dS1 + cells;                                                        // [L, K]
      const T* dS = dscores + std::size_t(bh) * cells;
      for (std::size_t c = 0; c < cells; ++c) {  // the same mask splits the gradient
        dS1[c] = near_[c] ? dS[c] : T(0);
        dS2[c] = near_[c] ? T(0) : dS[c];
      }
      // dq_m' = scale dS_m k_m [L, d_h];  dk_m' = scale dS_m^T q_m [K, d_h]  (rotated frames)
      multiply(head(dq1_, b, h, L), matrix<const T>(dS1, L, K), head(k1_, b, h, K), scale);
      multiply(head(dk1_, b, h, K), matrix<const T>(dS1, L, K).t(), head(q1_, b, h, L), scale);
      multiply(head(dq2_, b, h, L), matrix<const T>(dS2, L, K), head(k2_, b, h, K), scale);
      multiply(head(dk2_, b, h, K), matrix<const T>(dS2, L, K).t(), head(q2_, b, h, L), scale);
    }
    // Back to the unrotated frame: R_m^T, then accumulate.
    rotate_pairs(dq1_.data(), B, L, H_, dh_, pairs_, q1_table_, true);
    rotate_pairs(dq2_.data(), B, L, H_, dh_, pairs_, q2_table_, true);
    rotate_pairs(dk1_.data(), B, K, H_, dh_, pairs_, k1_table_, true);
    rotate_pairs(dk2_.data(), B, K, H_, dh_, pairs_, k2_table_, true);
    for (std::size_t c = 0; c < dq1_.size(); ++c) dq[c] += dq1_[c] + dq2_[c];
    for (std::size_t c = 0; c < dk1_.size(); ++c) dk[c] += dk1_[c] + dk2_[c];
  }

 private:
  // Head h of batch row b of x [., rows, H d_h]: [rows, d_h], row stride H d_h.
  MatrixView<T> head(std::vector<T>& x, int b, int h, int rows) const {
    const int d = H_ * dh_;
    return strided(x.data() + (std::size_t(b) * rows) * d + std::size_t(h) * dh_, rows, dh_, d);
  }

  // The tables of the four sides for this call's positions (rebuilt when they change).
  void prepare(const AttentionGeometry& g) {
    build(q1_table_, g.q_pos, g.q_len, rule_.near.query);
    build(k1_table_, g.k_pos, g.k_len, rule_.near.key);
    build(q2_table_, g.q_pos, g.q_len, rule_.far.query);
    build(k2_table_, g.k_pos, g.k_len, rule_.far.key);
  }
  // cos(P(t_r) theta_p), sin(...) [rows, pairs], in double, stored in T.
  void build(RotaryTable<T>& t, const std::int64_t* pos, int rows, const AxisMap& map) {
    if (t.holds(pos, rows, 0)) return;
    t.pos.assign(pos, pos + rows);
    t.tag = 0;
    t.built = true;
    t.cos.resize(std::size_t(rows) * pairs_);
    t.sin.resize(std::size_t(rows) * pairs_);
    for (int r = 0; r < rows; ++r)
      for (int p = 0; p < pairs_; ++p) {
        const double angle = map(pos[r]) * theta_[p];
        t.cos[std::size_t(r) * pairs_ + p] = T(std::cos(angle));
        t.sin[std::size_t(r) * pairs_ + p] = T(std::sin(angle));
      }
  }
  void rotated_copy(const T* x, int B, int rows, const RotaryTable<T>& t, std::vector<T>& out) {
    out.assign(x, x + std::size_t(B) * rows * H_ * dh_);
    rotate_pairs(out.data(), B, rows, H_, dh_, pairs_, t, false);
  }
  // near_[i K + j] = 1 where map 1 applies (the same for every batch row and head).
  void near_mask(const AttentionGeometry& g) {
    near_.resize(std::size_t(g.q_len) * g.k_len);
    for (int i = 0; i < g.q_len; ++i)
      for (int j = 0; j < g.k_len; ++j)
        near_[std::size_t(i) * g.k_len + j] = rule_.is_near(g.q_pos[i], g.k_pos[j]);
  }

  TwoMapRule rule_;
  std::vector<double> theta_;  // [pairs]
  int H_, dh_, pairs_;
  RotaryTable<T> q1_table_, k1_table_, q2_table_, k2_table_;
  std::vector<T> q1_, k1_, q2_, k2_, dq1_, dk1_, dq2_, dk2_, buffers_;
  std::vector<unsigned char> near_;
};

// The naive reference: scores [R, Hc, L, K] += S_ij computed cell by cell, each from the chosen
// map's positions (angles computed here, no tables, no products).
template <class T>
void two_map_scores_naive(const TwoMapRule& rule, const std::vector<double>& theta, int d_head,
                          const AttentionGeometry& g, const T* q, const T* k, T scale,
                          T* scores) {
  const int d = g.n_heads * d_head, pairs = int(theta.size());
  for (int b = 0; b < g.batch; ++b)
    for (int c = 0; c < g.heads(); ++c) {
      const int h = g.head_begin + c;
      for (int i = 0; i < g.q_len; ++i)
        for (int j = 0; j < g.k_len; ++j) {
          const PositionMap& m = rule.is_near(g.q_pos[i], g.k_pos[j]) ? rule.near : rule.far;
          const double pq = m.query(g.q_pos[i]), pk = m.key(g.k_pos[j]);
          const T* qi = q + (std::size_t(b) * g.q_len + i) * d + std::size_t(h) * d_head;
          const T* kj = k + (std::size_t(b) * g.k_len + j) * d + std::size_t(h) * d_head;
          double s = 0;
          for (int p = 0; p < pairs; ++p) {  // < R(pq) q, R(pk) k > for pair p
            const double cq = std::cos(pq * theta[p]), sq = std::sin(pq * theta[p]);
            const double ck = std::cos(pk * theta[p]), sk = std::sin(pk * theta[p]);
            const double q0 = cq * qi[2 * p] - sq * qi[2 * p + 1];
            const double q1 = sq * qi[2 * p] + cq * qi[2 * p + 1];
            const double k0 = ck * kj[2 * p] - sk * kj[2 * p + 1];
            const double k1 = sk * kj[2 * p] + ck * kj[2 * p + 1];
            s += q0 * k0 + q1 * k1;
          }
          for (int x = 2 * pairs; x < d_head; ++x) s += double(qi[x]) * kj[x];  // unrotated
          scores[((std::size_t(b) * g.heads() + c) * g.q_len + i) * g.k_len + j] += T(scale * s);
        }
    }
}

// Its backward: for every cell, dq_i += scale dS_ij R(pq)^T R(pk) k_j and
// dk_j += scale dS_ij R(pk)^T R(pq) q_i, with the chosen map's pq, pk.
template <class T>
void two_map_scores_naive_backward(const TwoMapRule& rule, const std::vector<double>& theta,
                                   int d_head, const AttentionGeometry& g, const T* q,
                                   const T* k, T scale, const T* dscores, T* dq, T* dk) {
  require_all_heads(g, "two-map scores (naive)");
  const int d = g.n_heads * d_head, pairs = int(theta.size());
  for (int b = 0; b < g.batch; ++b)
    for (int h = 0; h < g.n_heads; ++h)
      for (int i = 0; i < g.q_len; ++i)
        for (int j = 0; j < g.k_len; ++j) {
          const double ds =
              scale * dscores[((std::size_t(b) * g.n_heads + h) * g.q_len + i) * g.k_len + j];
          if (ds == 0) continue;
          const PositionMap& m = rule.is_near(g.q_pos[i], g.k_pos[j]) ? rule.near : rule.far;
          // < R(pq) q, R(pk) k > = < q, R(pk - pq) k >: one relative rotation by a = pk - pq.
          const double a = m.key(g.k_pos[j]) - m.query(g.q_pos[i]);
          const std::size_t qo = (std::size_t(b) * g.q_len + i) * d + std::size_t(h) * d_head;
          const std::size_t ko = (std::size_t(b) * g.k_len + j) * d + std::size_t(h) * d_head;
          for (int p = 0; p < pairs; ++p) {
            const double c = std::cos(a * theta[p]), s = std::sin(a * theta[p]);
            const double k0 = k[ko + 2 * p], k1 = k[ko + 2 * p + 1];
            const double q0 = q[qo + 2 * p], q1 = q[qo + 2 * p + 1];
            dq[qo + 2 * p] += T(ds * (c * k0 - s * k1));      // d/dq of q . R(a) k
            dq[qo + 2 * p + 1] += T(ds * (s * k0 + c * k1));
            dk[ko + 2 * p] += T(ds * (c * q0 + s * q1));      // R(a)^T q
            dk[ko + 2 * p + 1] += T(ds * (-s * q0 + c * q1));
          }
          for (int x = 2 * pairs; x < d_head; ++x) {
            dq[qo + x] += T(ds * k[ko + x]);
            dk[ko + x] += T(ds * q[qo + x]);
          }
        }
}

}  // namespace poslab
