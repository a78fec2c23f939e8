// The training machinery: schedule, clipping, AdamW, determinism, and that a model learns.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <sstream>

#include "model/transformer.hpp"
#include "eval/chunked.hpp"
#include "train/optimizer.hpp"
#include "train/train.hpp"

using namespace poslab;

namespace {
Config small_config() {
  Config c;
  c.model.d_model = 32;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.d_inner = 64;
  c.train.seq_len = 16;
  c.train.batch_size = 4;
  c.train.steps = 30;
  c.train.warmup_steps = 5;
  c.train.lr = 3e-3;
  c.train.log_every = 0;
  return c;
}

// A text with a strong, learnable regularity.
std::vector<std::int32_t> pattern_tokens(int n) {
  const std::string unit = "the quick brown fox jumps over the lazy dog. ";
  std::vector<std::int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<unsigned char>(unit[i % unit.size()]);
  return t;
}

std::vector<double> loss_curve(const Config& c, const std::vector<std::int32_t>& tokens) {
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(c.train.seed);
  std::ostringstream quiet;
  return train_model(model, c, tokens, tokens, nullptr, quiet).losses;
}
}  // namespace

TEST_CASE("learning rate: linear warm-up, then cosine decay to min_lr_ratio", "[train]") {
  TrainConfig c;
  c.lr = 1e-3;
  c.warmup_steps = 10;
  c.steps = 110;
  c.min_lr_ratio = 0.1;
  CHECK(learning_rate(c, 0) == Approx(1e-4));  // step 1 of 10
  CHECK(learning_rate(c, 9) == Approx(1e-3));  // end of warm-up: peak
  CHECK(learning_rate(c, 59) == Approx(1e-3 * (0.1 + 0.9 * 0.5)));  // half-way: cos(pi/2) = 0
  CHECK(learning_rate(c, 109) == Approx(1e-4));  // last step: lr * min_lr_ratio
}

TEST_CASE("gradient clipping rescales to the global norm", "[train]") {
  ParameterArena<float> arena;
  Param a = arena.add("a", {2}), b = arena.add("b", {1});
  arena.allocate();
  arena.grad(a)[0] = 3;
  arena.grad(a)[1] = 0;
  arena.grad(b)[0] = 4;  // global norm 5
  CHECK(clip_gradients(arena, 10.0) == Approx(5.0));
  CHECK(arena.grad(b)[0] == 4.0f);  // below the threshold: untouched
  CHECK(clip_gradients(arena, 1.0) == Approx(5.0));
  CHECK(arena.grad(a)[0] == Approx(0.6f));
  CHECK(arena.grad(b)[0] == Approx(0.8f));
}

TEST_CASE("AdamW: first step moves each parameter by lr against its gradient's sign", "[train]") {
  ParameterArena<float> arena;
  Param w = arena.add("w", {2}, true), g = arena.add("gain", {1}, false);
  arena.allocate();
  arena.value(w)[0] = 1;
  arena.value(w)[1] = 1;
  arena.value(g)[0] = 1;
  arena.grad(w)[0] = 0.5;
  arena.grad(w)[1] = -2;
  arena.grad(g)[0] = 3;
  TrainConfig c;
  c.weight_decay = 0.1;
  adamw_step(arena, c, 0, 0.01);
  // m_hat / sqrt(v_hat) = sign(g) on the first step; decay only on the matrix.
  CHECK(arena.value(w)[0] == Approx(1 - 0.01 - 0.01 * 0.1 * 1).epsilon(1e-5));
  CHECK(arena.value(w)[1] == Approx(1 + 0.01 - 0.01 * 0.1 * 1).epsilon(1e-5));
  CHECK(arena.value(g)[0] == Approx(1 - 0.01).epsilon(1e-5));
}

TEST_CASE("same config and seed give a bit-identical loss curve; another seed does not",
          "[train][determinism]") {
  const auto tokens = pattern_tokens(4000);
  Config c = small_config();
  c.memory.mem_len = 8;
  const auto first = loss_curve(c, tokens);
  const auto second = loss_curve(c, tokens);
  REQUIRE(first.size() == 30);
  REQUIRE(first == second);  // exact equality of every step's loss
  c.train.seed = 2;
  REQUIRE(loss_curve(c, tokens) != first);
}

TEST_CASE("a small model learns a repetitive text far below the uniform loss", "[train]") {
  const auto tokens = pattern_tokens(6000);
  Config c = small_config();
  c.train.steps = 150;
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(c.train.seed);
  std::ostringstream quiet;
  const TrainReport r = train_model(model, c, tokens, tokens, nullptr, quiet);
  const EvalResult e = evaluate_stream(model, tokens, 4, 16, 0, 0);
  INFO("train loss " << r.final_train_loss << ", eval loss " << e.loss);
  CHECK(r.losses.front() > 5.0);  // about log(256) = 5.55 at init
  CHECK(e.loss < 1.0);            // the text is nearly deterministic given its context
  CHECK(e.accuracy > 0.7);
}

TEST_CASE("randomized positions: sorted distinct samples in training, contiguous in evaluation",
          "[train][positions]") {
  Config c = small_config();
  c.encoding.type = "learned";
  c.encoding.options = Options::defaults(find_encoding("learned")->options);
  c.memory.mem_len = 4;
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(1);
  model.enable_randomized_positions(7, 100);
  const auto tokens = pattern_tokens(200);
  std::vector<std::int32_t> tok(tokens.begin(), tokens.begin() + 2 * 16);
  std::set<std::vector<std::int64_t>> seen;
  for (int step = 0; step < 20; ++step) {
    model.forward(tok.data(), tok.data(), nullptr, 2, 16, 0, true);
    const AttentionGeometry& g = model.geometry();
    std::vector<std::int64_t> k(g.k_pos, g.k_pos + g.k_len);
    for (int j = 1; j < g.k_len; ++j) REQUIRE(k[j] > k[j - 1]);  // sorted, distinct
    REQUIRE(k.front() >= 0);
    REQUIRE(k.back() < 100);
    for (int i = 0; i < g.q_len; ++i) REQUIRE(g.q_pos[i] == k[g.mem_len + i]);  // queries = segment keys
    seen.insert(k);
  }
  REQUIRE(seen.size() > 15);  // a new sample every step
  // Evaluation switches the sampling off and restores it afterwards.
  const EvalResult e = evaluate_stream(model, tokens, 2, 16, 0, 1);
  REQUIRE(e.tokens > 0);
  model.set_randomized_positions(false);
  model.forward(tok.data(), tok.data(), nullptr, 2, 16, 0, false);
  for (int i = 0; i < 16; ++i) REQUIRE(model.geometry().q_pos[i] == i);
  // A window larger than the range is a clear error.
  model.enable_randomized_positions(7, 10);
  REQUIRE_THROWS_WITH(model.forward(tok.data(), tok.data(), nullptr, 2, 16, 0, false),
                      Catch::Contains("train.max_position"));
}

TEST_CASE("randomized positions: a run trains and is reproducible", "[train][positions]") {
  Config c = small_config();
  c.encoding.type = "sinusoidal";
  c.train.randomized_positions = true;
  c.train.max_position = 256;
  const auto tokens = pattern_tokens(4000);
  const auto first = loss_curve(c, tokens);
  REQUIRE(first == loss_curve(c, tokens));
  c.train.randomized_positions = false;
  REQUIRE(first != loss_curve(c, tokens));  // the positions really changed
}
