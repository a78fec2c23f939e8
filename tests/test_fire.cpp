// FIRE (src/encodings/fire.cpp):
//   1. the hook adds f(psi(i - j) / psi(max(i, L_thr))) against the formula, for queries below
//      and beyond the threshold;
//   2. the efficient form (one MLP evaluation per distinct input) equals the naive one;
//   3. finite-difference gradients of w1, b1, W2, c and log L_thr, alone and through attention;
//   4. the family: shift-invariant while the queries stay below L_thr, not beyond it.
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

struct FireOptions {
  int hidden = 32;
  double threshold_init = 512;
  bool learn_threshold = true, shared = false, naive = false;
};

Options fire_options(const FireOptions& f) {
  Options o = default_options("fire");
  o.set("hidden", std::int64_t(f.hidden));
  o.set("threshold_init", f.threshold_init);
  o.set("learn_threshold", f.learn_threshold);
  o.set("shared", f.shared);
  o.set("naive", f.naive);
  return o;
}

std::unique_ptr<Encoding<double>> make_fire(const FireOptions& f, const EncodingShape& s,
                                            ParameterArena<double>& arena) {
  return find_encoding("fire")->make<double>(fire_options(f), s, arena);
}

// Random generic parameters, L_thr = `threshold` (between integer positions).
void set_fire_parameters(ParameterArena<double>& arena, Rng& rng, double threshold) {
  for (std::size_t i = 0; i < arena.count(); ++i) arena.values()[i] = rng.normal(0, 0.8);
  for (const auto& s : arena.slots()) {
    const bool is_c = s.name.size() >= 2 && s.name.compare(s.name.size() - 2, 2, ".c") == 0;
    const bool is_L = s.name.find("log_L") != std::string::npos;
    if (is_c) arena.values()[s.offset] = 0.3 + 0.1 * rng.normal();  // c ~ softplus(0.3) = 0.85
    if (is_L) arena.values()[s.offset] = std::log(threshold);
  }
}

}  // namespace

TEST_CASE("fire: registered as relative_normalized, with its parameters", "[fire]") {
  const EncodingInfo* info = find_encoding("fire");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative_normalized);
  CHECK(family_name(info->family) == "relative_normalized");
  CHECK(info->paper == "Li et al. 2023");
  const Options d = Options::defaults(info->options);
  CHECK(d.get_int("hidden") == 32);
  CHECK(d.get_double("c_init") == 0.1);
  CHECK(d.get_double("threshold_init") == 512.0);
  CHECK(d.get_bool("learn_threshold"));
  CHECK(!d.get_bool("shared"));
  CHECK(!d.get_bool("naive"));

  ParameterArena<double> arena;
  auto enc = make_fire({}, {8, 2, 4, 2}, arena);
  REQUIRE(arena.slots().size() == 10);
  const std::vector<std::string> names = {"w1", "b1", "W2", "c", "log_L"};
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 5; ++p) {
      const auto& s = arena.slots()[n * 5 + p];
      CHECK(s.name == "layer" + std::to_string(n) + ".fire." + names[p]);
      CHECK(!s.weight_decay);
    }
  CHECK(arena.slots()[2].shape == std::vector<std::size_t>{32, 2});
  arena.allocate();
  Rng rng(1);
  enc->init(arena, rng);
  CHECK(std::log1p(std::exp(slot(arena, "layer0.fire.c")[0])) == Approx(0.1).epsilon(1e-12));
  CHECK(std::exp(slot(arena, "layer1.fire.log_L")[0]) == Approx(512.0).epsilon(1e-12));
  for (int m = 0; m < 32; ++m) CHECK(std::abs(slot(arena, "layer0.fire.w1")[m]) <= 1.0);

  ParameterArena<double> shared, fixed;
  make_fire({.shared = true}, {8, 2, 4, 3}, shared);
  REQUIRE(shared.slots().size() == 5);
  CHECK(shared.slots()[0].name == "fire.w1");
  make_fire({.learn_threshold = false}, {8, 2, 4, 1}, fixed);
  CHECK(fixed.slots().size() == 4);  // no log_L
}

TEST_CASE("fire: the hook adds f(psi(i - j) / psi(max(i, L_thr))) on visible cells", "[fire]") {
  // Queries at 3..8, memory keys from 0; L_thr = 5.5: queries 3, 4, 5 share psi(5.5),
  // 6, 7, 8 use psi(i). c = softplus(0) = log 2.
  const int B = 2, H = 2, hidden = 3, dh = 2, L = 6, M = 3, K = M + L;
  Positions pos(L, M, 3);
  for (bool naive : {false, true})
    for (int window : {0, 4}) {
      CAPTURE(naive, window);
      AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
      ParameterArena<double> arena;
      auto enc = make_fire({.hidden = hidden, .naive = naive}, {H * dh, H, dh, 1}, arena);
      arena.allocate();
      const double w1[3] = {1, -2, 0.5}, b1[3] = {0.1, 0.3, -0.2};
      const double W2[3][2] = {{1, -1}, {0.5, 2}, {-3, 0.25}};
      std::copy(w1, w1 + 3, slot(arena, "layer0.fire.w1"));
      std::copy(b1, b1 + 3, slot(arena, "layer0.fire.b1"));
      std::copy(&W2[0][0], &W2[0][0] + 6, slot(arena, "layer0.fire.W2"));
      slot(arena, "layer0.fire.c")[0] = 0.0;
      slot(arena, "layer0.fire.log_L")[0] = std::log(5.5);
      const double c = std::log(2.0), Lthr = 5.5;
      std::vector<double> q(B * L * H * dh, 1.0), k(B * K * H * dh, 1.0);
      std::vector<double> scores(B * H * L * K, -1.5);
      enc->scores_forward(0, g, q.data(), k.data(), 0.3, scores.data());
      check_score_cells(g, scores, -1.5, [&](int, int h, int i, int j, double s) {
        const double qi = double(pos.q[i]), dist = double(pos.q[i] - pos.k[j]);
        const double u = std::log(c * dist + 1) / std::log(c * std::max(qi, Lthr) + 1);
        double f = 0;
        for (int m = 0; m < hidden; ++m) f += W2[m][h] * std::max(0.0, w1[m] * u + b1[m]);
        CHECK(s == Approx(-1.5 + f).epsilon(1e-13).margin(1e-14));
      });
    }
}

TEST_CASE("fire: efficient form equals the naive reference", "[fire]") {
  const int B = 2, L = 5, H = 2, dh = 3, layers = 2, layer = 1;
  int configs = 0;
  for (int M : {0, 3})
    for (int window : {0, 4})
      for (double threshold : {2.5, 6.5, 512.0})  // some, a few or no queries beyond L_thr
        for (bool shared : {false, true}) {
          CAPTURE(M, window, threshold, shared);
          const int K = M + L;
          Positions pos(L, M, 3);
          AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
          ParameterArena<double> fa, na;
          auto fast = make_fire({.hidden = 5, .shared = shared}, {H * dh, H, dh, layers}, fa);
          auto slow = make_fire({.hidden = 5, .shared = shared, .naive = true},
                                {H * dh, H, dh, layers}, na);
          fa.allocate();
          na.allocate();
          Rng rng(20 + configs);
          set_fire_parameters(fa, rng, threshold);
          std::copy(fa.values(), fa.values() + fa.count(), na.values());
          const auto s0 = random_vector(B * H * L * K, rng);
          auto dS = random_vector(B * H * L * K, rng);
          zero_masked(dS, g);
          const auto grads0 = random_vector(fa.count(), rng);
          std::copy(grads0.begin(), grads0.end(), fa.grads());
          std::copy(grads0.begin(), grads0.end(), na.grads());
          std::vector<double> q(B * L * H * dh, 0), k(B * K * H * dh, 0), dq(q), dk(k);
          auto a = s0, b = s0;
          fast->scores_forward(layer, g, q.data(), k.data(), 0.5, a.data());
          slow->scores_forward(layer, g, q.data(), k.data(), 0.5, b.data());
          fast->scores_backward(layer, g, q.data(), k.data(), 0.5, dS.data(), dq.data(), dk.data());
          slow->scores_backward(layer, g, q.data(), k.data(), 0.5, dS.data(), dq.data(), dk.data());
          CHECK(max_abs_diff(a, b) < 1e-12);
          CHECK(max_abs_diff(a, s0) > 1e-3);
          const std::vector<double> ga(fa.grads(), fa.grads() + fa.count()),
              gb(na.grads(), na.grads() + na.count());
          CHECK(max_abs_diff(ga, gb) < 1e-12);
          CHECK(max_abs_diff(ga, grads0) > 1e-3);
          ++configs;
        }
  CHECK(configs == 24);
}

TEST_CASE("fire: finite-difference gradients of w1, b1, W2, c and L_thr", "[fire][grad]") {
  const int B = 2, L = 4, M = 3, K = M + L, H = 2, dh = 2, layers = 2;
  Positions pos(L, M, 4);  // queries 4..7, keys 1..7
  for (bool naive : {false, true})
    for (double threshold : {5.5, 100.0}) {  // queries on both sides / all below
      CAPTURE(naive, threshold);
      ParameterArena<double> arena;
      auto enc = make_fire({.hidden = 6, .naive = naive}, {H * dh, H, dh, layers}, arena);
      arena.allocate();
      Rng rng(31);
      set_fire_parameters(arena, rng, threshold);
      for (int window : {0, 3}) {
        CAPTURE(window);
        AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
        auto R0 = random_vector(B * H * L * K, rng), R1 = random_vector(B * H * L * K, rng);
        zero_masked(R0, g);
        zero_masked(R1, g);
        std::vector<double> q(B * L * H * dh, 0), k(B * K * H * dh, 0);
        std::vector<double> dq(q.size(), 0), dk(k.size(), 0);
        const auto analytic = check_two_layer_score_gradients(
            *enc, arena, g, q, k, std::vector<double>(R0.size(), 0), R0, R1, dq, dk,
            "w1, b1, W2, c, log_L of both layers");
        // L_thr only matters for the thresholded queries; with threshold 5.5 some are.
        for (const auto& s : arena.slots())
          if (s.name.find("log_L") != std::string::npos) CHECK(analytic[s.offset] != 0.0);
        CHECK(dq == std::vector<double>(q.size(), 0));
        CHECK(dk == std::vector<double>(k.size(), 0));
      }
    }
}

TEST_CASE("fire: relative below the threshold, not beyond; future keys are refused", "[fire]") {
  const int B = 1, L = 4, M = 3, K = M + L, H = 2, dh = 2;
  ParameterArena<double> arena;
  auto enc = make_fire({.hidden = 8}, {H * dh, H, dh, 1}, arena);
  arena.allocate();
  Rng rng(5);
  set_fire_parameters(arena, rng, 50.5);
  std::vector<double> q(B * L * H * dh, 0), k(B * K * H * dh, 0);
  auto scores_at = [&](std::int64_t base) {
    Positions pos(L, M, base);
    AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
    std::vector<double> s(B * H * L * K, 0);
    enc->scores_forward(0, g, q.data(), k.data(), 1.0, s.data());
    return s;
  };
  const auto s0 = scores_at(0);
  CHECK(scores_at(40) == s0);                     // queries 40..43 <= 50.5: one normaliser
  CHECK(max_abs_diff(scores_at(1000), s0) > 1e-3);  // queries far beyond: their own, larger

  std::vector<std::int64_t> bad_q = {0, 1, 2, 3}, bad_k = {0, 1, 5, 3};
  AttentionGeometry bad{1, 4, 0, 4, H, dh, 0, bad_q.data(), bad_k.data()};
  std::vector<double> s(H * 16, 0), q4(4 * H * dh, 0);
  CHECK_THROWS_AS(enc->scores_forward(0, bad, q4.data(), q4.data(), 1.0, s.data()),
                  std::invalid_argument);
}
