// The evaluation-only forward (nn/inference_scratch.hpp) against the training forward.
//
// 1. Unchunked (one chunk of all B rows, every setting whose scores fit the budget): the very
//    same calls in the same order, so logits and losses are bit-identical, in float.
// 2. Row by row (budget 0): the encodings get a geometry with batch = 1 and pointers offset to
//    row b, so each (b, h) cell sees the same inputs; only the shapes of the encodings' own
//    BLAS calls change (e.g. Shaw's q a^K product over B L H rows instead of L H), which can
//    change the summation order inside BLAS. In double, that is a rounding difference of a few
//    ulps of the values summed (|x| < 100 here, d_h <= 8 and K <= 24 terms), so 1e-10 on the
//    logits is far above rounding and far below any indexing mistake (which moves logits by
//    O(0.1) with init_std 0.5). Across several segments the memory carries it forward too.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "core/rng.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"

using namespace poslab;

namespace {

struct Setting {
  std::string encoding;
  std::vector<std::pair<std::string, OptionValue>> options;
  int mem_len;
};

// (A unique_ptr: the layers and the encoding hold references into the model's arena.)
template <class T>
std::unique_ptr<TransformerLM<T>> make_model(const Setting& s) {
  ModelConfig m;
  m.d_model = 16, m.n_layers = 2, m.n_heads = 2, m.d_inner = 32, m.vocab_size = 32;
  m.init_std = 0.5;  // sharp attention: a wrong cell would show
  EncodingConfig e;
  e.type = s.encoding;
  e.options = Options::defaults(find_encoding(s.encoding)->options);
  for (const auto& [k, v] : s.options) e.options.set(k, v);
  MemoryConfig memory;
  memory.mem_len = s.mem_len;
  auto model = std::make_unique<TransformerLM<T>>(m, e, memory);
  model->init(5);
  return model;
}

// Logits of `segments` consecutive segments [B, L] of random tokens (memory carried).
template <class T>
std::vector<T> logits_of(TransformerLM<T>& model, int B, int L, int segments) {
  Rng rng(9);
  std::vector<std::int32_t> in(B * L), out(B * L);
  std::vector<T> all;
  model.reset_memory();
  for (int s = 0; s < segments; ++s) {
    for (int i = 0; i < B * L; ++i) in[i] = std::int32_t(rng.below(32)), out[i] = std::int32_t(rng.below(32));
    model.forward(in.data(), out.data(), nullptr, B, L, 0, true);
    all.insert(all.end(), model.logits().begin(), model.logits().end());
  }
  return all;
}

const std::vector<Setting> settings = {
    {"transformer_xl", {}, 8},
    {"shaw", {{"values", true}}, 8},
    {"deberta", {}, 8},
    {"t5_bias", {}, 8},
    {"alibi", {}, 0},
    {"rope", {}, 8},
};

}  // namespace

TEST_CASE("evaluation-only forward, one chunk: bit-identical to the training forward",
          "[inference]") {
  for (const auto& s : settings) {
    INFO(s.encoding);
    auto train_path = make_model<float>(s);
    auto eval_path = make_model<float>(s);
    eval_path->set_inference_only(true);
    const auto a = logits_of(*train_path, 3, 8, 3), b = logits_of(*eval_path, 3, 8, 3);
    REQUIRE(a.size() == b.size());
    long differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    CHECK(differ == 0);
    CHECK_THROWS_AS(eval_path->backward(), std::logic_error);
  }
}

TEST_CASE("evaluation-only forward, row by row: equal to the whole-batch forward", "[inference]") {
  for (const auto& s : settings) {
    INFO(s.encoding);
    auto whole = make_model<double>(s);
    auto rows = make_model<double>(s);
    rows->set_inference_only(true);
    rows->inference_scratch().score_budget_bytes = 0;  // every batch row its own chunk
    const auto a = logits_of(*whole, 3, 8, 3), b = logits_of(*rows, 3, 8, 3);
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    CHECK(worst <= 1e-10);
    CHECK(rows->inference_scratch().scores.shape(0) == 1);  // [1, H, L, K]: one row at a time
  }
}
