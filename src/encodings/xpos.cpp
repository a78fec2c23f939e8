// xPos, extrapolatable position embedding: Sun, Dong, Patra, Ma, Huang, Benhaim, Chaudhary,
// Song & Wei (2022), "A Length-Extrapolatable Transformer", section 3.2; torchscale's XPOS.
//
// RoPE (rope.cpp) plus an exponential decay per rotation pair. Pair i of a head (i = 0 .. d/2 - 1,
// d = d_h, or d_h - 1 for an odd d_h) gets
//
//   zeta_i = (2i + gamma d) / ((1 + gamma) d)           gamma = 0.4: zeta_i in [0.29, 1)
//
// and the rotated query at position m is multiplied by zeta_i^(m / scale_base), the rotated key
// at n by zeta_i^(-n / scale_base) (scale_base = 512):
//
//   q'_m = zeta^(m/B) R(m theta) q,   k'_n = zeta^(-n/B) R(n theta) k
//   q'_m . k'_n = sum_i zeta_i^((m - n)/B) [q^T R((n - m) theta) k]_i            (B = scale_base)
//
// so the score depends on m - n only, and each pair's contribution decays as zeta_i^(distance/B):
// fast for the high-frequency pairs (small zeta), hardly at all for the slow ones (zeta near 1),
// which is the paper's remedy for RoPE's oscillation at long distances. theta_i = base^(-2i/d)
// as in RoPE. Pairs are adjacent dimensions (2i, 2i+1), as in torchscale's rotate_every_two.
//
// Numerics: zeta^(m/B) alone under- or overflows at large m (0.29^(10^6/512) = 0). torchscale
// centres the positions of a call; so does this: the exponents use m - c and -(n - c) with c the
// middle of the call's key positions, which multiplies q'_m by zeta^(-c/B) and k'_n by zeta^(c/B)
// and leaves every score exactly as above (the scales of a call are the same for every shift of
// its positions).
//
// Hook (b), in place on q [B, L, H d_h] and k [B, K, H d_h], with RoPE's rotation code
// (rotary.hpp): the scale is folded into the cos/sin tables, which differ between q (zeta^(+))
// and k (zeta^(-)). Backward: the Jacobian of a R is a R, so the gradient is a R^T dy, in place.
// No parameters; the tables are rebuilt only when the positions change.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "encodings/registry.hpp"
#include "encodings/rotary.hpp"

namespace poslab {

namespace {

template <class T>
class Xpos : public Encoding<T> {
 public:
  Xpos(const Options& o, const EncodingShape& s, ParameterArena<T>&)
      : H_(s.n_heads), dh_(s.d_head), pairs_(s.d_head / 2),
        scale_base_(o.get_double("scale_base")) {
    const double base = o.get_double("base"), gamma = o.get_double("gamma");
    if (!(base > 1)) throw std::invalid_argument("xpos: base must be > 1");
    if (!(gamma > 0)) throw std::invalid_argument("xpos: gamma must be > 0");
    if (!(scale_base_ > 0)) throw std::invalid_argument("xpos: scale_base must be > 0");
    const double d = 2.0 * pairs_;
    for (int i = 0; i < pairs_; ++i) {
      theta_.push_back(std::pow(base, -2.0 * i / d));                // theta_i = base^(-2i/d)
      log_zeta_.push_back(std::log((2.0 * i + gamma * d) / ((1.0 + gamma) * d)));  // ln zeta_i
    }
  }

  bool has_qk_transform() const override { return pairs_ > 0; }

  void qk_forward(int /*layer*/, const AttentionGeometry& g, T* q, T* k) override {
    prepare(g);
    rotate_pairs(q, g.batch, g.q_len, H_, dh_, pairs_, q_table_, false);
    rotate_pairs(k, g.batch, g.k_len, H_, dh_, pairs_, k_table_, false);
  }

  void qk_backward(int /*layer*/, const AttentionGeometry& g, T* dq, T* dk) override {
    prepare(g);
    rotate_pairs(dq, g.batch, g.q_len, H_, dh_, pairs_, q_table_, true);
    rotate_pairs(dk, g.batch, g.k_len, H_, dh_, pairs_, k_table_, true);
  }

 private:
  void prepare(const AttentionGeometry& g) {
    if (g.n_heads != H_ || g.d_head != dh_)
      throw std::invalid_argument("xpos: geometry does not match the shape it was built for");
    // c, the centre of the call's key positions (the tag of the query table, whose scales
    // depend on it; the key table's follow from its own positions).
    const std::int64_t c =
        g.k_len > 0 ? g.k_pos[0] + (g.k_pos[g.k_len - 1] - g.k_pos[0]) / 2 : 0;
    if (!q_table_.holds(g.q_pos, g.q_len, c))
      q_table_.build(g.q_pos, g.q_len, c, theta_.data(), pairs_, [&](int r, int i) {
        return std::exp(log_zeta_[i] * double(g.q_pos[r] - c) / scale_base_);  // zeta^((m-c)/B)
      });
    if (!k_table_.holds(g.k_pos, g.k_len, c))
      k_table_.build(g.k_pos, g.k_len, c, theta_.data(), pairs_, [&](int r, int i) {
        return std::exp(-log_zeta_[i] * double(g.k_pos[r] - c) / scale_base_);  // zeta^(-(n-c)/B)
      });
  }

  int H_, dh_, pairs_;  // pairs = d_h / 2 (an odd d_h leaves its last dimension alone)
  double scale_base_;
  std::vector<double> theta_, log_zeta_;  // [pairs]
  RotaryTable<T> q_table_, k_table_;
};

}  // namespace

EncodingInfo xpos_encoding_info() {
  return {"xpos",
          EncodingFamily::relative,
          "xPos: RoPE with queries scaled by zeta_i^(m/scale_base) and keys by "
          "zeta_i^(-n/scale_base), zeta_i = (2i + gamma d)/((1 + gamma) d): a decay per pair, "
          "q.k depends on i - j only; no parameters",
          "Sun et al. 2022",
          {
              {"base", 10000.0, "theta_i = base^(-2i/d_h), as RoPE", 1.000001},
              {"gamma", 0.4, "zeta_i = (2i + gamma d)/((1 + gamma) d): the smallest zeta is "
               "gamma / (1 + gamma)", 1e-6},
              {"scale_base", 512.0, "B: a pair's contribution decays as zeta_i^(distance/B)",
               1e-6},
          },
          factory_float<Xpos>(),
          factory_double<Xpos>()};
}

}  // namespace poslab
