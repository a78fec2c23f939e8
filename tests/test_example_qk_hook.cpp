// The q/k hook, worked through (docs/07, "Another hook: transforming q and k"): a scaled rotation,
// written as a test-only encoding so that the chapter's code is compiled and checked.
//
//   q'_m = g^m  R(m theta) q_m,      k'_n = g^-n R(n theta) k_n,      theta_p = base^(-2p / d_h)
//
// R(m theta) turns pair (2p, 2p+1) of every head by the angle m theta_p, as RoPE does, and the
// factor g^(+-m) scales it, as xPos does (with one g for every pair; xPos gives each pair its own,
// src/encodings/xpos.cpp). Since R(m theta)^T R(n theta) = R((n - m) theta),
//
//   q'_m . k'_n = g^(m - n) q_m^T R((n - m) theta) k_n,
//
// a function of m - n only (a relative encoding), which for g < 1 fades with the distance.
// g^m over- or underflows for large positions; xPos keeps the exponent small by dividing it by
// scale_base (512). This example is for reading, not for training: it is not registered.
//
// The tests: the transform equals the formula at hand-picked values; scores depend on m - n only;
// the backward passes a finite-difference check alone and through an attention layer with
// memory; and the newcomer's mistake, a backward that applies the INVERSE map instead of the
// TRANSPOSE of the Jacobian, fails the check as soon as g != 1 (for g = 1, a pure rotation, the
// two are the same matrix, so a plain RoPE test cannot catch it).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

// How the backward maps dy to dx: the right way, or the newcomer's first attempt.
enum class Backward { transpose, inverse };

template <class T>
class ScaledRotation : public Encoding<T> {
 public:
  // gamma: g; base: of the frequencies theta_p; H heads of d_head (even) dimensions.
  ScaledRotation(double gamma, double base, int n_heads, int d_head,
                 Backward backward = Backward::transpose)
      : g_(gamma), H_(n_heads), dh_(d_head), backward_(backward), theta_(d_head / 2) {
    for (int p = 0; p < dh_ / 2; ++p) theta_[p] = std::pow(base, -2.0 * p / dh_);
  }

  bool has_qk_transform() const override { return true; }

  // q [B, L, H d_h] at positions q_pos [L] (sign +1: g^m), k [B, K, H d_h] at k_pos [K]
  // (sign -1: g^-n), in place.
  void qk_forward(int /*layer*/, const AttentionGeometry& g, T* q, T* k) override {
    turn(q, g.batch, g.q_len, g.q_pos, +1, Map::forward);
    turn(k, g.batch, g.k_len, g.k_pos, -1, Map::forward);
  }

  // dq, dk in place: dx = J^T dy. The Jacobian of y = a R x is J = a R, so J^T = a R^T: the
  // same scale a, the rotation turned back. (J^-1 = R^T / a is a different matrix when a != 1.)
  void qk_backward(int /*layer*/, const AttentionGeometry& g, T* dq, T* dk) override {
    const Map map = backward_ == Backward::transpose ? Map::transpose : Map::inverse;
    turn(dq, g.batch, g.q_len, g.q_pos, +1, map);
    turn(dk, g.batch, g.k_len, g.k_pos, -1, map);
  }

 private:
  enum class Map { forward, transpose, inverse };

  // x [B, rows, H d_h]: every pair of every head of row r multiplied by a R(pos[r] theta)
  // (forward), by its transpose a R^T (backward), or by its inverse R^T / a (the mistake), with
  // a = g^(sign pos[r]).
  void turn(T* x, int B, int rows, const std::int64_t* pos, int sign, Map map) const {
    for (int b = 0; b < B; ++b)
      for (int r = 0; r < rows; ++r) {
        const double a = std::pow(g_, double(sign * pos[r]));   // g^(+-m)
        const double scale = map == Map::inverse ? 1.0 / a : a;  // J^-1 = R^T / a
        const double turn_back = map == Map::forward ? 1.0 : -1.0;  // R^T = R(-m theta)
        T* row = x + (std::size_t(b) * rows + r) * H_ * dh_;
        for (int h = 0; h < H_; ++h)
          for (int p = 0; p < dh_ / 2; ++p) {
            const double angle = double(pos[r]) * theta_[p];
            const T c = T(scale * std::cos(angle)), s = T(turn_back * scale * std::sin(angle));
            T& x0 = row[h * dh_ + 2 * p];
            T& x1 = row[h * dh_ + 2 * p + 1];
            const T y0 = c * x0 - s * x1;  // [y0]   [c  -s] [x0]
            const T y1 = s * x0 + c * x1;  // [y1] = [s   c] [x1]
            x0 = y0;
            x1 = y1;
          }
      }
  }

  double g_;
  int H_, dh_;
  Backward backward_;
  std::vector<double> theta_;  // [d_h / 2]
};

// The geometry of the gradient checks: 2 rows, 2 heads of 4 dimensions (two pairs each: with base
// 100, theta = (1, 0.1)), 3 queries, 2 rows of memory.
constexpr int kB = 2, kH = 2, kDh = 4, kL = 3, kM = 2, kK = kM + kL;

}  // namespace

TEST_CASE("example q/k hook: the scaled rotation at hand-picked values", "[example]") {
  // g = 0.5, base 100, one row at position 2: pair 0 turns by 2 rad, pair 1 by 0.2 rad, both
  // scaled by 0.5^2 = 0.25 (a query) or 0.5^-2 = 4 (a key).
  ScaledRotation<double> enc(0.5, 100.0, 1, 4);
  const std::int64_t pos[] = {2};
  const AttentionGeometry g{1, 1, 0, 1, 1, 4, 0, pos, pos};
  std::vector<double> q = {1, 0, 0, 1}, k = {1, 0, 0, 1};
  enc.qk_forward(0, g, q.data(), k.data());
  CHECK(q[0] == Approx(0.25 * std::cos(2.0)));
  CHECK(q[1] == Approx(0.25 * std::sin(2.0)));
  CHECK(q[2] == Approx(-0.25 * std::sin(0.2)));
  CHECK(q[3] == Approx(0.25 * std::cos(0.2)));
  CHECK(k[0] == Approx(4 * std::cos(2.0)));
  CHECK(k[3] == Approx(4 * std::cos(0.2)));
}

TEST_CASE("example q/k hook: q'.k' depends on m - n only (a relative encoding)", "[example]") {
  ScaledRotation<double> enc(0.9, 100.0, 1, 4);
  Rng rng(3);
  const auto q = random_vector(4, rng), k = random_vector(4, rng);
  auto score = [&](std::int64_t m, std::int64_t n) {
    std::vector<double> qm = q, kn = k;
    const AttentionGeometry g{1, 1, 0, 1, 1, 4, 0, &m, &n};
    enc.qk_forward(0, g, qm.data(), kn.data());
    return dot(qm, kn);
  };
  for (std::int64_t shift : {1, 17, 40}) {
    CAPTURE(shift);
    CHECK(score(5 + shift, 2 + shift) == Approx(score(5, 2)).epsilon(1e-12));
    CHECK(score(3 + shift, 3 + shift) == Approx(score(3, 3)).epsilon(1e-12));
  }
  // ... and the factor is g^(m - n): three positions apart, 0.9^3 times RoPE's score (g = 1).
  ScaledRotation<double> plain(1.0, 100.0, 1, 4);
  std::int64_t m = 5, n = 2;
  std::vector<double> qm = q, kn = k;
  const AttentionGeometry g{1, 1, 0, 1, 1, 4, 0, &m, &n};
  plain.qk_forward(0, g, qm.data(), kn.data());
  CHECK(score(5, 2) == Approx(std::pow(0.9, 3) * dot(qm, kn)).epsilon(1e-12));
}

TEST_CASE("example q/k hook: the backward is the transpose of the Jacobian, and the gradient "
          "check catches the inverse", "[example]") {
  // loss = sum(Rq * q') + sum(Rk * k'), so dloss/dq' = Rq and dloss/dk' = Rk: the backward maps
  // them to dloss/dq and dloss/dk.
  std::vector<std::int64_t> qp(kL), kp(kK);
  std::iota(qp.begin(), qp.end(), 7);       // queries at 7, 8, 9
  std::iota(kp.begin(), kp.end(), 7 - kM);  // keys at 5 .. 9, the first two memory
  const AttentionGeometry g{kB, kL, kM, kK, kH, kDh, 0, qp.data(), kp.data()};
  Rng rng(5);
  auto q = random_vector(kB * kL * kH * kDh, rng), k = random_vector(kB * kK * kH * kDh, rng);
  const auto Rq = random_vector(q.size(), rng), Rk = random_vector(k.size(), rng);

  auto check = [&](ScaledRotation<double>& enc) {
    auto loss = [&] {
      std::vector<double> qt = q, kt = k;
      enc.qk_forward(0, g, qt.data(), kt.data());
      return dot(Rq, qt) + dot(Rk, kt);
    };
    std::vector<double> dq = Rq, dk = Rk;
    enc.qk_backward(0, g, dq.data(), dk.data());
    const double worst_q = finite_difference_check(q.data(), dq.data(), q.size(), loss).worst_rel_error;
    const double worst_k = finite_difference_check(k.data(), dk.data(), k.size(), loss).worst_rel_error;
    return std::max(worst_q, worst_k);
  };

  SECTION("the transpose passes, whatever g") {
    for (double gamma : {1.0, 0.8, 1.1}) {
      CAPTURE(gamma);
      ScaledRotation<double> enc(gamma, 100.0, kH, kDh, Backward::transpose);
      CHECK(check(enc) < 1e-6);
    }
  }
  SECTION("the inverse passes only for a pure rotation (g = 1), and fails as soon as g != 1") {
    ScaledRotation<double> rotation(1.0, 100.0, kH, kDh, Backward::inverse);
    CHECK(check(rotation) < 1e-6);
    ScaledRotation<double> scaled(0.8, 100.0, kH, kDh, Backward::inverse);
    CHECK(check(scaled) > 0.1);
  }
}

TEST_CASE("example q/k hook: gradients through an attention layer with memory", "[example]") {
  std::vector<std::int64_t> qp(kL), kp(kK);
  std::iota(qp.begin(), qp.end(), 7);
  std::iota(kp.begin(), kp.end(), 7 - kM);
  const AttentionGeometry g{kB, kL, kM, kK, kH, kDh, 0, qp.data(), kp.data()};
  ParameterArena<double> arena;
  ScaledRotation<double> enc(0.8, 100.0, kH, kDh);
  Attention<double> attn(arena, "attn.", kH * kDh, kH);
  arena.allocate();
  Rng rng(7);
  attn.init(rng, 0.5);
  check_attention_gradients(attn, enc, arena, g, 0, rng, "x", "W_q, W_k, W_v, W_o");
}
