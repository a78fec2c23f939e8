// Shaw et al. (2018) relative position representations (src/encodings/shaw.cpp):
//   1. the clipped label at the boundaries, with hand-computed values;
//   2. the efficient form (gemm + gather) equals the naive pair-by-pair reference;
//   3. finite-difference gradients of the tables and of every hook input, alone and through
//      Attention<double> and a whole model;
//   4. the relative property: shifting every position changes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

struct ShawOptions {
  int clip_k = 16;
  bool keys = true, values = true, per_head = false, naive = false;
  double init_std = 0.02;
};

Options shaw_options(const ShawOptions& s) {
  Options o = default_options("shaw");
  o.set("clip_k", std::int64_t(s.clip_k));
  o.set("keys", s.keys);
  o.set("values", s.values);
  o.set("per_head", s.per_head);
  o.set("naive", s.naive);
  o.set("init_std", s.init_std);
  return o;
}

std::unique_ptr<Encoding<double>> make_shaw(const ShawOptions& s, const EncodingShape& shape,
                                            ParameterArena<double>& arena) {
  return find_encoding("shaw")->make<double>(shaw_options(s), shape, arena);
}

// Everything that goes into and comes out of the four Shaw hooks of one layer.
struct HookRun {
  std::vector<double> scores, ctx, dq, dk, dprobs, grads;
};

struct HookInputs {
  std::vector<double> q, k, scores0, probs, ctx0, dscores, dctx, dq0, dk0, dprobs0;
  HookInputs(const AttentionGeometry& g, Rng& rng) {
    const std::size_t B = g.batch, H = g.n_heads, L = g.q_len, K = g.k_len, d = g.d_model();
    q = random_vector(B * L * d, rng);
    k = random_vector(B * K * d, rng);
    scores0 = random_vector(B * H * L * K, rng);
    probs = random_vector(B * H * L * K, rng);
    for (auto& p : probs) p = std::abs(p);  // probability-like: >= 0, 0 on masked cells
    zero_masked(probs, g);
    ctx0 = random_vector(B * L * d, rng);
    dscores = random_vector(B * H * L * K, rng);
    zero_masked(dscores, g);
    dctx = random_vector(B * L * d, rng);
    // Non-zero starting gradients: the hooks must accumulate, not overwrite.
    dq0 = random_vector(B * L * d, rng);
    dk0 = random_vector(B * K * d, rng);
    dprobs0 = random_vector(B * H * L * K, rng);
  }
};

// Runs forward and backward hooks of `layer` once; the arena's gradients start at `grads0`.
HookRun run_hooks(Encoding<double>& enc, ParameterArena<double>& arena, int layer,
                  const AttentionGeometry& g, const HookInputs& in,
                  const std::vector<double>& grads0) {
  HookRun r{in.scores0, in.ctx0, in.dq0, in.dk0, in.dprobs0, grads0};
  std::copy(grads0.begin(), grads0.end(), arena.grads());
  const double scale = 1.0 / std::sqrt(double(g.d_head));
  if (enc.has_score_terms()) {
    enc.scores_forward(layer, g, in.q.data(), in.k.data(), scale, r.scores.data());
    enc.scores_backward(layer, g, in.q.data(), in.k.data(), scale, in.dscores.data(),
                        r.dq.data(), r.dk.data());
  }
  if (enc.has_value_terms()) {
    enc.values_forward(layer, g, in.probs.data(), r.ctx.data());
    enc.values_backward(layer, g, in.probs.data(), in.dctx.data(), r.dprobs.data());
  }
  r.grads.assign(arena.grads(), arena.grads() + arena.count());
  return r;
}

void set_shaw_parameters(ParameterArena<double>& arena, Rng& rng, double std) {
  for (std::size_t i = 0; i < arena.count(); ++i) arena.values()[i] = rng.normal(0, std);
}

}  // namespace

TEST_CASE("shaw: registered, with its options and per-layer tables", "[shaw]") {
  const EncodingInfo* info = find_encoding("shaw");
  REQUIRE(info != nullptr);
  CHECK(info->family == EncodingFamily::relative);
  CHECK(info->paper == "Shaw et al. 2018");
  std::vector<std::string> keys;
  for (const auto& o : info->options) {
    keys.push_back(o.key);
    CHECK(!o.help.empty());
  }
  // Its own, then those every encoding has (log-n scaling, registry.cpp).
  CHECK(keys == std::vector<std::string>{"clip_k", "keys", "values", "per_head", "naive",
                                         "init_std", "log_n", "log_n_len"});
  const Options d = Options::defaults(info->options);
  CHECK(d.get_int("clip_k") == 16);
  CHECK(d.get_bool("keys"));
  CHECK(d.get_bool("values"));
  CHECK(!d.get_bool("per_head"));
  CHECK(!d.get_bool("naive"));
  CHECK(d.get_double("init_std") == 0.02);

  SECTION("shared tables: [k+1, d_h] per layer, no weight decay") {
    ParameterArena<double> arena;
    auto enc = make_shaw({.clip_k = 3}, {8, 2, 4, 2}, arena);
    REQUIRE(arena.slots().size() == 4);
    CHECK(arena.slots()[0].name == "layer0.shaw.w_K");
    CHECK(arena.slots()[1].name == "layer0.shaw.w_V");
    CHECK(arena.slots()[3].name == "layer1.shaw.w_V");
    for (const auto& s : arena.slots()) {
      CHECK(s.shape == std::vector<std::size_t>{4, 4});
      CHECK(!s.weight_decay);
    }
    CHECK(enc->has_score_terms());
    CHECK(enc->has_value_terms());
    // Initialisation N(0, init_std).
    arena.allocate();
    Rng rng(1);
    enc->init(arena, rng);
    double sq = 0;
    for (std::size_t i = 0; i < arena.count(); ++i) sq += arena.values()[i] * arena.values()[i];
    const double std = std::sqrt(sq / arena.count());
    CHECK(std > 0.01);
    CHECK(std < 0.03);
  }
  SECTION("per head: [H, k+1, d_h]") {
    ParameterArena<double> arena;
    auto enc = make_shaw({.clip_k = 3, .per_head = true}, {8, 2, 4, 1}, arena);
    REQUIRE(arena.slots().size() == 2);
    CHECK(arena.slots()[0].shape == std::vector<std::size_t>{2, 4, 4});
  }
  SECTION("keys only / values only") {
    ParameterArena<double> a1, a2;
    auto keys_only = make_shaw({.values = false}, {8, 2, 4, 1}, a1);
    auto values_only = make_shaw({.keys = false}, {8, 2, 4, 1}, a2);
    REQUIRE(a1.slots().size() == 1);
    CHECK(a1.slots()[0].name == "layer0.shaw.w_K");
    CHECK(keys_only->has_score_terms());
    CHECK(!keys_only->has_value_terms());
    REQUIRE(a2.slots().size() == 1);
    CHECK(a2.slots()[0].name == "layer0.shaw.w_V");
    CHECK(!values_only->has_score_terms());
    CHECK(values_only->has_value_terms());
  }
}

TEST_CASE("shaw: the clipped label at the boundaries", "[shaw]") {
  // One query at position 10 and five keys at distances 5, 3, 2, 1, 0; all visible (memory).
  const int B = 1, H = 1, dh = 2, L = 1, M = 4, K = M + L;
  std::vector<std::int64_t> qp = {10}, kp = {5, 7, 8, 9, 10};
  const std::vector<int> dist = {5, 3, 2, 1, 0};
  AttentionGeometry g{B, L, M, K, H, dh, 0, qp.data(), kp.data()};
  for (bool naive : {false, true})
    for (int clip : {0, 1, 2, 3, 5, 9}) {
      CAPTURE(naive, clip);
      ParameterArena<double> arena;
      auto enc = make_shaw({.clip_k = clip, .naive = naive}, {dh * H, H, dh, 1}, arena);
      arena.allocate();
      // Row l of w^K is (10^l, 7) and row l of w^V is (-2^l, 3^l): every label is identifiable.
      double* wK = arena.value(Param{arena.slots()[0].offset, arena.slots()[0].size, 0});
      double* wV = arena.value(Param{arena.slots()[1].offset, arena.slots()[1].size, 1});
      for (int l = 0; l <= clip; ++l) {
        wK[l * dh + 0] = std::pow(10.0, l);
        wK[l * dh + 1] = 7;
        wV[l * dh + 0] = -std::pow(2.0, l);
        wV[l * dh + 1] = std::pow(3.0, l);
      }
      // q = (1, 0) and scale 1: the added score is exactly 10^label.
      std::vector<double> q = {1, 0}, k(K * dh, 0), scores(K, 0.5);
      enc->scores_forward(0, g, q.data(), k.data(), 1.0, scores.data());
      for (int j = 0; j < K; ++j) {
        const int label = std::min(dist[j], clip);  // clip(j - i, k) with j - i = -dist
        CAPTURE(j, dist[j], label);
        CHECK(scores[j] == 0.5 + std::pow(10.0, label));
      }
      // One-hot attention on key j: the value term is exactly w^V[label_j].
      for (int j = 0; j < K; ++j) {
        std::vector<double> probs(K, 0), ctx(dh, 1.0);
        probs[j] = 1;
        enc->values_forward(0, g, probs.data(), ctx.data());
        const int label = std::min(dist[j], clip);
        CAPTURE(j, dist[j], label);
        CHECK(ctx[0] == 1.0 - std::pow(2.0, label));
        CHECK(ctx[1] == 1.0 + std::pow(3.0, label));
      }
    }
}

TEST_CASE("shaw: masked cells are never touched, future keys are refused", "[shaw]") {
  // Causal, no memory: cells j > i are masked and have negative distances.
  const int B = 1, H = 2, dh = 3, L = 4, K = L;
  Positions pos(L, 0, 0);
  AttentionGeometry g{B, L, 0, K, H, dh, 0, pos.q.data(), pos.k.data()};
  Rng rng(3);
  for (bool naive : {false, true}) {
    ParameterArena<double> arena;
    auto enc = make_shaw({.clip_k = 2, .naive = naive}, {H * dh, H, dh, 1}, arena);
    arena.allocate();
    set_shaw_parameters(arena, rng, 1.0);
    auto q = random_vector(B * L * H * dh, rng), k = random_vector(B * K * H * dh, rng);
    auto dctx = random_vector(B * L * H * dh, rng), probs = random_vector(B * H * L * K, rng);
    zero_masked(probs, g);
    std::vector<double> scores(B * H * L * K, 7.0), ctx(B * L * H * dh, 0),
        dprobs(B * H * L * K, 5.0);
    enc->scores_forward(0, g, q.data(), k.data(), 0.5, scores.data());
    enc->values_forward(0, g, probs.data(), ctx.data());
    enc->values_backward(0, g, probs.data(), dctx.data(), dprobs.data());
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i)
        for (int j = i + 1; j < K; ++j) {
          CHECK(scores[(h * L + i) * K + j] == 7.0);
          CHECK(dprobs[(h * L + i) * K + j] == 5.0);
        }

    // A visible key with a larger position than its query contradicts the causal mask.
    std::vector<std::int64_t> bad_q = {0, 1, 2, 3}, bad_k = {0, 1, 5, 3};
    AttentionGeometry bad{B, L, 0, K, H, dh, 0, bad_q.data(), bad_k.data()};
    CHECK_THROWS_AS(enc->scores_forward(0, bad, q.data(), k.data(), 0.5, scores.data()),
                    std::invalid_argument);
  }
}

TEST_CASE("shaw: efficient form equals the naive reference", "[shaw]") {
  const int B = 2, L = 5, H = 2, dh = 3, layers = 2, layer = 1;
  int configs = 0;
  for (int M : {0, 3})
    for (int window : {0, 4})
      for (auto [keys, values] : {std::pair{true, false}, {false, true}, {true, true}})
        for (bool per_head : {false, true})
          for (int clip : {0, 2, 20}) {  // 20 > K: no clipping at all
            CAPTURE(M, window, keys, values, per_head, clip);
            const int K = M + L;
            Positions pos(L, M, 7);
            AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
            const EncodingShape shape{H * dh, H, dh, layers};
            ShawOptions o{.clip_k = clip, .keys = keys, .values = values, .per_head = per_head};
            ParameterArena<double> fast_arena, slow_arena;
            auto fast = make_shaw(o, shape, fast_arena);
            o.naive = true;
            auto slow = make_shaw(o, shape, slow_arena);
            fast_arena.allocate();
            slow_arena.allocate();
            REQUIRE(fast_arena.count() == slow_arena.count());
            Rng rng(100 + configs);
            set_shaw_parameters(fast_arena, rng, 1.0);
            std::copy(fast_arena.values(), fast_arena.values() + fast_arena.count(),
                      slow_arena.values());
            HookInputs in(g, rng);
            const auto grads0 = random_vector(fast_arena.count(), rng);
            const HookRun a = run_hooks(*fast, fast_arena, layer, g, in, grads0);
            const HookRun b = run_hooks(*slow, slow_arena, layer, g, in, grads0);
            CHECK(max_abs_diff(a.scores, b.scores) < 1e-12);
            CHECK(max_abs_diff(a.ctx, b.ctx) < 1e-12);
            CHECK(max_abs_diff(a.dq, b.dq) < 1e-12);
            CHECK(max_abs_diff(a.dprobs, b.dprobs) < 1e-12);
            CHECK(max_abs_diff(a.grads, b.grads) < 1e-12);
            // Something happened, k and dk were left alone.
            if (keys) CHECK(max_abs_diff(a.scores, in.scores0) > 1e-3);
            if (values) CHECK(max_abs_diff(a.ctx, in.ctx0) > 1e-3);
            CHECK(a.dk == in.dk0);
            CHECK(b.dk == in.dk0);
            // Layer 0's tables get no gradient from a call on layer 1.
            const std::size_t layer1 = fast_arena.slots()[(keys && values) ? 2 : 1].offset;
            for (std::size_t i = 0; i < layer1; ++i) REQUIRE(a.grads[i] == grads0[i]);
            ++configs;
          }
  CHECK(configs == 72);
}

TEST_CASE("shaw: finite-difference gradients of the hooks", "[shaw][grad]") {
  // loss = sum(R1 * scores_after_hook) + sum(R2 * ctx_after_hook); R1 is 0 on masked cells.
  const int B = 2, L = 3, M = 2, K = M + L, H = 2, dh = 3;
  Positions pos(L, M, 4);
  for (bool naive : {false, true})
    for (bool per_head : {false, true}) {
      CAPTURE(naive, per_head);
      ParameterArena<double> arena;
      auto enc = make_shaw({.clip_k = 2, .per_head = per_head, .naive = naive},
                           {H * dh, H, dh, 1}, arena);
      arena.allocate();
      Rng rng(7);
      set_shaw_parameters(arena, rng, 0.7);
      for (int window : {0, 3}) {  // the same object across geometries: buffers must reshape
        CAPTURE(window);
        AttentionGeometry g{B, L, M, K, H, dh, window, pos.q.data(), pos.k.data()};
        HookInputs in(g, rng);
        const double scale = 1.0 / std::sqrt(double(dh));
        std::vector<double> scores, ctx;
        auto loss = [&] {
          scores = in.scores0;
          ctx = in.ctx0;
          enc->scores_forward(0, g, in.q.data(), in.k.data(), scale, scores.data());
          enc->values_forward(0, g, in.probs.data(), ctx.data());
          return dot(in.dscores, scores) + dot(in.dctx, ctx);
        };
        std::vector<double> dq(in.q.size(), 0), dk(in.k.size(), 0), dprobs(in.probs.size(), 0);
        arena.zero_grads();
        enc->values_backward(0, g, in.probs.data(), in.dctx.data(), dprobs.data());
        enc->scores_backward(0, g, in.q.data(), in.k.data(), scale, in.dscores.data(),
                             dq.data(), dk.data());
        std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
        require_gradient("w_K, w_V", arena.values(), analytic.data(), arena.count(), loss);
        require_gradient("q", in.q.data(), dq.data(), dq.size(), loss);
        require_gradient("k", in.k.data(), dk.data(), dk.size(), loss);
        require_gradient("probs", in.probs.data(), dprobs.data(), dprobs.size(), loss);
      }
    }
}

TEST_CASE("shaw: shifting every position by a constant changes nothing", "[shaw]") {
  const int B = 2, L = 4, M = 3, K = M + L, H = 2, dh = 3;
  for (bool naive : {false, true})
    for (bool per_head : {false, true}) {
      CAPTURE(naive, per_head);
      ParameterArena<double> arena;
      auto enc = make_shaw({.clip_k = 2, .per_head = per_head, .naive = naive},
                           {H * dh, H, dh, 1}, arena);
      arena.allocate();
      Rng rng(9);
      set_shaw_parameters(arena, rng, 1.0);
      Positions p0(L, M, 0), p13(L, M, 13);
      AttentionGeometry g0{B, L, M, K, H, dh, 0, p0.q.data(), p0.k.data()};
      AttentionGeometry g13{B, L, M, K, H, dh, 0, p13.q.data(), p13.k.data()};
      HookInputs in(g0, rng);
      const std::vector<double> grads0(arena.count(), 0);
      const HookRun a = run_hooks(*enc, arena, 0, g0, in, grads0);
      const HookRun b = run_hooks(*enc, arena, 0, g13, in, grads0);
      CHECK(a.scores == b.scores);
      CHECK(a.ctx == b.ctx);
      CHECK(a.dq == b.dq);
      CHECK(a.dprobs == b.dprobs);
      CHECK(a.grads == b.grads);
      CHECK(max_abs_diff(a.scores, in.scores0) > 1e-3);  // the shift test is not vacuous

      // Through attention: the layer output is identical too.
      ParameterArena<double> arena2;
      auto enc2 = make_shaw({.clip_k = 2, .per_head = per_head, .naive = naive, .init_std = 0.5},
                            {H * dh, H, dh, 1}, arena2);
      Attention<double> attn(arena2, "attn.", H * dh, H);
      arena2.allocate();
      attn.init(rng, 0.5);
      enc2->init(arena2, rng);
      auto x = random_vector(B * K * H * dh, rng);
      std::vector<double> out0(B * L * H * dh), out13(B * L * H * dh);
      attn.forward(x.data(), g0, *enc2, 0, out0.data());
      attn.forward(x.data(), g13, *enc2, 0, out13.data());
      CHECK(out0 == out13);
    }
}
