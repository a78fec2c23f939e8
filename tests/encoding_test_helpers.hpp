// Helpers shared by the encoding and gradient tests: vector arithmetic, positions and masks for
// an AttentionGeometry, and the two gradient harnesses every encoding goes through (one attention
// layer with its encoding, and a whole model with memory). Double precision throughout, like
// gradcheck.hpp; the assertions and tolerances stay in the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "core/arena.hpp"
#include "core/rng.hpp"
#include "encodings/encoding.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "nn/attention.hpp"

namespace poslab::testing {

// The cells of one CSV line (`poslab encodings --describe NAME --csv`); a trailing separator
// ends with an empty cell.
inline std::vector<std::string> split_cells(const std::string& line, char sep) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) cells.push_back(cell);
  if (!line.empty() && line.back() == sep) cells.push_back("");
  return cells;
}

// A value computed by the code under test against the formula worked by hand, to 1e-12 relative.
inline void require_close(const std::string& what, double got, double want) {
  INFO(what << ": got " << got << ", by hand " << want);
  REQUIRE(std::abs(got - want) <= 1e-12 * std::max(1.0, std::abs(want)));
}

// The default options of a registered encoding (REQUIREs that it is registered).
inline Options default_options(const std::string& encoding) {
  const EncodingInfo* info = find_encoding(encoding);
  REQUIRE(info != nullptr);
  return Options::defaults(info->options);
}

inline double dot(const std::vector<double>& a, const double* b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return dot(a, b.data());
}

inline double max_abs_diff(const double* a, const double* b, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}
inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  return max_abs_diff(a.data(), b.data(), a.size());
}

// An encoding without parameters (rope, xpos, ...), in double, with its defaults and the
// options in `set` (scaling, factor, ...); its arena must stay empty.
inline std::unique_ptr<Encoding<double>> make_parameterless(
    const std::string& name, const EncodingShape& shape,
    const std::map<std::string, OptionValue>& set = {}) {
  Options o = default_options(name);
  for (const auto& [key, value] : set) o.set(key, value);
  ParameterArena<double> arena;
  auto enc = find_encoding(name)->make<double>(o, shape, arena);
  REQUIRE(arena.count() == 0);
  return enc;
}

// A rope encoding with the options in `set`.
inline std::unique_ptr<Encoding<double>> make_rope_with(
    const EncodingShape& shape, const std::map<std::string, OptionValue>& set) {
  return make_parameterless("rope", shape, set);
}

// Random q [B, L, H, d_h] and k [B, K, H, d_h] (drawn from `seed`, q first), and the check that
// a q/k hook's backward is the transpose of its forward's Jacobian: with q', k' the hook's output
// and Rq, Rk random, loss = <Rq, q'> + <Rk, k'> has dLoss/dq = qk_backward(Rq), checked by finite
// differences (and the same for k). Returns q and k, for a test's further checks on them.
template <class EncodingPtr>
std::pair<std::vector<double>, std::vector<double>> require_qk_hook_transpose(
    const EncodingPtr& enc, const AttentionGeometry& g, std::uint64_t seed) {
  Rng rng(seed);
  const std::size_t row = std::size_t(g.n_heads) * g.d_head;
  auto q = random_vector(std::size_t(g.batch) * g.q_len * row, rng);
  auto k = random_vector(std::size_t(g.batch) * g.k_len * row, rng);
  const auto Rq = random_vector(q.size(), rng), Rk = random_vector(k.size(), rng);
  auto loss = [&] {
    auto qr = q, kr = k;
    enc->qk_forward(0, g, qr.data(), kr.data());
    return dot(Rq, qr) + dot(Rk, kr);
  };
  auto dq = Rq, dk = Rk;  // dLoss/dq' = Rq, mapped in place to dLoss/dq
  loss();
  enc->qk_backward(0, g, dq.data(), dk.data());
  require_gradient("q", q.data(), dq.data(), q.size(), loss);
  require_gradient("k", k.data(), dk.data(), k.size(), loss);
  return {q, k};
}

// Zeroes the masked cells of a [B, H, L, K] tensor (probs and dscores are 0 there).
inline void zero_masked(std::vector<double>& t, const AttentionGeometry& g) {
  for (int bh = 0; bh < g.batch * g.n_heads; ++bh)
    for (int i = 0; i < g.q_len; ++i)
      for (int j = 0; j < g.k_len; ++j)
        if (!g.visible(i, j)) t[(long(bh) * g.q_len + i) * g.k_len + j] = 0;
}

// Checks a score hook's output [B, H, L, K], which started at `before` everywhere: masked cells
// must still hold it exactly; every visible cell is passed to check_visible(b, h, i, j, s).
template <class F>
void check_score_cells(const AttentionGeometry& g, const std::vector<double>& scores,
                       double before, F&& check_visible) {
  const int B = g.batch, H = g.n_heads, L = g.q_len, K = g.k_len;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < K; ++j) {
          CAPTURE(b, h, i, j);
          const double s = scores[((std::size_t(b) * H + h) * L + i) * K + j];
          if (!g.visible(i, j)) {
            CHECK(s == before);
            continue;
          }
          check_visible(b, h, i, j, s);
        }
}

// Positions as the model makes them: queries base .. base + L - 1, keys (memory first)
// base - M .. base + L - 1.
struct Positions {
  std::vector<std::int64_t> q, k;
  Positions(int L, int M, std::int64_t base) : q(L), k(M + L) {
    std::iota(q.begin(), q.end(), base);
    std::iota(k.begin(), k.end(), base - M);
  }
};

// The values of the parameter called `name`.
inline double* slot(ParameterArena<double>& arena, const std::string& name) {
  for (const auto& s : arena.slots())
    if (s.name == name) return arena.values() + s.offset;
  FAIL("no parameter " << name);
  return nullptr;
}

// One attention layer with its encoding: loss = sum(R * attn(x)) for random x [B, K, d] and
// R [B, L, d] (drawn from rng in that order). Checks dx and every parameter in `arena` (the
// attention's, and the encoding's if it shares the arena) by finite differences.
inline void check_attention_gradients(Attention<double>& attn, Encoding<double>& enc,
                                      ParameterArena<double>& arena, const AttentionGeometry& g,
                                      int layer, Rng& rng, const std::string& x_name,
                                      const std::string& params_name) {
  const int B = g.batch, L = g.q_len, K = g.k_len, d = g.d_model();
  auto x = random_vector(B * K * d, rng), R = random_vector(B * L * d, rng);
  std::vector<double> out(B * L * d), dx(B * K * d, 7.0);  // backward writes dx over this
  auto loss = [&] {
    attn.forward(x.data(), g, enc, layer, out.data());
    return dot(R, out);
  };
  arena.zero_grads();
  loss();
  attn.backward(R.data(), x.data(), g, enc, layer, dx.data());
  std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
  require_gradient(x_name, x.data(), dx.data(), x.size(), loss);
  require_gradient(params_name, arena.values(), analytic.data(), arena.count(), loss);
}

// The score hook (c) of layers 0 and 1 on one geometry (per-layer parameters, or one table that
// both layers share): loss = sum(R0 * S_0) + sum(R1 * S_1), S_l = base + the terms of layer l,
// scale 0.5. Runs the forward and both backward passes from zeroed parameter gradients (dq and dk
// accumulate whatever the hook gives them), checks every parameter in `arena` by finite
// differences and returns their analytic gradient.
inline std::vector<double> check_two_layer_score_gradients(
    Encoding<double>& enc, ParameterArena<double>& arena, const AttentionGeometry& g,
    const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& base,
    const std::vector<double>& R0, const std::vector<double>& R1, std::vector<double>& dq,
    std::vector<double>& dk, const std::string& what) {
  auto loss = [&] {
    std::vector<double> a = base, b = base;
    enc.scores_forward(0, g, q.data(), k.data(), 0.5, a.data());
    enc.scores_forward(1, g, q.data(), k.data(), 0.5, b.data());
    return dot(R0, a) + dot(R1, b);
  };
  arena.zero_grads();
  loss();
  enc.scores_backward(0, g, q.data(), k.data(), 0.5, R0.data(), dq.data(), dk.data());
  enc.scores_backward(1, g, q.data(), k.data(), 0.5, R1.data(), dq.data(), dk.data());
  std::vector<double> analytic(arena.grads(), arena.grads() + arena.count());
  require_gradient(what, arena.values(), analytic.data(), arena.count(), loss);
  return analytic;
}

// A model small enough to check every parameter by finite differences.
inline ModelConfig tiny_model_config(bool pre_ln = false, bool tie = false,
                                     const std::string& act = "relu") {
  ModelConfig m;
  m.vocab_size = 7;
  m.d_model = 8;
  m.n_layers = 2;
  m.n_heads = 2;
  m.d_inner = 12;
  m.activation = act;
  m.pre_ln = pre_ln;
  m.tie_embeddings = tie;
  m.init_std = 0.3;  // large enough that every path carries a visible gradient
  return m;
}

// Adds N(0, 0.2) to every parameter without weight decay (biases, gains, positional tables), so
// that zero-initialised ones are checked at a generic point.
template <class T>
void perturb_undecayed_parameters(ParameterArena<T>& arena, Rng& rng) {
  for (auto& slot : arena.slots())
    if (!slot.weight_decay)
      for (std::size_t i = 0; i < slot.size; ++i)
        arena.values()[slot.offset + i] += T(rng.normal(0, 0.2));
}

// Perturbs every parameter of a whole model (B = 2, L = 4); with memory, the second segment is
// checked with the memory of the first held fixed (memory is stop-gradient). weights: the
// per-token loss weights [B * L], or empty for none.
inline void check_whole_model_gradients(const ModelConfig& m, const EncodingConfig& e,
                                        const MemoryConfig& mem,
                                        const std::vector<double>& weights = {}) {
  TransformerLM<double> model(m, e, mem);
  model.init(11);
  Rng rng(12);
  perturb_undecayed_parameters(model.arena(), rng);
  const int B = 2, L = 4;
  std::vector<std::int32_t> tok(B * L), tgt(B * L), tok2(B * L), tgt2(B * L);
  for (auto* v : {&tok, &tgt, &tok2, &tgt2})
    for (auto& t : *v) t = std::int32_t(rng.below(m.vocab_size));
  const double* w = weights.empty() ? nullptr : weights.data();
  model.forward(tok.data(), tgt.data(), w, B, L, 0, true);  // fills memory
  auto loss = [&] { return model.forward(tok2.data(), tgt2.data(), w, B, L, L, false); };
  model.arena().zero_grads();
  loss();
  model.backward();
  std::vector<double> analytic(model.arena().grads(),
                               model.arena().grads() + model.arena().count());
  require_gradient("every model parameter", model.arena().values(), analytic.data(),
                   analytic.size(), loss);
}

}  // namespace poslab::testing
