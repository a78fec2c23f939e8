// RoPE, rotary position embedding: Su, Lu, Pan, Murtadha, Wen & Liu (2021), "RoFormer: Enhanced
// Transformer with Rotary Position Embedding", section 3.2.
//
// Instead of adding anything, rotate. Split each head's query and key into pairs
// (x_{2p}, x_{2p+1}), p = 0..d_rot/2 - 1, and turn pair p of the vector at position m by the angle
// m * theta_p:
//
//   [x'_{2p}  ]   [cos m theta_p   -sin m theta_p] [x_{2p}  ]      theta_p = base^(-2p / d_rot)
//   [x'_{2p+1}] = [sin m theta_p    cos m theta_p] [x_{2p+1}]
//
// A rotation by m theta followed by the transpose of one by n theta is one by (n - m) theta, so
//
//   q'_m . k'_n = sum_p  cos((n - m) theta_p) (q_{2p} k_{2p} + q_{2p+1} k_{2p+1})
//                      + sin((n - m) theta_p) (q_{2p+1} k_{2p} - q_{2p} k_{2p+1})
//
// depends on the positions through m - n only: a relative encoding built from absolute
// rotations, with nothing added to the values. Queries turn by q_pos, keys by k_pos, memory keys
// included (a key keeps the rotation of its own position; poslab recomputes k from the cached
// layer input, so this is automatic).
//
// Layout choices (the paper leaves them open): pairs are adjacent dimensions (2p, 2p+1) of each
// head, as in the paper's equation (15) and the RoFormer code; GPT-NeoX / LLaMA-HF instead pair
// dimension p with p + d_rot/2, which is the same model up to a permutation of W_q and W_k's
// columns. Option `fraction` rotates only the first d_rot = 2 round(fraction * d_h / 2)
// dimensions of each head (GPT-NeoX's rotary_pct), the rest pass through unchanged; theta uses
// d_rot, as there.
//
// Hook (b), in place on q [B, L, H d_h] and k [B, K, H d_h]. Backward: the Jacobian of a rotation
// is the rotation, so the gradient is rotated back by the transpose, in place on dq and dk:
//   dx_{2p} = cos dy_{2p} + sin dy_{2p+1},   dx_{2p+1} = -sin dy_{2p} + cos dy_{2p+1}.
// No parameters. The cos/sin tables [rows, d_rot/2] are computed in double from the positions
// and reused while the positions do not change (every layer of a step shares them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "encodings/registry.hpp"

namespace poslab {

namespace {

template <class T>
class Rope : public Encoding<T> {
 public:
  Rope(const Options& o, const EncodingShape& s, ParameterArena<T>&)
      : H_(s.n_heads), dh_(s.d_head), base_(o.get_double("base")) {
    const double fraction = o.get_double("fraction");
    if (!(fraction >= 0 && fraction <= 1))
      throw std::invalid_argument("rope: fraction must be in [0, 1]");
    if (!(base_ > 1)) throw std::invalid_argument("rope: base must be > 1");
    pairs_ = int(std::lround(fraction * dh_ / 2.0));  // d_rot / 2
    if (2 * pairs_ > dh_) pairs_ = dh_ / 2;  // odd d_h: the last dimension is never rotated
    theta_.resize(pairs_);
    for (int p = 0; p < pairs_; ++p) theta_[p] = std::pow(base_, -2.0 * p / (2.0 * pairs_));
  }

  bool has_qk_transform() const override { return pairs_ > 0; }

  void qk_forward(int /*layer*/, const AttentionGeometry& g, T* q, T* k) override {
    check(g);
    rotate(q, g.batch, g.q_len, g.q_pos, q_table_, false);
    rotate(k, g.batch, g.k_len, g.k_pos, k_table_, false);
  }

  void qk_backward(int /*layer*/, const AttentionGeometry& g, T* dq, T* dk) override {
    check(g);
    rotate(dq, g.batch, g.q_len, g.q_pos, q_table_, true);
    rotate(dk, g.batch, g.k_len, g.k_pos, k_table_, true);
  }

  int rotated_dims() const { return 2 * pairs_; }

 private:
  // cos and sin of pos[r] * theta_p for the rows of q or of k, rebuilt only when the positions
  // change.
  struct Table {
    std::vector<std::int64_t> pos;  // the positions it was built for
    std::vector<T> cos, sin;        // [rows, pairs]
  };

  void check(const AttentionGeometry& g) const {
    if (g.n_heads != H_ || g.d_head != dh_)
      throw std::invalid_argument("rope: geometry does not match the shape it was built for");
  }

  void update(Table& t, const std::int64_t* pos, int rows) const {
    if (int(t.pos.size()) == rows && std::equal(t.pos.begin(), t.pos.end(), pos)) return;
    t.pos.assign(pos, pos + rows);
    t.cos.resize(std::size_t(rows) * pairs_);
    t.sin.resize(std::size_t(rows) * pairs_);
    for (int r = 0; r < rows; ++r)
      for (int p = 0; p < pairs_; ++p) {
        const double angle = double(pos[r]) * theta_[p];
        t.cos[std::size_t(r) * pairs_ + p] = T(std::cos(angle));
        t.sin[std::size_t(r) * pairs_ + p] = T(std::sin(angle));
      }
  }

  // x [B, rows, H d_h]: every head's first d_rot dims, pair by pair, turned by +angle (forward)
  // or -angle (inverse = backward).
  void rotate(T* x, int B, int rows, const std::int64_t* pos, Table& t, bool inverse) {
    update(t, pos, rows);
    const int d = H_ * dh_;
    const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static)
    for (long br = 0; br < long(B) * rows; ++br) {
      const long r = br % rows;
      const T* c = t.cos.data() + r * pairs_;
      const T* s = t.sin.data() + r * pairs_;
      for (int h = 0; h < H_; ++h) {
        T* xh = x + br * d + long(h) * dh_;
        for (int p = 0; p < pairs_; ++p) {
          const T x0 = xh[2 * p], x1 = xh[2 * p + 1], sn = sign * s[p];
          xh[2 * p] = c[p] * x0 - sn * x1;
          xh[2 * p + 1] = sn * x0 + c[p] * x1;
        }
      }
    }
  }

  int H_, dh_;
  double base_;
  int pairs_;                  // d_rot / 2
  std::vector<double> theta_;  // [pairs]: base^(-2p / d_rot)
  Table q_table_, k_table_;
};

}  // namespace

EncodingInfo rope_encoding_info() {
  return {"rope",
          EncodingFamily::relative,
          "RoPE: rotate each (2p, 2p+1) pair of q and k by position * base^(-2p/d_rot), so "
          "q.k depends on i - j only; no parameters",
          "Su et al. 2021",
          {
              {"base", 10000.0, "theta_p = base^(-2p/d_rot): the wavelengths run from 2 pi to "
               "2 pi base", 1.000001},
              {"fraction", 1.0,
               "rotate the first 2 round(fraction d_h / 2) dims of each head, leave the rest "
               "unchanged (GPT-NeoX rotary_pct)",
               0, 1},
          },
          factory_float<Rope>(),
          factory_double<Rope>()};
}

}  // namespace poslab
