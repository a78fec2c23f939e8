// The vanilla sliding-window evaluation (Dai et al. 2019, Table 9's baseline) against state
// reuse: where the two give a token the same context, they must give it the same loss.
//
// With ONE layer, the memory of segment recurrence holds the layer's inputs (embeddings) of the
// previous tokens, exactly what a recomputed window would hold; with a relative encoding the
// positions do not matter either. So, for token t, reuse with segments of 1 token and memory
// A - 1 sees the same A keys as a window of A tokens ending at t, and the losses agree to float
// rounding. (With more layers they differ: the cached states of deeper layers were computed from
// shorter contexts. That is the approximation Transformer-XL makes, not a bug.)
#include <catch2/catch.hpp>

#include "core/rng.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "token_helpers.hpp"
#include "eval/sliding_window.hpp"

using namespace poslab;
using poslab::testing::random_tokens;

namespace {

// Mean loss of predicting tokens[first + 1 .. last + 1] one token per segment, with memory M.
double reuse_loss_one_token_segments(TransformerLM<float>& model,
                                     const std::vector<std::int32_t>& tokens, int first, int last) {
  model.reset_memory();
  double sum = 0;
  for (int t = 0; t <= last; ++t) {
    const double loss = model.forward(&tokens[t], &tokens[t + 1], nullptr, 1, 1, t, true);
    if (t >= first) sum += loss;
  }
  return sum / (last - first + 1);
}

}  // namespace

TEST_CASE("sliding window == state reuse where both see the same context (1 layer, relative)",
          "[sliding]") {
  const int A = 9, n = 80;
  for (const std::string encoding : {"transformer_xl", "t5_bias", "alibi", "none"}) {
    ModelConfig m;
    m.d_model = 16, m.n_layers = 1, m.n_heads = 2, m.d_inner = 32;
    m.init_std = 0.5;  // large weights: sharp attention, so that context changes the loss
    EncodingConfig e;
    e.type = encoding;
    e.options = Options::defaults(find_encoding(encoding)->options);
    MemoryConfig memory;
    memory.mem_len = A - 1;
    TransformerLM<float> model(m, e, memory);
    model.init(7);
    const auto tokens = random_tokens(n, m.vocab_size, 3);

    // Windows of A tokens ending at t = A-1 .. A-1+k-1 predict tokens[A .. A+k-1].
    const int k = 40;
    const EvalResult sliding = evaluate_sliding_window(
        model, tokens, {.attn_len = A, .stride = 1, .max_targets = k, .batch = 8});
    REQUIRE(sliding.tokens == k);
    const double reuse = reuse_loss_one_token_segments(model, tokens, A - 1, A - 1 + k - 1);
    INFO(encoding);
    CHECK(sliding.loss == Approx(reuse).epsilon(1e-5));

    // A window one token shorter sees less context: the loss must change (the check can fail).
    const EvalResult shorter = evaluate_sliding_window(
        model, std::vector<std::int32_t>(tokens.begin() + 1, tokens.end()),
        {.attn_len = A - 1, .stride = 1, .max_targets = k, .batch = 8});
    CHECK(shorter.loss != Approx(reuse).epsilon(1e-5));
  }
}

TEST_CASE("sliding window: per-segment stride scores S tokens per window, bad options throw",
          "[sliding]") {
  ModelConfig m;
  m.d_model = 16, m.n_layers = 1, m.n_heads = 2, m.d_inner = 32;
  EncodingConfig e;
  TransformerLM<float> model(m, e, MemoryConfig{});
  model.init(1);
  const auto tokens = random_tokens(100, m.vocab_size, 5);
  const EvalResult r =
      evaluate_sliding_window(model, tokens, {.attn_len = 20, .stride = 5, .batch = 3});
  CHECK(r.tokens == 5 * ((100 - 20 - 1) / 5 + 1));  // every window scores its last 5
  CHECK_THROWS_WITH(evaluate_sliding_window(model, tokens, {.attn_len = 4, .stride = 5}),
                    Catch::Contains("stride <= attn_len"));
  CHECK_THROWS_WITH(evaluate_sliding_window(model, tokens, {.attn_len = 200}),
                    Catch::Contains("too few"));
}
