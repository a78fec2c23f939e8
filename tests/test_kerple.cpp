// KERPLE, logarithmic variant (src/encodings/kerple.cpp):
//   1. the hook adds -r1_h log(1 + r2_h |i - j|), unscaled, on visible cells, per layer;
//   2. r1, r2 = softplus(raw) start in the paper's ranges;
//   3. finite-difference gradients of the raw parameters, alone and through attention.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

Options kerple_options(bool shared = false) {
  Options o = default_options("kerple");
  o.set("shared", shared);
  return o;
}

double softplus(double x) { return std::log(1.0 + std::exp(x)); }

}  // namespace

TEST_CASE("kerple: registered, per-layer or shared parameters, paper's initial ranges",
          "[kerple]") {
  const EncodingInfo* info = find_encoding("kerple");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Chi et al. 2022");
  const Options d = Options::defaults(info->options);
  CHECK(!d.get_bool("shared"));
  CHECK(d.get_double("r1_init") == 2.0);
  CHECK(d.get_double("r2_init") == 1.0);

  ParameterArena<double> per_layer, shared;
  auto a = info->make<double>(kerple_options(false), {8, 4, 2, 3}, per_layer);
  auto b = info->make<double>(kerple_options(true), {8, 4, 2, 3}, shared);
  REQUIRE(per_layer.slots().size() == 6);
  CHECK(per_layer.slots()[0].name == "layer0.kerple.r1");
  CHECK(per_layer.slots()[5].name == "layer2.kerple.r2");
  REQUIRE(shared.slots().size() == 2);
  CHECK(shared.slots()[0].name == "kerple.r1");
  CHECK(shared.slots()[1].name == "kerple.r2");
  for (const auto& s : per_layer.slots()) {
    CHECK(s.shape == std::vector<std::size_t>{4});
    CHECK(!s.weight_decay);
  }
  // r1 = softplus(raw) in [0.01, 2], r2 in [0.01, 1], and not all equal.
  per_layer.allocate();
  Rng rng(1);
  a->init(per_layer, rng);
  for (int slot = 0; slot < 6; ++slot) {
    const double top = slot % 2 == 0 ? 2.0 : 1.0;
    const double* raw = per_layer.values() + per_layer.slots()[slot].offset;
    for (int h = 0; h < 4; ++h) {
      CAPTURE(slot, h, softplus(raw[h]));
      CHECK(softplus(raw[h]) >= 1e-2 - 1e-12);
      CHECK(softplus(raw[h]) <= top + 1e-12);
    }
    CHECK(raw[0] != raw[1]);
  }
}

TEST_CASE("kerple: the hook adds -r1 log(1 + r2 |i - j|) unscaled on visible cells",
          "[kerple]") {
  const int B = 2, H = 2, dh = 3, L = 3, M = 4, K = M + L, layers = 2;
  Positions pos(L, M, 100);
  for (bool shared : {false, true})
    for (int window : {0, 5}) {
      CAPTURE(shared, window);
      AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
      ParameterArena<double> arena;
      auto enc =
          find_encoding("kerple")->make<double>(kerple_options(shared), {H * dh, H, dh, layers},
                                                arena);
      arena.allocate();
      // Distinct raw values per slot: raw = slot - 0.5 h.
      for (std::size_t s = 0; s < arena.slots().size(); ++s)
        for (int h = 0; h < H; ++h)
          arena.values()[arena.slots()[s].offset + h] = double(s) - 0.5 * h - 0.3;
      std::vector<double> q(B * L * H * dh, 1.0), k(B * K * H * dh, 1.0);
      for (int layer = 0; layer < layers; ++layer) {
        const int t = shared ? 0 : layer;  // which (r1, r2) slots
        std::vector<double> scores(B * H * L * K, 0.75);
        enc->scores_forward(layer, g, q.data(), k.data(), 0.2, scores.data());
        CAPTURE(layer);
        check_score_cells(g, scores, 0.75, [&](int, int h, int i, int j, double s) {
          const double r1 = softplus(double(2 * t) - 0.5 * h - 0.3);
          const double r2 = softplus(double(2 * t + 1) - 0.5 * h - 0.3);
          const double dist = double(i + M - j);
          CHECK(s == Approx(0.75 - r1 * std::log(1 + r2 * dist)).epsilon(1e-14));
        });
      }
    }
}

TEST_CASE("kerple: finite-difference gradients of r1 and r2", "[kerple][grad]") {
  const int B = 2, L = 3, M = 3, K = M + L, H = 2, dh = 2, layers = 2;
  Positions pos(L, M, 7);
  for (bool shared : {false, true})
    for (int window : {0, 4}) {
      CAPTURE(shared, window);
      ParameterArena<double> arena;
      auto enc = find_encoding("kerple")->make<double>(kerple_options(shared),
                                                       {H * dh, H, dh, layers}, arena);
      arena.allocate();
      Rng rng(9);
      enc->init(arena, rng);
      AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
      auto q = random_vector(B * L * H * dh, rng), k = random_vector(B * K * H * dh, rng);
      auto R0 = random_vector(B * H * L * K, rng), R1 = random_vector(B * H * L * K, rng);
      zero_masked(R0, g);
      zero_masked(R1, g);
      std::vector<double> dq(q.size(), 0), dk(k.size(), 0);
      check_two_layer_score_gradients(*enc, arena, g, q, k, std::vector<double>(R0.size(), 0), R0,
                                      R1, dq, dk, "r1, r2 (raw)");
      CHECK(dq == std::vector<double>(q.size(), 0));
      CHECK(dk == std::vector<double>(k.size(), 0));
    }
}

