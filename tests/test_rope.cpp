// RoPE (src/encodings/rope.cpp):
//   1. the rotation of a small vector against the formula, pair by pair, with `fraction`;
//   2. the score q_m . k_n depends on m - n only, and equals the closed form;
//   3. memory keys keep the rotation of their own position;
//   4. backward is the inverse rotation: finite-difference gradients of q and k, alone and
//      through attention with memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

Options rope_options(double base = 10000, double fraction = 1.0) {
  Options o = default_options("rope");
  o.set("base", base);
  o.set("fraction", fraction);
  return o;
}

std::unique_ptr<Encoding<double>> make_rope(const EncodingShape& s, double base = 10000,
                                            double fraction = 1.0) {
  ParameterArena<double> arena;
  auto enc = find_encoding("rope")->make<double>(rope_options(base, fraction), s, arena);
  REQUIRE(arena.count() == 0);  // no parameters
  return enc;
}

// Rotates one query (position m) and one key (position n) of a single head; returns q'.k'.
double rotated_score(Encoding<double>& enc, int dh, std::vector<double> q, std::vector<double> k,
                     std::int64_t m, std::int64_t n) {
  AttentionGeometry g{1, 1, 0, 1, 1, dh, 0, &m, &n};
  enc.qk_forward(0, g, q.data(), k.data());
  return dot(q, k);
}

}  // namespace

TEST_CASE("rope: registered with its options", "[rope]") {
  const EncodingInfo* info = find_encoding("rope");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Su et al. 2021");
  const Options d = Options::defaults(info->options);
  CHECK(d.get_double("base") == 10000.0);
  CHECK(d.get_double("fraction") == 1.0);
  auto enc = make_rope({8, 2, 4, 1});
  CHECK(enc->has_qk_transform());
  CHECK(!enc->has_score_terms());
  CHECK(!enc->has_value_terms());
  CHECK(!make_rope({8, 2, 4, 1}, 10000, 0.0)->has_qk_transform());  // nothing to rotate
}

TEST_CASE("rope: each pair turns by pos * base^(-2p/d_rot); unrotated dims pass through",
          "[rope]") {
  // d_h = 6, base 100. fraction 1: d_rot = 6, theta = 1, 100^(-1/3), 100^(-2/3).
  // fraction 0.5: d_rot = 2 round(1.5) = 4, theta = 1, 100^(-1/2) = 0.1; dims 4, 5 unchanged.
  // fraction 0.34: d_rot = 2 round(1.02) = 2, theta = 1; dims 2..5 unchanged.
  struct Case {
    double fraction;
    std::vector<double> theta;
  };
  for (const Case& c : {Case{1.0, {1.0, std::pow(100.0, -1.0 / 3), std::pow(100.0, -2.0 / 3)}},
                        Case{0.5, {1.0, 0.1}}, Case{0.34, {1.0}}}) {
    CAPTURE(c.fraction);
    const int H = 2, dh = 6, L = 2, K = 3, M = 1;
    auto enc = make_rope({H * dh, H, dh, 1}, 100, c.fraction);
    std::vector<std::int64_t> qp = {7, 8}, kp = {3, 7, 8};  // memory key at 3
    AttentionGeometry g{1, L, M, K, H, dh, 0, qp.data(), kp.data()};
    std::vector<double> q(L * H * dh), k(K * H * dh);
    std::iota(q.begin(), q.end(), 1.0);
    std::iota(k.begin(), k.end(), -5.0);
    const auto q0 = q, k0 = k;
    enc->qk_forward(0, g, q.data(), k.data());
    auto check_rows = [&](const std::vector<double>& x0, const std::vector<double>& x,
                          const std::vector<std::int64_t>& pos) {
      for (std::size_t r = 0; r < pos.size(); ++r)
        for (int h = 0; h < H; ++h) {
          const double* a = x0.data() + (r * H + h) * dh;
          const double* y = x.data() + (r * H + h) * dh;
          for (int p = 0; p < dh / 2; ++p) {
            CAPTURE(r, h, p);
            if (p < int(c.theta.size())) {
              const double angle = double(pos[r]) * c.theta[p];
              CHECK(y[2 * p] == Approx(std::cos(angle) * a[2 * p] - std::sin(angle) * a[2 * p + 1])
                                    .epsilon(1e-14));
              CHECK(y[2 * p + 1] ==
                    Approx(std::sin(angle) * a[2 * p] + std::cos(angle) * a[2 * p + 1])
                        .epsilon(1e-14));
            } else {
              CHECK(y[2 * p] == a[2 * p]);
              CHECK(y[2 * p + 1] == a[2 * p + 1]);
            }
          }
        }
    };
    check_rows(q0, q, qp);
    check_rows(k0, k, kp);  // the memory key turns by its own position 3
  }
}

TEST_CASE("rope: q_m . k_n depends only on m - n, and equals the closed form", "[rope]") {
  const int dh = 8;
  const double base = 10000;
  auto enc = make_rope({dh, 1, dh, 1}, base);
  Rng rng(1);
  const auto q = random_vector(dh, rng), k = random_vector(dh, rng);
  for (std::int64_t delta : {0, 1, 5, 37, -3}) {
    CAPTURE(delta);
    // q'_m . k'_n = sum_p cos((n - m) theta_p) (q_2p k_2p + q_2p+1 k_2p+1)
    //                   + sin((n - m) theta_p) (q_2p+1 k_2p - q_2p k_2p+1)
    double closed = 0;
    for (int p = 0; p < dh / 2; ++p) {
      const double phi = double(-delta) * std::pow(base, -2.0 * p / dh);
      closed += std::cos(phi) * (q[2 * p] * k[2 * p] + q[2 * p + 1] * k[2 * p + 1]) +
                std::sin(phi) * (q[2 * p + 1] * k[2 * p] - q[2 * p] * k[2 * p + 1]);
    }
    for (std::int64_t m : {0, 3, 17, 1000, 123457}) {
      CAPTURE(m);
      const double s = rotated_score(*enc, dh, q, k, m, m - delta);
      // Angles of size m theta carry a rounding error of about m * 1e-16 radians.
      CHECK(std::abs(s - closed) < 1e-13 * (1.0 + double(m)));
    }
  }
  // And it does depend on the distance.
  CHECK(std::abs(rotated_score(*enc, dh, q, k, 10, 9) - rotated_score(*enc, dh, q, k, 10, 5)) >
        1e-3);
}

TEST_CASE("rope: whole-head scores are shift-invariant, memory keys included", "[rope]") {
  const int B = 2, H = 2, dh = 4, L = 3, M = 2, K = M + L;
  auto enc = make_rope({H * dh, H, dh, 1});
  Rng rng(2);
  const auto q = random_vector(B * L * H * dh, rng), k = random_vector(B * K * H * dh, rng);
  auto scores = [&](std::int64_t shift) {
    Positions pos(L, M, shift);
    AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
    auto qr = q, kr = k;
    enc->qk_forward(0, g, qr.data(), kr.data());
    std::vector<double> s;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            double x = 0;
            for (int c = 0; c < dh; ++c)
              x += qr[(b * L + i) * H * dh + h * dh + c] * kr[(b * K + j) * H * dh + h * dh + c];
            s.push_back(x);
          }
    return s;
  };
  const auto s0 = scores(0), s1 = scores(29), s2 = scores(5000);
  for (std::size_t n = 0; n < s0.size(); ++n) {
    CHECK(std::abs(s0[n] - s1[n]) < 1e-12);
    CHECK(std::abs(s0[n] - s2[n]) < 1e-11);
  }
}

TEST_CASE("rope: backward is the inverse rotation (finite differences of q and k)",
          "[rope][grad]") {
  const int B = 2, H = 2, dh = 6, L = 3, M = 2, K = M + L;
  Positions pos(L, M, 11);
  AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
  for (double fraction : {1.0, 0.5}) {
    CAPTURE(fraction);
    auto enc = make_rope({H * dh, H, dh, 1}, 10000, fraction);
    const auto [q, k] = require_qk_hook_transpose(enc, g, 3);
    // Forward then backward on the same vector gives it back (rotations are orthogonal).
    auto x = q, y = k;
    enc->qk_forward(0, g, x.data(), y.data());
    enc->qk_backward(0, g, x.data(), y.data());
    for (std::size_t n = 0; n < q.size(); ++n) CHECK(std::abs(x[n] - q[n]) < 1e-14);
    for (std::size_t n = 0; n < k.size(); ++n) CHECK(std::abs(y[n] - k[n]) < 1e-14);
  }
}

