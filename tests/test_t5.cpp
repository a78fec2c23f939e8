// T5 relative position bias (src/encodings/t5_bias.cpp, t5_buckets.hpp):
//   1. the bucket of every distance at and around every boundary, both directions, with the
//      expectations worked out by hand from the formula (not from running the code);
//   2. the hook adds b[bucket, h] unscaled, on visible cells only, with one table for all layers;
//   3. finite-difference gradients of the table, alone and through attention with memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "encodings/t5_buckets.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

Options t5_options(int num_buckets = 32, int max_distance = 128, bool bidirectional = false,
                   double init_std = 0.02) {
  Options o = default_options("t5_bias");
  o.set("num_buckets", std::int64_t(num_buckets));
  o.set("max_distance", std::int64_t(max_distance));
  o.set("bidirectional", bidirectional);
  o.set("init_std", init_std);
  return o;
}

// (distance n = i - j, expected bucket) pairs.
using Table = std::vector<std::pair<std::int64_t, int>>;

void check_buckets(const Table& expected, bool bidirectional, int nb, int max_distance) {
  for (auto [n, bucket] : expected) {
    CAPTURE(n, bidirectional, nb, max_distance);
    CHECK(t5_relative_bucket(n, bidirectional, nb, max_distance) == bucket);
  }
}

}  // namespace

TEST_CASE("t5: registered with its options", "[t5]") {
  const EncodingInfo* info = find_encoding("t5_bias");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Raffel et al. 2020");
  const Options d = Options::defaults(info->options);
  CHECK(d.get_int("num_buckets") == 32);
  CHECK(d.get_int("max_distance") == 128);
  CHECK(!d.get_bool("bidirectional"));
  CHECK(d.get_double("init_std") == 0.02);
  ParameterArena<double> bad;
  CHECK_THROWS_AS(info->make<double>(t5_options(32, 16), {8, 2, 4, 1}, bad),
                  std::invalid_argument);  // max_distance must exceed max_exact = 16
  CHECK_THROWS_AS(info->make<double>(t5_options(2, 16, true), {8, 2, 4, 1}, bad),
                  std::invalid_argument);  // one bucket per direction
}

TEST_CASE("t5: causal buckets at and around every boundary (32 buckets, max distance 128)",
          "[t5]") {
  // n < 16: bucket n. Else 16 + floor(16 log(n/16) / log 8), i.e. bucket 16 + m starts at
  // n = ceil(16 * 8^(m/16)):  m = 0..16 -> 16, 18.22, 20.75, 23.63, 26.91, 30.64, 34.90, 39.74,
  // 45.25, 51.54, 58.69, 66.83, 76.11, 86.67, 98.70, 112.40, 128 (capped at 31).
  Table t;
  for (int n = 0; n < 16; ++n) t.push_back({n, n});
  t.insert(t.end(), {{-1, 0}, {-1000, 0},  // keys to the right never happen causally: bucket 0
                     {16, 16}, {17, 16}, {18, 16}, {19, 17}, {20, 17}, {21, 18}, {23, 18},
                     {24, 19}, {26, 19}, {27, 20}, {30, 20}, {31, 21}, {34, 21}, {35, 22},
                     {39, 22}, {40, 23}, {45, 23}, {46, 24}, {51, 24}, {52, 25}, {58, 25},
                     {59, 26}, {66, 26}, {67, 27}, {76, 27}, {77, 28}, {86, 28}, {87, 29},
                     {98, 29}, {99, 30}, {112, 30}, {113, 31}, {127, 31}, {128, 31}, {129, 31},
                     {1000, 31}, {std::int64_t(1) << 40, 31}});
  check_buckets(t, false, 32, 128);
}

TEST_CASE("t5: bidirectional buckets at and around every boundary (32 buckets, max 128)",
          "[t5]") {
  // 16 buckets per direction: |n| < 8 exact, else 8 + floor(8 log(|n|/8) / log 16) =
  // 8 + floor(2 log2(|n|/8)), capped at 15. Bucket 8 + m starts at |n| = ceil(8 * 2^(m/2)):
  // 8, 11.31, 16 (exact), 22.63, 32 (exact), 45.25, 64 (exact), 90.51, 128 (capped).
  // Keys to the right of the query (n = i - j < 0) are offset by 16.
  const Table left = {{0, 0},   {1, 1},   {7, 7},   {8, 8},   {11, 8},  {12, 9},  {15, 9},
                      {16, 10}, {17, 10}, {22, 10}, {23, 11}, {31, 11}, {32, 12}, {33, 12},
                      {45, 12}, {46, 13}, {63, 13}, {64, 14}, {65, 14}, {90, 14}, {91, 15},
                      {127, 15}, {128, 15}, {5000, 15}};
  check_buckets(left, true, 32, 128);
  Table right;
  for (auto [n, bucket] : left)
    if (n > 0) right.push_back({-n, 16 + bucket});
  check_buckets(right, true, 32, 128);
  CHECK(t5_relative_bucket(-1, true, 32, 128) == 17);
  CHECK(t5_relative_bucket(0, true, 32, 128) == 0);  // same position: not "to the right"
}

TEST_CASE("t5: buckets of a small configuration (8 buckets, max distance 20)", "[t5]") {
  // Causal: n < 4 exact; else 4 + floor(4 log(n/4) / log 5), capped at 7. Bucket 4 + m starts at
  // n = ceil(4 * 5^(m/4)): 4, 5.98, 8.94, 13.37, 20 (capped).
  check_buckets({{3, 3}, {4, 4}, {5, 4}, {6, 5}, {8, 5}, {9, 6}, {13, 6}, {14, 7}, {19, 7},
                 {20, 7}, {400, 7}},
                false, 8, 20);
  // Bidirectional: 4 per direction, |n| < 2 exact; else 2 + floor(2 log(|n|/2) / log 10),
  // capped at 3; bucket 3 starts at 2 * sqrt(10) = 6.32.
  check_buckets({{0, 0}, {1, 1}, {2, 2}, {6, 2}, {7, 3}, {50, 3}, {-1, 5}, {-2, 6}, {-6, 6},
                 {-7, 7}, {-50, 7}},
                true, 8, 20);
}

TEST_CASE("t5: the hook adds b[bucket(i - j), h] unscaled on visible cells, every layer",
          "[t5]") {
  // Two queries at positions 200, 201; memory keys far back so that every kind of bucket occurs.
  const int B = 2, H = 3, dh = 2, L = 2, M = 8, K = M + L;
  std::vector<std::int64_t> qp = {200, 201}, kp = {0, 50, 100, 150, 185, 190, 198, 199, 200, 201};
  for (int window : {0, 6})
    for (bool bidirectional : {false, true}) {
      CAPTURE(window, bidirectional);
      AttentionGeometry g{B, L, M, K, H, dh, window, qp.data(), kp.data()};
      ParameterArena<double> arena;
      auto enc = find_encoding("t5_bias")->make<double>(t5_options(32, 128, bidirectional),
                                                        {H * dh, H, dh, 3}, arena);
      REQUIRE(arena.slots().size() == 1);  // one table for all three layers
      CHECK(arena.slots()[0].name == "t5.bias");
      CHECK(arena.slots()[0].shape == std::vector<std::size_t>{32, 3});
      CHECK(!arena.slots()[0].weight_decay);
      arena.allocate();
      double* b = arena.values();
      for (int bucket = 0; bucket < 32; ++bucket)
        for (int h = 0; h < H; ++h) b[bucket * H + h] = 10.0 * bucket + h + 0.25;
      std::vector<double> q(B * L * H * dh, 1.0), k(B * K * H * dh, 1.0);
      for (int layer : {0, 2}) {
        std::vector<double> scores(B * H * L * K, -3.0);
        enc->scores_forward(layer, g, q.data(), k.data(), 0.37, scores.data());
        check_score_cells(g, scores, -3.0, [&](int, int h, int i, int j, double s) {
          const int bucket = t5_relative_bucket(qp[i] - kp[j], bidirectional, 32, 128);
          CAPTURE(qp[i] - kp[j], bucket);
          CHECK(s == -3.0 + 10.0 * bucket + h + 0.25);
        });
      }
    }
}

TEST_CASE("t5: finite-difference gradient of the shared table", "[t5][grad]") {
  const int B = 2, L = 3, M = 4, K = M + L, H = 2, dh = 3, layers = 2;
  Positions pos(L, M, 5);
  for (bool bidirectional : {false, true}) {
    CAPTURE(bidirectional);
    ParameterArena<double> arena;
    // 8 buckets, max distance 5: distances 0..6 reach exact and log buckets and the cap.
    auto enc = find_encoding("t5_bias")->make<double>(t5_options(8, 5, bidirectional, 1.0),
                                                      {H * dh, H, dh, layers}, arena);
    arena.allocate();
    Rng rng(3);
    enc->init(arena, rng);
    AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
    auto q = random_vector(B * L * H * dh, rng), k = random_vector(B * K * H * dh, rng);
    // Both layers use the table: the loss sums their scores with different weights.
    auto R0 = random_vector(B * H * L * K, rng), R1 = random_vector(B * H * L * K, rng);
    zero_masked(R0, g);
    zero_masked(R1, g);
    const std::vector<double> s0 = random_vector(B * H * L * K, rng);
    auto dq = random_vector(q.size(), rng), dk = random_vector(k.size(), rng);
    const auto dq0 = dq, dk0 = dk;
    check_two_layer_score_gradients(*enc, arena, g, q, k, s0, R0, R1, dq, dk, "t5.bias");
    CHECK(dq == dq0);  // the bias does not depend on q or k
    CHECK(dk == dk0);
  }
}

