// DeBERTa disentangled attention (src/encodings/deberta.cpp):
//   1. delta(i, j) at -k, k and around them, read back through the c2p and p2c terms;
//   2. score scale 1/sqrt(3 d_h) (1/sqrt(2 d_h) with one positional term);
//   3. the efficient form (projection of the reached rows, gemm, gather) equals the naive one;
//   4. finite-difference gradients of P, W_qr, W_kr, q and k, alone and through attention.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

struct DebertaOptions {
  int k = 64;
  bool c2p = true, p2c = true, naive = false;
  double init_std = 0.02;
};

Options deberta_options(const DebertaOptions& o) {
  Options r = default_options("deberta");
  r.set("k", std::int64_t(o.k));
  r.set("c2p", o.c2p);
  r.set("p2c", o.p2c);
  r.set("naive", o.naive);
  r.set("init_std", o.init_std);
  return r;
}

std::unique_ptr<Encoding<double>> make_deberta(const DebertaOptions& o, const EncodingShape& s,
                                               ParameterArena<double>& arena) {
  return find_encoding("deberta")->make<double>(deberta_options(o), s, arena);
}

}  // namespace

TEST_CASE("deberta: registered, parameters and score scale", "[deberta]") {
  const EncodingInfo* info = find_encoding("deberta");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "He et al. 2021");
  const Options d = Options::defaults(info->options);
  CHECK(d.get_int("k") == 64);
  CHECK(d.get_bool("c2p"));
  CHECK(d.get_bool("p2c"));
  CHECK(!d.get_bool("naive"));
  CHECK(d.get_double("init_std") == 0.02);

  ParameterArena<double> arena;
  auto enc = make_deberta({.k = 5}, {8, 2, 4, 2}, arena);
  REQUIRE(arena.slots().size() == 5);
  CHECK(arena.slots()[0].name == "deberta.P");
  CHECK(arena.slots()[0].shape == std::vector<std::size_t>{10, 8});
  CHECK(!arena.slots()[0].weight_decay);
  CHECK(arena.slots()[1].name == "layer0.deberta.W_qr");
  CHECK(arena.slots()[2].name == "layer0.deberta.W_kr");
  CHECK(arena.slots()[4].name == "layer1.deberta.W_kr");
  CHECK(arena.slots()[4].shape == std::vector<std::size_t>{8, 8});
  CHECK(arena.slots()[4].weight_decay);
  CHECK(enc->score_scale(4) == 1.0 / std::sqrt(12.0));
  CHECK(enc->has_score_terms());
  CHECK(!enc->has_value_terms());

  ParameterArena<double> a1, a2;
  auto c2p_only = make_deberta({.k = 5, .p2c = false}, {8, 2, 4, 2}, a1);
  CHECK(c2p_only->score_scale(4) == 1.0 / std::sqrt(8.0));
  CHECK(a1.slots().size() == 3);  // P and W_kr per layer
  auto neither = make_deberta({.k = 5, .c2p = false, .p2c = false}, {8, 2, 4, 2}, a2);
  CHECK(neither->score_scale(4) == 0.5);
  CHECK(!neither->has_score_terms());
  CHECK(a2.slots().empty());
}

TEST_CASE("deberta: delta(i, j) at -k, k and around them", "[deberta]") {
  // One head of one dimension: P[r] = r + 1, W = 1, q = k = 1, scale 1. Then c2p adds exactly
  // delta(i, j) + 1 and p2c adds delta(j, i) + 1. One query at position 20 sees keys at
  // distances i - j = 0 .. 9 (memory).
  //   delta(x) = 0 if x <= -k, 2k - 1 if x >= k, x + k otherwise.
  // k = 4, c2p (x = i - j): 0 -> 4, 1 -> 5, 2 -> 6, 3 -> 7 (= 2k - 1), 4 (= k) -> 7, 5, 9 -> 7
  //        p2c (x = j - i): 0 -> 4, -1 -> 3, -2 -> 2, -3 -> 1, -4 (= -k) -> 0, -5 -> 0, -9 -> 0
  const int L = 1, M = 9, K = M + L, k = 4;
  std::vector<std::int64_t> qp = {20}, kp(K);
  std::iota(kp.begin(), kp.end(), 11);  // distances 9 .. 0
  AttentionGeometry g{1, L, M, K, 1, 1, 0, qp.data(), kp.data()};
  const std::vector<int> c2p_expected = {7, 7, 7, 7, 7, 7, 7, 6, 5, 4};  // keys j = 0..9
  const std::vector<int> p2c_expected = {0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
  // (distance 9 - j for key j: j = 5 is distance 4 = k, j = 6 is distance 3 = k - 1, ...)
  for (bool naive : {false, true})
    for (bool c2p : {true, false}) {
      CAPTURE(naive, c2p);
      ParameterArena<double> arena;
      auto enc = make_deberta({.k = k, .c2p = c2p, .p2c = !c2p, .naive = naive}, {1, 1, 1, 1},
                              arena);
      arena.allocate();
      double* P = slot(arena, "deberta.P");
      for (int r = 0; r < 2 * k; ++r) P[r] = r + 1;
      slot(arena, c2p ? "layer0.deberta.W_kr" : "layer0.deberta.W_qr")[0] = 1.0;
      std::vector<double> q(1, 1.0), kk(K, 1.0), scores(K, 0.0);
      enc->scores_forward(0, g, q.data(), kk.data(), 1.0, scores.data());
      const auto& expected = c2p ? c2p_expected : p2c_expected;
      for (int j = 0; j < K; ++j) {
        CAPTURE(j, qp[0] - kp[j]);
        CHECK(scores[j] == expected[j] + 1.0);
      }
    }
  // Between them the two terms read delta at every x in -9 .. 9, i.e. -k - 5 .. k + 5: c2p the
  // non-negative side, p2c the non-positive one (the other sides belong to keys to the right of
  // the query, which a causal query never sees).
}

TEST_CASE("deberta: efficient form equals the naive reference", "[deberta]") {
  const int B = 2, L = 5, H = 2, dh = 3, d = H * dh, layers = 2, layer = 1;
  int configs = 0;
  for (int M : {0, 3})
    for (int window : {0, 4})
      for (auto [c2p, p2c] : {std::pair{true, true}, {true, false}, {false, true}})
        for (int k : {1, 3, 20}) {  // 20 > K: no clipping at all
          CAPTURE(M, window, c2p, p2c, k);
          const int K = M + L;
          Positions pos(L, M, 7);
          AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
          ParameterArena<double> fa, na;
          auto fast = make_deberta({.k = k, .c2p = c2p, .p2c = p2c}, {d, H, dh, layers}, fa);
          auto slow =
              make_deberta({.k = k, .c2p = c2p, .p2c = p2c, .naive = true}, {d, H, dh, layers}, na);
          fa.allocate();
          na.allocate();
          Rng rng(40 + configs);
          for (std::size_t i = 0; i < fa.count(); ++i) fa.values()[i] = rng.normal(0, 0.7);
          std::copy(fa.values(), fa.values() + fa.count(), na.values());
          auto q = random_vector(B * L * d, rng), kk = random_vector(B * K * d, rng);
          const auto s0 = random_vector(B * H * L * K, rng);
          auto dS = random_vector(B * H * L * K, rng);
          zero_masked(dS, g);
          const auto grads0 = random_vector(fa.count(), rng);
          std::copy(grads0.begin(), grads0.end(), fa.grads());
          std::copy(grads0.begin(), grads0.end(), na.grads());
          const auto dq0 = random_vector(q.size(), rng), dk0 = random_vector(kk.size(), rng);
          const double scale = fast->score_scale(dh);
          auto a = s0, b = s0;
          auto dqa = dq0, dka = dk0, dqb = dq0, dkb = dk0;
          fast->scores_forward(layer, g, q.data(), kk.data(), scale, a.data());
          slow->scores_forward(layer, g, q.data(), kk.data(), scale, b.data());
          fast->scores_backward(layer, g, q.data(), kk.data(), scale, dS.data(), dqa.data(),
                                dka.data());
          slow->scores_backward(layer, g, q.data(), kk.data(), scale, dS.data(), dqb.data(),
                                dkb.data());
          CHECK(max_abs_diff(a, b) < 1e-12);
          CHECK(max_abs_diff(a, s0) > 1e-3);
          CHECK(max_abs_diff(dqa, dqb) < 1e-12);
          CHECK(max_abs_diff(dka, dkb) < 1e-12);
          if (c2p) CHECK(max_abs_diff(dqa, dq0) > 1e-3);
          if (!c2p) CHECK(dqa == dq0);
          if (p2c) CHECK(max_abs_diff(dka, dk0) > 1e-3);
          if (!p2c) CHECK(dka == dk0);
          const std::vector<double> ga(fa.grads(), fa.grads() + fa.count()),
              gb(na.grads(), na.grads() + na.count());
          CHECK(max_abs_diff(ga, gb) < 1e-12);
          // Layer 0's projections get nothing from a call on layer 1.
          for (const auto& s : fa.slots())
            if (s.name.rfind("layer0.", 0) == 0)
              for (std::size_t i = 0; i < s.size; ++i)
                REQUIRE(ga[s.offset + i] == grads0[s.offset + i]);
          ++configs;
        }
  CHECK(configs == 36);
}

TEST_CASE("deberta: finite-difference gradients of P, W_qr, W_kr, q and k", "[deberta][grad]") {
  const int B = 2, L = 3, M = 2, K = M + L, H = 2, dh = 2, d = H * dh;
  Positions pos(L, M, 4);
  for (bool naive : {false, true})
    for (int k : {2, 6}) {
      CAPTURE(naive, k);
      ParameterArena<double> arena;
      auto enc = make_deberta({.k = k, .naive = naive}, {d, H, dh, 2}, arena);
      arena.allocate();
      Rng rng(50);
      for (std::size_t i = 0; i < arena.count(); ++i) arena.values()[i] = rng.normal(0, 0.7);
      for (int window : {0, 3}) {
        CAPTURE(window);
        AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
        auto q = random_vector(B * L * d, rng), kk = random_vector(B * K * d, rng);
        auto R0 = random_vector(B * H * L * K, rng), R1 = random_vector(B * H * L * K, rng);
        zero_masked(R0, g);
        zero_masked(R1, g);
        const double scale = enc->score_scale(dh);
        auto loss = [&] {  // both layers: P is shared
          std::vector<double> a(R0.size(), 0), b(R0.size(), 0);
          enc->scores_forward(0, g, q.data(), kk.data(), scale, a.data());
          enc->scores_forward(1, g, q.data(), kk.data(), scale, b.data());
          return dot(R0, a) + dot(R1, b);
        };
        std::vector<double> dq(q.size(), 0), dk(kk.size(), 0);
        arena.zero_grads();
        // Backward of each layer right after its own forward (the per-layer cache).
        std::vector<double> s(R0.size(), 0);
        enc->scores_forward(0, g, q.data(), kk.data(), scale, s.data());
        enc->scores_backward(0, g, q.data(), kk.data(), scale, R0.data(), dq.data(), dk.data());
        enc->scores_forward(1, g, q.data(), kk.data(), scale, s.data());
        enc->scores_backward(1, g, q.data(), kk.data(), scale, R1.data(), dq.data(), dk.data());
        std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
        require_gradient("P, W_qr, W_kr", arena.values(), analytic.data(), arena.count(), loss);
        require_gradient("q", q.data(), dq.data(), q.size(), loss);
        require_gradient("k", kk.data(), dk.data(), kk.size(), loss);
      }
    }
}

TEST_CASE("deberta: shifting every position changes nothing", "[deberta]") {
  const int B = 2, L = 4, M = 3, K = M + L, H = 2, dh = 3, d = H * dh;
  ParameterArena<double> arena;
  auto enc = make_deberta({.k = 3}, {d, H, dh, 1}, arena);
  arena.allocate();
  Rng rng(70);
  for (std::size_t i = 0; i < arena.count(); ++i) arena.values()[i] = rng.normal(0, 0.7);
  auto q = random_vector(B * L * d, rng), kk = random_vector(B * K * d, rng);
  auto at = [&](std::int64_t base) {
    Positions pos(L, M, base);
    AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
    std::vector<double> s(B * H * L * K, 0);
    enc->scores_forward(0, g, q.data(), kk.data(), 0.5, s.data());
    return s;
  };
  CHECK(at(0) == at(13));
  CHECK(at(0) == at(100000));
}

TEST_CASE("deberta: p2c_reference indexes Q^r by delta(i, j), the paper by delta(j, i)",
          "[deberta]") {
  // With only the p2c term, the rows of P that receive gradient are the rows p2c reads. In a
  // causal model the paper's delta(j, i) = k - (i - j) reads rows 0 .. k, the reference code's
  // delta(i, j) = i - j + k reads rows k .. 2k - 1.
  const int B = 1, L = 4, M = 0, K = M + L, d = 4, H = 1, k = 3;
  Positions pos(L, M, 0);
  AttentionGeometry g{B, L, M, K, H, d / H, 0, pos.q.data(), pos.k.data()};
  for (bool reference : {false, true}) {
    CAPTURE(reference);
    Options o = deberta_options({.k = k, .c2p = false, .init_std = 0.5});
    o.set("p2c_reference", reference);
    ParameterArena<double> arena;
    auto enc = find_encoding("deberta")->make<double>(o, {d, H, d / H, 1}, arena);
    arena.allocate();
    Rng rng(3);
    enc->init(arena, rng);
    std::vector<double> q = random_vector(B * L * d, rng), kk = random_vector(B * K * d, rng);
    std::vector<double> scores(B * H * L * K, 0.0), dscores(B * H * L * K, 1.0);
    zero_masked(dscores, g);
    std::vector<double> dq(q.size(), 0.0), dk(kk.size(), 0.0);
    enc->scores_forward(0, g, q.data(), kk.data(), 1.0, scores.data());
    enc->scores_backward(0, g, q.data(), kk.data(), 1.0, dscores.data(), dq.data(), dk.data());
    const double* dP = arena.grads();  // deberta.P is the first parameter: [2k, d]
    REQUIRE(arena.slots()[0].name == "deberta.P");
    for (int row = 0; row < 2 * k; ++row) {
      double norm = 0;
      for (int c = 0; c < d; ++c) norm += std::abs(dP[row * d + c]);
      const bool read = reference ? row >= k : row <= k;
      CAPTURE(row);
      CHECK((norm > 0) == read);
    }
  }
}
