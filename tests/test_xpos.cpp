// xPos (src/encodings/xpos.cpp):
//   1. registered, relative, no parameters, with its options;
//   2. q'_m . k'_n equals the closed form sum_i zeta_i^((m - n)/B) [RoPE's pair term], zeta_i and
//      theta_i recomputed here from the paper's formula (d_h not a power of two included);
//   3. whole-head scores are shift-invariant (memory keys included), also at positions where
//      zeta^(m/B) alone would under- or overflow (10^6);
//   4. it decays: a pair's weight at distance D is zeta_i^(D/B) < 1, unlike RoPE;
//   5. backward is the transpose of the forward Jacobian (finite differences of q and k).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

std::unique_ptr<Encoding<double>> make_xpos(const EncodingShape& shape,
                                            const std::map<std::string, OptionValue>& set = {}) {
  return make_parameterless("xpos", shape, set);
}

// Scores [B, H, L, K] of rotated q and k (all cells, no mask).
std::vector<double> head_scores(const std::vector<double>& q, const std::vector<double>& k, int B,
                                int H, int dh, int L, int K) {
  std::vector<double> s;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < K; ++j) {
          double x = 0;
          for (int c = 0; c < dh; ++c)
            x += q[(b * L + i) * H * dh + h * dh + c] * k[(b * K + j) * H * dh + h * dh + c];
          s.push_back(x);
        }
  return s;
}

}  // namespace

TEST_CASE("xpos: registered, relative, no parameters", "[xpos]") {
  const EncodingInfo* info = find_encoding("xpos");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Sun et al. 2022");
  const Options d = Options::defaults(info->options);
  CHECK(d.get_double("gamma") == 0.4);
  CHECK(d.get_double("scale_base") == 512.0);
  CHECK(d.get_double("base") == 10000.0);
  auto enc = make_xpos({8, 2, 4, 1});
  CHECK(enc->has_qk_transform());
  CHECK(!enc->has_score_terms());
  CHECK(!enc->has_value_terms());
}

TEST_CASE("xpos: q'_m . k'_n = sum_i zeta_i^((m - n)/B) x RoPE's pair term", "[xpos]") {
  struct Case {
    int dh;
    double gamma, scale_base, base;
  };
  for (const Case& c : {Case{8, 0.4, 512, 10000}, Case{6, 0.4, 16, 100}, Case{10, 0.2, 4, 10000},
                        Case{7, 0.4, 8, 10000}}) {  // d_h = 7: pairs over the first 6 dims
    CAPTURE(c.dh, c.gamma, c.scale_base);
    auto enc = make_xpos({c.dh, 1, c.dh, 1},
                         {{"gamma", c.gamma}, {"scale_base", c.scale_base}, {"base", c.base}});
    Rng rng(4);
    const auto q = random_vector(c.dh, rng), k = random_vector(c.dh, rng);
    const int pairs = c.dh / 2;
    const double d = 2.0 * pairs;
    for (std::int64_t m : {0, 5, 40, 3000}) {
      for (std::int64_t delta : {0, 1, 7, 33}) {
        CAPTURE(m, delta);
        std::int64_t n = m - delta;
        AttentionGeometry g{1, 1, 0, 1, 1, c.dh, 0, &m, &n};
        auto qr = q, kr = k;
        enc->qk_forward(0, g, qr.data(), kr.data());
        double closed = 0;
        for (int i = 0; i < pairs; ++i) {
          const double zeta = (2.0 * i + c.gamma * d) / ((1.0 + c.gamma) * d);  // the paper's
          const double theta = std::pow(c.base, -2.0 * i / d);
          const double phi = double(n - m) * theta;
          closed += std::pow(zeta, double(m - n) / c.scale_base) *
                    (std::cos(phi) * (q[2 * i] * k[2 * i] + q[2 * i + 1] * k[2 * i + 1]) +
                     std::sin(phi) * (q[2 * i + 1] * k[2 * i] - q[2 * i] * k[2 * i + 1]));
        }
        if (c.dh % 2) closed += q[c.dh - 1] * k[c.dh - 1];  // the odd dimension passes through
        CHECK(std::abs(dot(qr, kr) - closed) < 1e-12 * (1.0 + double(m)));
      }
    }
  }
}

TEST_CASE("xpos: whole-head scores are shift-invariant, memory keys included, far positions too",
          "[xpos]") {
  const int B = 2, H = 2, dh = 6, L = 3, M = 2, K = M + L;
  auto enc = make_xpos({H * dh, H, dh, 1}, {{"scale_base", 4.0}});
  Rng rng(5);
  const auto q = random_vector(B * L * H * dh, rng), k = random_vector(B * K * H * dh, rng);
  auto scores = [&](std::int64_t shift) {
    Positions pos(L, M, shift);
    AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
    auto qr = q, kr = k;
    enc->qk_forward(0, g, qr.data(), kr.data());
    return head_scores(qr, kr, B, H, dh, L, K);
  };
  // At position 10^6 with B = 4, zeta_0^(m/B) alone would be 0.29^250000 = 0: the centring keeps
  // the scales finite and the scores the same.
  const auto s0 = scores(0), s1 = scores(29), s2 = scores(1000000);
  for (std::size_t n = 0; n < s0.size(); ++n) {
    CAPTURE(n);
    REQUIRE(std::isfinite(s2[n]));
    CHECK(std::abs(s0[n] - s1[n]) < 1e-12);
    CHECK(std::abs(s0[n] - s2[n]) < 1e-9);  // angles of size 10^6 theta: rounding ~1e-10
  }
}

TEST_CASE("xpos: each pair decays as zeta_i^(distance / B)", "[xpos]") {
  // One pair (d_h = 2, theta_0 = 1, zeta_0 = gamma / (1 + gamma)), q = k = (1, 0): the score is
  // zeta_0^(D/B) cos(D); at distances D that are multiples of 2 pi's nearest integers the cosine
  // is near 1, and the decay shows.
  const double gamma = 0.4, B = 8;
  auto enc = make_xpos({2, 1, 2, 1}, {{"gamma", gamma}, {"scale_base", B}});
  for (std::int64_t D : {0, 6, 44, 88}) {
    CAPTURE(D);
    std::int64_t m = 100, n = m - D;
    AttentionGeometry g{1, 1, 0, 1, 1, 2, 0, &m, &n};
    std::vector<double> q = {1, 0}, k = {1, 0};
    enc->qk_forward(0, g, q.data(), k.data());
    const double zeta = gamma / (1 + gamma);
    CHECK(dot(q, k) == Approx(std::pow(zeta, D / B) * std::cos(double(D))).epsilon(1e-12));
  }
}

TEST_CASE("xpos: backward is the transpose of the forward Jacobian (finite differences)",
          "[xpos][grad]") {
  const int B = 2, H = 2, dh = 6, L = 3, M = 2, K = M + L;
  Positions pos(L, M, 11);
  AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
  for (double scale_base : {512.0, 3.0}) {
    CAPTURE(scale_base);
    auto enc = make_xpos({H * dh, H, dh, 1}, {{"scale_base", scale_base}});
    require_qk_hook_transpose(enc, g, 6);
  }
}
