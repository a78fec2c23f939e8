// The learned per-head sink logit (gpt-oss; docs/conventions.md, "Learned sink logit (gpt-oss)"),
// model.sink_logit: tests written from its formula,
//   P_ij = exp(S_ij) / (exp(s_h) + sum_j' exp(S_ij')),   j, j' visible to query i,
// with S = q_h k_h^T / sqrt(d_h) (no encoding) and s_h not scaled.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "encoding_test_helpers.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

// The no-position encoding "none" for d_model d with H heads (no parameters).
std::unique_ptr<Encoding<double>> no_encoding(int d, int H, ParameterArena<double>& arena) {
  return find_encoding("none")->make<double>(Options{}, {d, H, d / H, 1}, arena);
}

// The gradients of the parameter called `name`.
const double* grad_of(ParameterArena<double>& arena, const std::string& name) {
  for (const auto& s : arena.slots())
    if (s.name == name) return arena.grads() + s.offset;
  FAIL("no parameter " << name);
  return nullptr;
}

}  // namespace

TEST_CASE("sink logit: the weights are exp(S_ij) / (exp(s_h) + sum_j' exp(S_ij'))",
          "[sink][nn]") {
  Rng rng(21);
  const int B = 1, L = 3, M = 2, K = M + L, d = 4, H = 2, dh = d / H;
  ParameterArena<double> arena;
  Attention<double> attn(arena, "attn.", d, H, /*sink_logit=*/true);
  arena.allocate();
  attn.init(rng, 0.7);
  double* sink = slot(arena, "attn.sink");
  REQUIRE(sink[0] == 0.0);  // initialised to 0: softmax_1
  sink[0] = 0.9;
  sink[1] = -1.3;
  ParameterArena<double> none_params;
  auto none = no_encoding(d, H, none_params);
  std::vector<std::int64_t> qp = {2, 3, 4}, kp = {0, 1, 2, 3, 4};
  AttentionGeometry g{B, L, M, K, H, dh, 0, qp.data(), kp.data()};
  auto x = random_vector(B * K * d, rng);
  std::vector<double> out(B * L * d);
  attn.forward(x.data(), g, *none, 0, out.data());

  // q = x[M:] W_q, k = x W_k (row-major [in, out] weights, y = x W), head h = columns h dh..
  const double* Wq = slot(arena, "attn.W_q");
  const double* Wk = slot(arena, "attn.W_k");
  auto project = [&](const double* W, int row, int col) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += x[row * d + c] * W[c * d + col];
    return s;
  };
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < L; ++i) {
      std::vector<double> e(K, 0.0);  // exp(S_ij) for visible j (j <= i + M)
      double denominator = std::exp(sink[h]);
      for (int j = 0; j <= i + M; ++j) {
        double S = 0;
        for (int c = h * dh; c < (h + 1) * dh; ++c)
          S += project(Wq, M + i, c) * project(Wk, j, c);
        e[j] = std::exp(S / std::sqrt(double(dh)));
        denominator += e[j];
      }
      double row_sum = 0;
      for (int j = 0; j < K; ++j) {
        const double expected = e[j] / denominator;
        CHECK(attn.probs()(0, h, i, j) == Approx(expected).margin(1e-15));
        row_sum += attn.probs()(0, h, i, j);
      }
      // The sink takes the rest of the row: 1 - sum_j P_ij = exp(s_h) / denominator.
      CHECK(1 - row_sum == Approx(std::exp(sink[h]) / denominator).margin(1e-14));
    }
}

TEST_CASE("sink logit: gradients of the input rows, W_q..W_o and the sink, with memory",
          "[sink][grad][nn]") {
  Rng rng(22);
  const int B = 2, L = 3, M = 2, K = M + L, d = 8, H = 2;
  ParameterArena<double> arena;
  Attention<double> attn(arena, "attn.", d, H, /*sink_logit=*/true);
  arena.allocate();
  attn.init(rng, 0.5);
  slot(arena, "attn.sink")[0] = 0.4;  // away from 0, and a different value per head
  slot(arena, "attn.sink")[1] = -0.6;
  ParameterArena<double> none_params;
  auto none = no_encoding(d, H, none_params);
  std::vector<std::int64_t> qp = {2, 3, 4}, kp = {0, 1, 2, 3, 4};
  for (int window : {0, 3}) {
    AttentionGeometry g{B, L, M, K, H, d / H, window, qp.data(), kp.data()};
    check_attention_gradients(attn, *none, arena, g, 0, rng, "x (memory and segment rows)",
                              "W_q, W_k, W_v, W_o, sink");
  }
}

TEST_CASE("sink logit: s_h = -inf is exactly the model without a sink, outputs and gradients",
          "[sink][model]") {
  EncodingConfig rope;
  rope.type = "rope";
  rope.options = default_options("rope");
  MemoryConfig memory;
  memory.mem_len = 3;
  ModelConfig plain = tiny_model_config(), with_sink = plain;
  with_sink.sink_logit = true;
  TransformerLM<double> a(plain, rope, memory), b(with_sink, rope, memory);
  a.init(5);
  b.init(5);  // the sink draws nothing from the generator: every other parameter is the same
  for (const auto& s : b.arena().slots())
    if (s.name.find(".sink") != std::string::npos)
      std::fill_n(b.arena().values() + s.offset, s.size, -std::numeric_limits<double>::infinity());
  const int B = 2, L = 4;
  Rng rng(6);
  std::vector<std::int32_t> tok(B * L), tgt(B * L);
  for (int segment = 0; segment < 2; ++segment) {  // the second one with memory
    for (auto* v : {&tok, &tgt})
      for (auto& t : *v) t = std::int32_t(rng.below(plain.vocab_size));
    a.arena().zero_grads();
    b.arena().zero_grads();
    const double la = a.forward(tok.data(), tgt.data(), nullptr, B, L, segment * L);
    const double lb = b.forward(tok.data(), tgt.data(), nullptr, B, L, segment * L);
    REQUIRE(la == lb);  // bit for bit: exp(-inf - m) adds exactly 0 to every denominator
    a.backward();
    b.backward();
    for (const auto& s : a.arena().slots()) {
      const double* ga = a.arena().grads() + s.offset;
      const double* gb = grad_of(b.arena(), s.name);
      for (std::size_t i = 0; i < s.size; ++i) REQUIRE(ga[i] == gb[i]);
    }
    for (const auto& s : b.arena().slots())
      if (s.name.find(".sink") != std::string::npos)
        for (std::size_t i = 0; i < s.size; ++i) REQUIRE(b.arena().grads()[s.offset + i] == 0.0);
  }
}

TEST_CASE("sink logit: the whole model's gradient, every parameter", "[sink][grad][model]") {
  ModelConfig m = tiny_model_config(true, false, "gelu");
  m.sink_logit = true;
  EncodingConfig alibi;
  alibi.type = "alibi";
  alibi.options = default_options("alibi");
  MemoryConfig memory;
  memory.mem_len = 3;
  check_whole_model_gradients(m, alibi, memory);
}
