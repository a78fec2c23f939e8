// The tutorial's example encoding (src/encodings/example_distance_bias.cpp, docs/07):
//   1. registered, with its options and one shared table;
//   2. the bias at distances 0, k-1, k and k+5, against values worked out by hand; masked cells
//      untouched; the score scale ignored; q and k receive no gradient;
//   3. finite-difference gradients of the table: through the hook alone, and through a whole
//      attention layer with memory.
// The conformance kit (test_conformance.cpp) runs the family-wide checks on it as well.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

Options example_options(int max_distance, double init_std = 0.0) {
  const EncodingInfo* info = find_encoding("example_distance_bias");
  REQUIRE(info != nullptr);
  Options o = Options::defaults(info->options);
  o.set("max_distance", std::int64_t(max_distance));
  o.set("init_std", init_std);
  return o;
}

double dot_product(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("example: registered, with its options and one shared table", "[example]") {
  const EncodingInfo* info = find_encoding("example_distance_bias");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  const Options d = Options::defaults(info->options);
  CHECK(d.get_int("max_distance") == 16);
  CHECK(d.get_double("init_std") == 0.0);

  ParameterArena<double> arena;
  auto enc = info->make<double>(d, {8, 2, 4, 3}, arena);  // d = 8, H = 2, d_h = 4, 3 layers
  REQUIRE(arena.slots().size() == 1);  // one table, not one per layer
  CHECK(arena.slots()[0].name == "example.bias");
  CHECK(arena.slots()[0].shape == std::vector<std::size_t>{17, 2});  // [k+1, H]
  CHECK(!arena.slots()[0].weight_decay);
  CHECK(enc->has_score_terms());
  CHECK(!enc->has_value_terms());
  CHECK(!enc->has_qk_transform());
}

TEST_CASE("example: the bias at distances 0, k-1, k and k+5", "[example]") {
  // k = 4, two heads. Two queries at positions 8, 9; ten keys at positions 0..9, the first
  // eight of them memory (M = 8). Query 1 (position 9) sees every key: distances 9 - j.
  // Query 0 (position 8) sees keys 0..8; key 9 is in its future and masked.
  const int k = 4, B = 1, H = 2, dh = 3, L = 2, M = 8, K = M + L;
  std::vector<std::int64_t> qp = {8, 9}, kp(K);
  std::iota(kp.begin(), kp.end(), 0);
  const AttentionGeometry g{B, L, M, K, H, dh, 0, qp.data(), kp.data()};

  ParameterArena<double> arena;
  auto enc = find_encoding("example_distance_bias")->make<double>(example_options(k),
                                                                  {H * dh, H, dh, 2}, arena);
  arena.allocate();
  // bias[l, h] = 10 l + h + 1:   l:   0    1    2    3    4
  //                              h=0: 1   11   21   31   41
  //                              h=1: 2   12   22   32   42
  double* bias = arena.values();
  for (int l = 0; l <= k; ++l)
    for (int h = 0; h < H; ++h) bias[l * H + h] = 10.0 * l + h + 1;

  std::vector<double> q(B * L * H * dh, 0.7), kk(B * K * H * dh, -0.3);
  std::vector<double> scores(B * H * L * K, 0.5);
  enc->scores_forward(1, g, q.data(), kk.data(), 0.123, scores.data());  // scale is ignored
  auto S = [&](int h, int i, int j) { return scores[(h * L + i) * K + j]; };

  // Query 1 at position 9:  key 9 -> distance 0, key 6 -> 3 = k-1, key 5 -> 4 = k,
  // key 0 -> 9 = k+5 (clipped to row k).
  CHECK(S(0, 1, 9) == 0.5 + 1);
  CHECK(S(1, 1, 9) == 0.5 + 2);
  CHECK(S(0, 1, 6) == 0.5 + 31);
  CHECK(S(1, 1, 6) == 0.5 + 32);
  CHECK(S(0, 1, 5) == 0.5 + 41);
  CHECK(S(1, 1, 5) == 0.5 + 42);
  CHECK(S(0, 1, 0) == 0.5 + 41);
  CHECK(S(1, 1, 0) == 0.5 + 42);
  // Query 0 at position 8: key 8 -> distance 0; key 9 is masked and keeps its value.
  CHECK(S(0, 0, 8) == 0.5 + 1);
  CHECK(S(1, 0, 8) == 0.5 + 2);
  CHECK(S(0, 0, 9) == 0.5);
  CHECK(S(1, 0, 9) == 0.5);

  // Backward: dS = 1 on every visible cell of head 1, 0 elsewhere. Row l of the table collects
  // the number of visible cells at clipped distance l: query 1 has one cell at each distance
  // 0..3 and six at >= 4 (keys 0..5); query 0 one at 0..3 and five at >= 4 (keys 0..4).
  std::vector<double> dS(B * H * L * K, 0.0);
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < K; ++j)
      if (g.visible(i, j)) dS[(1 * L + i) * K + j] = 1.0;
  std::vector<double> dq(q.size(), 0.25), dk(kk.size(), 0.25);
  arena.zero_grads();
  enc->scores_backward(1, g, q.data(), kk.data(), 0.123, dS.data(), dq.data(), dk.data());
  const double* db = arena.grads();
  for (int l = 0; l < k; ++l) {
    CHECK(db[l * H + 0] == 0.0);
    CHECK(db[l * H + 1] == 2.0);
  }
  CHECK(db[k * H + 0] == 0.0);
  CHECK(db[k * H + 1] == 11.0);
  // The bias does not depend on q or k: their gradients are left exactly as they were.
  for (double x : dq) CHECK(x == 0.25);
  for (double x : dk) CHECK(x == 0.25);
}

TEST_CASE("example: finite-difference gradient of the table", "[example][grad]") {
  const int B = 2, L = 3, M = 4, K = M + L, H = 2, dh = 3, d = H * dh, k = 2;
  std::vector<std::int64_t> qp(L), kp(K);
  std::iota(qp.begin(), qp.end(), 5);  // any offset: only differences matter
  std::iota(kp.begin(), kp.end(), 5 - M);
  Rng rng(7);

  SECTION("through the hook alone: loss = sum_{b,h,i,j} W * scores") {
    const AttentionGeometry g{B, L, M, K, H, dh, 0, qp.data(), kp.data()};
    ParameterArena<double> arena;
    auto enc = find_encoding("example_distance_bias")
                   ->make<double>(example_options(k, 0.5), {d, H, dh, 1}, arena);
    arena.allocate();
    enc->init(arena, rng);
    auto q = random_vector(B * L * d, rng), kk = random_vector(B * K * d, rng);
    auto W = random_vector(B * H * L * K, rng);
    for (int bh = 0; bh < B * H; ++bh)  // dscores is 0 on masked cells, as attention makes it
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < K; ++j)
          if (!g.visible(i, j)) W[(bh * L + i) * K + j] = 0;
    std::vector<double> scores(W.size());
    auto loss = [&] {
      std::fill(scores.begin(), scores.end(), 0.0);
      enc->scores_forward(0, g, q.data(), kk.data(), 0.5, scores.data());
      return dot_product(W, scores);
    };
    std::vector<double> dq(q.size(), 0.0), dk(kk.size(), 0.0);
    arena.zero_grads();
    enc->scores_backward(0, g, q.data(), kk.data(), 0.5, W.data(), dq.data(), dk.data());
    std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
    require_gradient("example.bias", arena.values(), analytic.data(), arena.count(), loss);
  }

  SECTION("through attention with memory, with and without same_length") {
    ParameterArena<double> arena;
    auto enc = find_encoding("example_distance_bias")
                   ->make<double>(example_options(k, 0.5), {d, H, dh, 1}, arena);
    Attention<double> attn(arena, "attn.", d, H);
    arena.allocate();
    enc->init(arena, rng);
    attn.init(rng, 0.5);
    for (int window : {0, 3}) {
      CAPTURE(window);
      const AttentionGeometry g{B, L, M, K, H, dh, window, qp.data(), kp.data()};
      auto x = random_vector(B * K * d, rng), R = random_vector(B * L * d, rng);
      std::vector<double> out(B * L * d), dx(B * K * d, 7.0);  // backward writes dx over this
      auto loss = [&] {
        attn.forward(x.data(), g, *enc, 0, out.data());
        return dot_product(R, out);
      };
      arena.zero_grads();
      loss();
      attn.backward(R.data(), x.data(), g, *enc, 0, dx.data());
      std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
      require_gradient("x", x.data(), dx.data(), x.size(), loss);
      require_gradient("example.bias and W_q, W_k, W_v, W_o", arena.values(), analytic.data(),
                       arena.count(), loss);
    }
  }
}
