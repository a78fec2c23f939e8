// Gradient checks of every layer (parameters and inputs) and of the whole model.
// Each layer's scalar loss is sum(out * R) for a fixed random R, so backward gets dout = R.
#include <catch2/catch.hpp>

#include <numeric>

#include "encoding_test_helpers.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "nn/activation.hpp"
#include "nn/cross_entropy.hpp"
#include "nn/feedforward.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"

using namespace poslab;
using namespace poslab::testing;

TEST_CASE("linear: gradients of x, W and b", "[grad][nn]") {
  Rng rng(1);
  const int N = 5, in = 4, out = 3;
  auto x = random_vector(N * in, rng), W = random_vector(in * out, rng),
       b = random_vector(out, rng), R = random_vector(N * out, rng);
  std::vector<double> y(N * out), dx(N * in, 0), dW(in * out, 0), db(out, 0);
  auto loss = [&] {
    linear_forward<double>(x.data(), W.data(), b.data(), y.data(), N, in, out);
    return dot(R, y.data());
  };
  loss();
  linear_backward<double>(R.data(), x.data(), W.data(), dx.data(), dW.data(), db.data(), N, in,
                          out);
  require_gradient("x", x.data(), dx.data(), x.size(), loss);
  require_gradient("W", W.data(), dW.data(), W.size(), loss);
  require_gradient("b", b.data(), db.data(), b.size(), loss);
}

TEST_CASE("layer norm: gradients of x, g and b", "[grad][nn]") {
  Rng rng(2);
  const int N = 4, d = 6;
  auto x = random_vector(N * d, rng), g = random_vector(d, rng), b = random_vector(d, rng),
       R = random_vector(N * d, rng);
  std::vector<double> y(N * d), mean(N), rstd(N), dx(N * d, 0), dg(d, 0), db(d, 0);
  auto loss = [&] {
    layernorm_forward<double>(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), N,
                              d);
    return dot(R, y.data());
  };
  loss();
  layernorm_backward<double>(R.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(),
                             dg.data(), db.data(), N, d);
  require_gradient("x", x.data(), dx.data(), x.size(), loss);
  require_gradient("g", g.data(), dg.data(), g.size(), loss);
  require_gradient("b", b.data(), db.data(), b.size(), loss);
}

TEST_CASE("activations: ReLU and GELU derivatives", "[grad][nn]") {
  Rng rng(3);
  for (Activation act : {Activation::relu, Activation::gelu}) {
    auto u = random_vector(50, rng), R = random_vector(50, rng);
    // Keep ReLU inputs away from its kink, where a finite difference is meaningless.
    for (auto& x : u)
      if (std::abs(x) < 1e-3) x = 0.5;
    std::vector<double> out(50), du(50, 7.0);  // written over, not accumulated into
    auto loss = [&] {
      activation_forward<double>(act, u.data(), out.data(), 50);
      return dot(R, out.data());
    };
    loss();
    activation_backward<double>(act, u.data(), R.data(), du.data(), 50);
    require_gradient(act == Activation::relu ? "relu" : "gelu", u.data(), du.data(), 50, loss);
  }
}

TEST_CASE("cross-entropy with token weights: gradient of the logits", "[grad][nn]") {
  Rng rng(4);
  const int N = 6, V = 5;
  auto logits = random_vector(N * V, rng);
  std::vector<std::int32_t> targets = {0, 4, 2, 2, 1, 3};
  std::vector<double> weights = {1, 0, 1, 0.5, 0, 2};  // some tokens not scored
  std::vector<double> dlogits(N * V), scratch(N * V), token_loss(N);
  cross_entropy_forward_backward<double>(logits.data(), targets.data(), weights.data(),
                                         dlogits.data(), token_loss.data(), N, V);
  auto loss = [&] {
    return cross_entropy_forward_backward<double>(logits.data(), targets.data(), weights.data(),
                                                  scratch.data(), token_loss.data(), N, V);
  };
  require_gradient("logits", logits.data(), dlogits.data(), logits.size(), loss);
  // Unscored tokens get exactly zero gradient.
  for (int v = 0; v < V; ++v) REQUIRE(dlogits[1 * V + v] == 0.0);
}

TEST_CASE("feed-forward block: gradients of x and all parameters", "[grad][nn]") {
  Rng rng(5);
  const int N = 4, d = 6, di = 10;
  ParameterArena<double> arena;
  FeedForward<double> ff(arena, "ff.", d, di, Activation::gelu);
  arena.allocate();
  ff.init(rng, 0.5);
  for (Param p : {ff.b_1, ff.b_2})
    for (std::size_t i = 0; i < p.size; ++i) arena.value(p)[i] = rng.normal(0, 0.5);
  auto x = random_vector(N * d, rng), R = random_vector(N * d, rng);
  std::vector<double> out(N * d), dx(N * d, 0);
  auto loss = [&] {
    ff.forward(x.data(), out.data(), N);
    return dot(R, out.data());
  };
  loss();
  ff.backward(R.data(), x.data(), dx.data(), N);
  require_gradient("x", x.data(), dx.data(), x.size(), loss);
  require_gradient("all parameters", arena.values(), arena.grads(), arena.count(), loss);
}

TEST_CASE("attention with memory: gradients of every input row and parameter", "[grad][nn]") {
  Rng rng(6);
  const int B = 2, L = 3, M = 2, K = M + L, d = 8, H = 2;
  ParameterArena<double> arena;
  Attention<double> attn(arena, "attn.", d, H);
  arena.allocate();
  attn.init(rng, 0.5);
  ParameterArena<double> no_params;
  auto none = find_encoding("none")->make<double>(Options{}, {d, H, d / H, 1}, no_params);
  std::vector<std::int64_t> qp = {2, 3, 4}, kp = {0, 1, 2, 3, 4};
  for (int window : {0, 3}) {
    AttentionGeometry g{B, L, M, K, H, d / H, window, qp.data(), kp.data()};
    check_attention_gradients(attn, *none, arena, g, 0, rng, "x (memory and segment rows)",
                              "W_q, W_k, W_v, W_o");
  }
}

TEST_CASE("whole model: gradient of every parameter", "[grad][model]") {
  const std::vector<double> weights = {1, 0, 1, 1, 0.5, 1, 0, 2};  // per-token loss weights
  EncodingConfig none;
  MemoryConfig no_memory, memory;
  memory.mem_len = 3;
  SECTION("post-LN, ReLU, untied, no memory") {
    check_whole_model_gradients(tiny_model_config(false, false, "relu"), none, no_memory, weights);
  }
  SECTION("post-LN, GELU, tied, memory") {
    check_whole_model_gradients(tiny_model_config(false, true, "gelu"), none, memory, weights);
  }
  SECTION("pre-LN, GELU, untied, memory") {
    check_whole_model_gradients(tiny_model_config(true, false, "gelu"), none, memory, weights);
  }
}
