// ALiBi (src/encodings/alibi.cpp, alibi_slopes.hpp):
//   1. the head slopes for 8 and 12 heads against hand-computed values, and for 1, 2, 3, 6, 16;
//   2. the hook subtracts m_h (i - j), unscaled, on visible cells only (memory, same_length);
//   3. gradients through attention with memory (the bias is constant: only the content path).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/alibi_slopes.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

// Slopes equal to within one rounding of 2^(-x) for non-integer x (exp2 vs a hand-written
// sqrt(1/2) * 2^-n may differ in the last bit); powers of two are exact.
void check_slopes(const std::vector<double>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t h = 0; h < got.size(); ++h) {
    CAPTURE(h, got[h], expected[h]);
    CHECK(std::abs(got[h] - expected[h]) <= 4e-16 * expected[h]);
  }
}

}  // namespace

TEST_CASE("alibi: registered, no options of its own, no parameters", "[alibi]") {
  const EncodingInfo* info = find_encoding("alibi");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Press et al. 2022");
  // Only the options every encoding has (log-n scaling, registry.cpp).
  REQUIRE(info->options.size() == 2);
  CHECK(info->options[0].key == "log_n");
  CHECK(info->options[1].key == "log_n_len");
  ParameterArena<double> arena;
  auto enc = info->make<double>(Options(), {8, 2, 4, 3}, arena);
  CHECK(arena.slots().empty());
  CHECK(enc->has_score_terms());
  CHECK(!enc->has_value_terms());
  CHECK(!enc->has_qk_transform());
}

TEST_CASE("alibi: head slopes", "[alibi]") {
  const double r = std::sqrt(0.5);  // 2^-0.5
  SECTION("8 heads: 2^-1 .. 2^-8, exactly") {
    const std::vector<double> expected = {0.5,     0.25,     0.125,     0.0625,
                                          0.03125, 0.015625, 0.0078125, 0.00390625};
    CHECK(alibi_slopes(8) == expected);
  }
  SECTION("12 heads: the 8-head slopes, then every other 16-head slope 2^-0.5 .. 2^-3.5") {
    check_slopes(alibi_slopes(12), {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125,
                                    0.00390625, r, r / 2, r / 4, r / 8});
    // The power-of-two part is exact.
    for (int h = 0; h < 8; ++h) CHECK(alibi_slopes(12)[h] == std::ldexp(1.0, -(h + 1)));
  }
  SECTION("1, 2, 3, 6 and 16 heads") {
    CHECK(alibi_slopes(1) == std::vector<double>{1.0 / 256});
    CHECK(alibi_slopes(2) == std::vector<double>{1.0 / 16, 1.0 / 256});
    // 3: the 2-head slopes, then the first of every other 4-head slope (1/4, 1/64).
    CHECK(alibi_slopes(3) == std::vector<double>{1.0 / 16, 1.0 / 256, 1.0 / 4});
    // 6: the 4-head slopes 1/4 .. 1/256, then 1/2, 1/8 (every other 8-head slope).
    CHECK(alibi_slopes(6) ==
          std::vector<double>{1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8});
    // 16: 2^(-h/2).
    std::vector<double> expected16;
    for (int h = 1; h <= 16; ++h) expected16.push_back(h % 2 == 0 ? std::ldexp(1.0, -h / 2)
                                                                  : r * std::ldexp(1.0, -(h / 2)));
    check_slopes(alibi_slopes(16), expected16);
    CHECK_THROWS_AS(alibi_slopes(0), std::invalid_argument);
  }
}

TEST_CASE("alibi: the hook subtracts m_h (i - j), unscaled, on visible cells", "[alibi]") {
  const int B = 2, H = 3, dh = 2, L = 3, M = 4, K = M + L;
  Positions pos(L, M, 40);
  const std::vector<double> m = {1.0 / 16, 1.0 / 256, 1.0 / 4};  // 3 heads, see above
  for (int window : {0, 5}) {
    CAPTURE(window);
    AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
    ParameterArena<double> arena;
    auto enc = find_encoding("alibi")->make<double>(Options(), {H * dh, H, dh, 2}, arena);
    std::vector<double> q(B * L * H * dh, 1.0), k(B * K * H * dh, 1.0);
    std::vector<double> scores(B * H * L * K, 2.0);
    enc->scores_forward(1, g, q.data(), k.data(), 0.123, scores.data());
    check_score_cells(g, scores, 2.0, [&](int, int h, int i, int j, double s) {
      CHECK(s == 2.0 - m[h] * double(i + M - j));  // i - j in positions = i + M - j
    });
  }
}

