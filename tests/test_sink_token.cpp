// The prepended learned sink token (model.sink_token; Xiao et al. 2023, section 3.3;
// model/transformer.hpp, docs/conventions.md "Prepended sink token"), checked against its
// definition, not against the code under test:
//
//   a row x_0 .. x_{L-1} is read as [SINK, x_0, ..., x_{L-1}] at positions 0..L, SINK = V with
//   its own row of E, the sink's own output not scored, the output layer over the V real tokens.
//
// So a model WITHOUT the switch whose vocabulary has V + 1 ids, fed that row explicitly with
// weight 0 on the sink's column and the extra output class pushed to probability 0, computes the
// same losses and the same gradients. On top: finite differences for the sink's row, the
// initialisation shared with the plain model, the streaming cache keeping the sink as its first
// entry, and the config rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "config_test_helpers.hpp"
#include "encoding_test_helpers.hpp"
#include "eval/sink_diagnostic.hpp"
#include "eval/streaming_cache.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "token_helpers.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

template <class T>
const ParamSlot* find_slot(const ParameterArena<T>& arena, const std::string& name) {
  for (const auto& s : arena.slots())
    if (s.name == name) return &s;
  return nullptr;
}

EncodingConfig encoding_named(const std::string& type) {
  EncodingConfig e;
  e.type = type;
  e.options = default_options(type);
  return e;
}

// The explicit twin of a sink-token model `with`: no switch, vocabulary V + 1 (id V is the
// sink, an ordinary token to it), every parameter copied; the output layer's extra class V gets
// bias -1e4, so its probability is exp(-1e4) = 0 in double and the softmax over V is unchanged.
std::unique_ptr<TransformerLM<double>> explicit_twin(TransformerLM<double>& with,
                                                     const ModelConfig& m,
                                                     const EncodingConfig& e) {
  ModelConfig twin_cfg = m;
  twin_cfg.sink_token = false;
  twin_cfg.vocab_size = m.vocab_size + 1;
  auto twin = std::make_unique<TransformerLM<double>>(twin_cfg, e, MemoryConfig{});
  const int V = m.vocab_size, d = m.d_model;
  for (const auto& s : twin->arena().slots()) {
    const auto* from = find_slot(with.arena(), s.name);
    REQUIRE(from != nullptr);
    double* to = twin->arena().values() + s.offset;
    const double* src = with.arena().values() + from->offset;
    if (s.name == "output.W") {  // [d, V] -> [d, V + 1], column V = 0
      for (int r = 0; r < d; ++r) {
        std::copy_n(src + long(r) * V, V, to + long(r) * (V + 1));
        to[long(r) * (V + 1) + V] = 0;
      }
    } else if (s.name == "output.b") {  // [V] -> [V + 1], class V never predicted
      std::copy_n(src, V, to);
      to[V] = -1e4;
    } else {
      REQUIRE(s.size == from->size);  // the embedding is [V + 1, d] in both
      std::copy_n(src, s.size, to);
    }
  }
  return twin;
}

}  // namespace

TEST_CASE("sink token: the model reads [SINK, x] at positions 0..L and scores x_1..x_L only; "
          "losses and gradients equal an explicit twin's", "[sink_token][grad][model]") {
  const int B = 2, L = 5;
  for (const std::string enc : {"rope", "alibi", "learned"}) {
    for (const bool tie : {false, true}) {
      INFO(enc << (tie ? ", tied" : ", untied"));
      ModelConfig m = tiny_model_config(/*pre_ln=*/tie, tie, "gelu");
      m.sink_token = true;
      EncodingConfig e = encoding_named(enc);
      TransformerLM<double> with(m, e, MemoryConfig{});
      with.init(5);
      Rng rng(6);
      perturb_undecayed_parameters(with.arena(), rng);
      auto twin = explicit_twin(with, m, e);

      const auto x = random_tokens(B * (L + 1), m.vocab_size, 7);  // row b: x_0 .. x_L
      std::vector<std::int32_t> in(B * L), target(B * L);              // the sink model's [B, L]
      std::vector<std::int32_t> twin_in(B * (L + 1)), twin_target(B * (L + 1));
      std::vector<double> weights(B * L), twin_weights(B * (L + 1));
      for (int b = 0; b < B; ++b) {
        twin_in[b * (L + 1)] = m.vocab_size;     // SINK
        twin_target[b * (L + 1)] = x[b * (L + 1)];  // x_0: weight 0, never scored
        twin_weights[b * (L + 1)] = 0;
        for (int i = 0; i < L; ++i) {
          in[b * L + i] = twin_in[b * (L + 1) + i + 1] = x[b * (L + 1) + i];
          target[b * L + i] = twin_target[b * (L + 1) + i + 1] = x[b * (L + 1) + i + 1];
          weights[b * L + i] = twin_weights[b * (L + 1) + i + 1] = 0.5 + 0.25 * ((b + i) % 3);
        }
      }
      with.arena().zero_grads();
      twin->arena().zero_grads();
      const double loss = with.forward(in.data(), target.data(), weights.data(), B, L);
      const double twin_loss =
          twin->forward(twin_in.data(), twin_target.data(), twin_weights.data(), B, L + 1);
      REQUIRE(with.sink_prepended());
      CHECK(with.geometry().q_len == L + 1);
      CHECK(with.geometry().q_pos[0] == 0);  // the sink at 0, x_i at i + 1
      CHECK(with.geometry().q_pos[L] == L);
      REQUIRE(with.token_loss().size() == std::size_t(B * L));  // the sink's column dropped
      CHECK(loss == Approx(twin_loss).epsilon(1e-12));
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < L; ++i)
          CHECK(with.token_loss()(b * L + i) ==
                Approx(twin->token_loss()(b * (L + 1) + i + 1)).epsilon(1e-12));

      with.backward();
      twin->backward();
      for (const auto& s : with.arena().slots()) {
        INFO(s.name);
        const auto* t = find_slot(twin->arena(), s.name);
        const double* g = with.arena().grads() + s.offset;
        const double* tg = twin->arena().grads() + t->offset;
        const int V = m.vocab_size, d = m.d_model;
        for (std::size_t k = 0; k < s.size; ++k) {
          // output.W [d, V] sits in the twin's [d, V + 1]
          const std::size_t tk = s.name == "output.W" ? (k / V) * (V + 1) + k % V : k;
          CHECK(g[k] == Approx(tg[tk]).margin(1e-12));
        }
        if (s.name == "embedding") {  // the sink's row V gets a gradient (through attention)
          double norm = 0;
          for (int c = 0; c < d; ++c) norm += std::abs(g[std::size_t(V) * d + c]);
          CHECK(norm > 1e-6);
        }
      }
    }
  }
}

TEST_CASE("sink token: finite differences of the sink embedding's row and every parameter",
          "[sink_token][grad][model]") {
  for (const std::string enc : {"rope", "none"}) {
    INFO(enc);
    ModelConfig m = tiny_model_config(false, false, "relu");
    m.sink_token = true;
    TransformerLM<double> model(m, encoding_named(enc), MemoryConfig{});
    model.init(11);
    Rng rng(12);
    perturb_undecayed_parameters(model.arena(), rng);
    const int B = 2, L = 4;
    const auto tok = random_tokens(B * L, m.vocab_size, 13);
    const auto tgt = random_tokens(B * L, m.vocab_size, 14);
    auto loss = [&] { return model.forward(tok.data(), tgt.data(), nullptr, B, L); };
    model.arena().zero_grads();
    loss();
    model.backward();
    const auto* E = find_slot(model.arena(), "embedding");
    REQUIRE(E->size == std::size_t(m.vocab_size + 1) * m.d_model);
    // The sink's row: the last d entries of E.
    const std::size_t row = E->offset + std::size_t(m.vocab_size) * m.d_model;
    std::vector<double> analytic(model.arena().grads() + row,
                                 model.arena().grads() + row + m.d_model);
    double norm = 0;
    for (double g : analytic) norm += std::abs(g);
    CHECK(norm > 1e-6);  // the row is used: a zero gradient would pass any difference check
    require_gradient("the sink token's embedding row", model.arena().values() + row,
                     analytic.data(), analytic.size(), loss);
    std::vector<double> all(model.arena().grads(), model.arena().grads() + model.arena().count());
    require_gradient("every model parameter", model.arena().values(), all.data(), all.size(),
                     loss);
  }
}

TEST_CASE("sink token: every other parameter starts as in the model without it", "[sink_token]") {
  ModelConfig m = tiny_model_config();
  TransformerLM<float> plain(m, encoding_named("rope"), MemoryConfig{});
  m.sink_token = true;
  TransformerLM<float> with(m, encoding_named("rope"), MemoryConfig{});
  plain.init(3);
  with.init(3);
  for (const auto& s : plain.arena().slots()) {
    INFO(s.name);
    const auto* t = find_slot(with.arena(), s.name);
    REQUIRE(t != nullptr);
    CHECK(std::memcmp(plain.arena().values() + s.offset, with.arena().values() + t->offset,
                      s.size * sizeof(float)) == 0);
  }
  const auto* E = find_slot(with.arena(), "embedding");
  const float* sink = with.arena().values() + E->offset + std::size_t(m.vocab_size) * m.d_model;
  double norm = 0;
  for (int c = 0; c < m.d_model; ++c) norm += std::abs(sink[c]);
  CHECK(norm > 0);  // drawn, not left at 0
}

namespace {

std::unique_ptr<TransformerLM<float>> tiny_sink_model(int layers) {
  ModelConfig m;
  m.d_model = 16, m.n_layers = layers, m.n_heads = 2, m.d_inner = 32;
  m.init_std = 0.5;  // sharp attention: what is in view changes the loss
  m.sink_token = true;
  auto model = std::make_unique<TransformerLM<float>>(m, encoding_named("rope"), MemoryConfig{});
  model->init(11);
  return model;
}

}  // namespace

TEST_CASE("sink token, streaming: the stream is [SINK, tokens]; no eviction is one pass over it",
          "[sink_token][stream]") {
  const int T = 40;
  const auto tokens = random_tokens(T, 256, 3);
  auto owned = tiny_sink_model(2);
  TransformerLM<float>& model = *owned;
  // By definition: one forward pass over the whole stream (the model prepends the sink).
  model.forward(tokens.data(), tokens.data() + 1, nullptr, 1, T - 1, 0, false);
  std::vector<float> whole(model.token_loss().begin(), model.token_loss().end());
  for (const StreamPositions positions : {StreamPositions::cache, StreamPositions::text}) {
    const StreamResult sinks = evaluate_stream_cache(
        model, tokens, StreamMode::sinks,
        {.sinks = 1, .recent = T, .positions = positions, .first_target = 1});
    REQUIRE(sinks.tokens == T - 1);
    for (int t = 0; t < T - 1; ++t) CHECK(sinks.token_losses[t] == Approx(whole[t]).epsilon(1e-4));
  }
  const StreamResult dense = evaluate_stream_cache(
      model, tokens, StreamMode::dense, {.sinks = 1, .recent = 3, .first_target = 1,
                                         .dense_segment = 8});
  REQUIRE(dense.tokens == T - 1);
  for (int t = 0; t < T - 1; ++t) CHECK(dense.token_losses[t] == Approx(whole[t]).epsilon(1e-4));
  const StreamResult memory = evaluate_stream_cache(
      model, tokens, StreamMode::memory, {.sinks = 0, .recent = T, .first_target = 1,
                                          .dense_segment = 8});
  for (int t = 0; t < T - 1; ++t) CHECK(memory.token_losses[t] == Approx(whole[t]).epsilon(1e-4));
}

TEST_CASE("sink token, streaming (one layer): S = 1 keeps the sink and equals recomputing "
          "[SINK, last S + R tokens]; S = 0 evicts it", "[sink_token][stream]") {
  // One layer: the cached states are embeddings, so a cache step equals a fresh pass over what
  // it holds. Step of token t (stream entry u = t + 1): sinks mode with S = 1 holds the sink and
  // entries u-R..u-1, at cache positions 0..R+1. Recompute's window is [SINK, tokens t-R..t]
  // (S + R tokens and the sink: S + R + 1 keys) at positions 0..R+1: the same keys.
  const int S = 1, R = 6, T = 40;
  const auto tokens = random_tokens(T, 256, 17);
  auto owned = tiny_sink_model(1);
  TransformerLM<float>& one = *owned;
  const StreamOptions o{.sinks = S, .recent = R, .positions = StreamPositions::cache, .batch = 4};
  const StreamResult sinks = evaluate_stream_cache(one, tokens, StreamMode::sinks, o);
  const StreamResult recompute = evaluate_stream_cache(one, tokens, StreamMode::recompute, o);
  const StreamResult window = evaluate_stream_cache(one, tokens, StreamMode::window, o);
  REQUIRE(sinks.first_target == S + R + 1);
  REQUIRE(recompute.first_target == S + R + 1);
  REQUIRE(sinks.tokens == T - (S + R + 1));
  REQUIRE(recompute.tokens == sinks.tokens);
  REQUIRE(window.tokens == sinks.tokens);
  double largest = 0;
  for (long k = 0; k < sinks.tokens; ++k) {
    CHECK(sinks.token_losses[k] == Approx(recompute.token_losses[k]).epsilon(1e-5));
    largest = std::max(largest, std::abs(double(window.token_losses[k]) - sinks.token_losses[k]));
  }
  CHECK(largest > 1e-3);  // the window (S = 0) lost the sink: the comparison can fail

  // The same step computed by hand for the last target: a fresh pass over [SINK, t-R..t].
  const int t = T - 2;
  std::vector<std::int32_t> in(tokens.begin() + (t - R), tokens.begin() + t + 1);  // R + 1 tokens
  std::vector<std::int32_t> target(tokens.begin() + (t - R + 1), tokens.begin() + t + 2);
  std::vector<std::int64_t> pos(R + 2);  // the sink, then the R + 1 tokens
  std::iota(pos.begin(), pos.end(), std::int64_t(0));
  one.reset_memory();
  one.forward(in.data(), target.data(), nullptr, 1, R + 1, 0, false, pos.data());
  CHECK(sinks.token_losses.back() == Approx(one.token_loss()(R)).epsilon(1e-5));
}

TEST_CASE("sink token: the sink diagnostic reads key 0 = the sink, queries shifted by one",
          "[sink_token][sinks]") {
  auto owned = tiny_sink_model(2);
  TransformerLM<float>& model = *owned;
  const int W = 3, L = 8;
  const auto tokens = random_tokens(W * L, 256, 23);
  const SinkDiagnostic d =
      attention_sink_diagnostic(model, tokens, {.window = L, .windows = W, .batch = 2});
  // By hand: window w read as [SINK, window], query i of the window is column i + 1.
  std::vector<std::vector<double>> expected(2 * 2, std::vector<double>(L, 0.0));
  for (int w = 0; w < W; ++w) {
    model.reset_memory();
    model.forward(tokens.data() + w * L, tokens.data() + w * L, nullptr, 1, L, 0, false);
    for (int n = 0; n < 2; ++n)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < L; ++i)
          expected[n * 2 + h][i] += model.block(n).attn.probs()(0, h, i + 1, 0) / W;
  }
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < L; ++i)
        CHECK(d.profile[n][h][i] == Approx(expected[n * 2 + h][i]).epsilon(1e-5));
  for (int i = 0; i < L; ++i) CHECK(d.uniform[i] == Approx(1.0 / (i + 2)));  // i + 2 keys
}

TEST_CASE("sink token: bad combinations are refused, naming the key", "[sink_token][config]") {
  const std::string head = "[model]\nsink_token = true\n";
  CHECK(config_error(head) == "no error");
  const Config c = config_from_string(head, "t.toml", registered_choices());
  CHECK(c.model.sink_token);  // and it survives the round trip through config_to_toml
  CHECK(config_from_string(config_to_toml(c), "u.toml", registered_choices()).model.sink_token);
  CHECK_THAT(config_error(head + "[memory]\nmem_len = 8\n"),
             Catch::Contains("t.toml:4: memory.mem_len") &&
                 Catch::Contains("model.sink_token = true"));
  CHECK_THAT(config_error(head + "[eval]\nmem_len = 8\n"),
             Catch::Contains("t.toml:4: eval.mem_len") && Catch::Contains("model.sink_token"));
  CHECK_THAT(config_error(head + "[eval]\nmemory_factors = [1]\n"),
             Catch::Contains("eval.memory_factors") && Catch::Contains("model.sink_token"));
  CHECK_THAT(config_error(head + "[train]\npose_target_len = 256\n"),
             Catch::Contains("train.pose_target_len") && Catch::Contains("model.sink_token"));
  CHECK_THAT(config_error(head + "[task]\nname = \"copy\"\n"),
             Catch::Contains("task.name") && Catch::Contains("model.sink_token"));
  // learned: the sink takes position 0, so L + 1 rows are needed
  CHECK_THAT(config_error(head + "[encoding]\ntype = \"learned\"\nmax_len = 64\n[train]\n"
                                 "seq_len = 64\n"),
             Catch::Contains("encoding.max_len (64) must be at least train.seq_len + 1 "
                             "(model.sink_token) (65)"));
  CHECK(config_error(head + "[encoding]\ntype = \"learned\"\nmax_len = 65\n[train]\nseq_len = "
                            "64\n") == "no error");
  CHECK_THAT(config_error(head + "[train]\nseq_len = 64\nrandomized_positions = true\n"
                                 "max_position = 64\n"),
             Catch::Contains("train.max_position (64) must be at least train.seq_len + "
                             "memory.mem_len + 1 (model.sink_token) (65)"));
}
