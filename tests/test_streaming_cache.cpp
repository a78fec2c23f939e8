// The streaming cache (StreamingLLM, Xiao et al. 2023; eval/streaming_cache.hpp), checked
// against its definition, not against the code under test:
//
//   - token t attends to the sinks {0..S-1}, the recent {t-R..t-1} and itself;
//   - pos-shift ("cache" positions): keys at 0..M, the query at M (the paper's example: cache
//     [0,1,2,3,6,7,8] decoding token 9 uses positions 0..7); "text": their stream positions;
//   - a cache that never evicts is dense attention;
//   - window (S = 0) with cache positions = sliding window with recomputation where both see
//     the same states: always with one layer, and until the first eviction with more.
//
// With ONE layer the memory holds the layer's inputs (embeddings) of the cached tokens, which is
// exactly what a fresh forward pass over those tokens computes, so "the loss at step t" can be
// recomputed from scratch: a forward pass without memory over the attended tokens, at the
// positions the definition gives. Every case runs in well under a second (tiny models).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <numeric>

#include "config_test_helpers.hpp"
#include "core/rng.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "token_helpers.hpp"
#include "eval/streaming_cache.hpp"

using namespace poslab;
using poslab::testing::random_tokens;

namespace {

// On the heap: the layers hold references into the model's parameter arena, so it never moves.
std::unique_ptr<TransformerLM<float>> tiny_model(const std::string& encoding, int layers) {
  ModelConfig m;
  m.d_model = 16, m.n_layers = layers, m.n_heads = 2, m.d_inner = 32;
  m.init_std = 0.5;  // large weights: sharp attention, so that what is in view changes the loss
  EncodingConfig e;
  e.type = encoding;
  e.options = Options::defaults(find_encoding(encoding)->options);
  auto model = std::make_unique<TransformerLM<float>>(m, e, MemoryConfig{});
  model->init(11);
  return model;
}

// The loss of predicting tokens[ids.back() + 1] from a fresh pass (no memory) over tokens[ids]
// at `positions`: what a one-layer model computes at the step of token ids.back().
double fresh_loss(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                  const std::vector<int>& ids, const std::vector<std::int64_t>& positions) {
  std::vector<std::int32_t> in, target;
  for (int i : ids) in.push_back(tokens[i]);
  for (std::size_t k = 0; k + 1 < ids.size(); ++k) target.push_back(tokens[ids[k + 1]]);
  target.push_back(tokens[ids.back() + 1]);
  model.set_mem_len(0);
  model.reset_memory();
  model.forward(in.data(), target.data(), nullptr, 1, int(in.size()), 0, false, positions.data());
  return model.token_loss().data()[in.size() - 1];
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {  // [from, to)
  std::vector<std::int64_t> v(std::size_t(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

}  // namespace

TEST_CASE("streaming cache: the paper's example, S = 4, R = 3, decoding token 9", "[stream]") {
  // Tokens 0..9 are read (targets 1..10). At token 9 the cache holds [0,1,2,3,6,7,8]: the sinks
  // 0..3 and the R = 3 most recent. Pos-shift gives the 8 attended tokens positions 0..7 (query
  // at 7); text positions keep 0,1,2,3,6,7,8,9 (query at 9).
  const auto tokens = random_tokens(11, 256, 5);
  const auto model_owned = tiny_model("rope", 1);
  TransformerLM<float>& model = *model_owned;
  const StreamOptions cache{.sinks = 4, .recent = 3, .positions = StreamPositions::cache,
                            .first_target = 1};
  evaluate_stream_cache(model, tokens, StreamMode::sinks, cache);
  const AttentionGeometry& g = model.geometry();  // of the last step, token 9
  REQUIRE(g.k_len == 8);
  CHECK(std::vector<std::int64_t>(g.k_pos, g.k_pos + 8) == range(0, 8));
  CHECK(g.q_len == 1);
  CHECK(g.q_pos[0] == 7);

  StreamOptions text = cache;
  text.positions = StreamPositions::text;
  evaluate_stream_cache(model, tokens, StreamMode::sinks, text);
  REQUIRE(model.geometry().k_len == 8);
  CHECK(std::vector<std::int64_t>(model.geometry().k_pos, model.geometry().k_pos + 8) ==
        std::vector<std::int64_t>{0, 1, 2, 3, 6, 7, 8, 9});
  CHECK(model.geometry().q_pos[0] == 9);

  // Before the cache is full nothing is evicted: token 5 (stream of 7) sees 0..5 at 0..5.
  const std::vector<std::int32_t> shorter(tokens.begin(), tokens.begin() + 7);
  evaluate_stream_cache(model, shorter, StreamMode::sinks, text);
  CHECK(std::vector<std::int64_t>(model.geometry().k_pos, model.geometry().k_pos +
                                                              model.geometry().k_len) == range(0, 6));
  CHECK(model.geometry().q_pos[0] == 5);
  // The evaluation leaves the model as it found it.
  CHECK(model.mem_len() == 0);
  CHECK(model.memory_rows() == 0);
}

TEST_CASE("streaming cache: the cache holds the sinks and the recent tokens, every relative "
          "encoding (1 layer, from scratch)", "[stream]") {
  // S = 2, R = 3 over 14 tokens: the step of token t >= 6 attends to {0, 1, t-3, t-2, t-1, t}.
  const int S = 2, R = 3, T = 14;
  const auto tokens = random_tokens(T, 256, 9);
  int encodings = 0;
  for (const EncodingInfo& info : registered_encodings()) {
    if (info.family == EncodingFamily::absolute) continue;  // refused by the config
    ++encodings;
    INFO(info.name);
    const auto model_owned = tiny_model(info.name, 1);
    TransformerLM<float>& model = *model_owned;
    for (const StreamPositions positions : {StreamPositions::cache, StreamPositions::text}) {
      const StreamResult r = evaluate_stream_cache(
          model, tokens, StreamMode::sinks,
          {.sinks = S, .recent = R, .positions = positions, .first_target = 1});
      REQUIRE(r.tokens == T - 1);  // targets 1..13
      for (int t = S + R + 1; t + 1 < T; ++t) {
        const std::vector<int> ids = {0, 1, t - 3, t - 2, t - 1, t};
        const std::vector<std::int64_t> pos =
            positions == StreamPositions::cache
                ? range(0, 6)
                : std::vector<std::int64_t>{0, 1, t - 3, t - 2, t - 1, t};
        INFO("token " << t << (positions == StreamPositions::cache ? ", cache" : ", text"));
        CHECK(r.token_losses[std::size_t(t)] ==
              Approx(fresh_loss(model, tokens, ids, pos)).epsilon(1e-5));
      }
    }
  }
  CHECK(encodings >= 10);  // rope, alibi, t5, transformer_xl, xpos, none, ... all ran
}

TEST_CASE("streaming cache: a cache that never evicts is dense attention (2 layers)",
          "[stream]") {
  // Dense, by definition: one pass over the whole stream, every token in view.
  const int T = 40;
  const auto tokens = random_tokens(T, 256, 3);
  for (const std::string encoding : {"rope", "alibi", "transformer_xl"}) {
    INFO(encoding);
    const auto model_owned = tiny_model(encoding, 2);
    TransformerLM<float>& model = *model_owned;
    model.forward(tokens.data(), tokens.data() + 1, nullptr, 1, T - 1, 0, false);
    std::vector<float> whole(model.token_loss().begin(), model.token_loss().end());
    const double whole_mean = std::accumulate(whole.begin(), whole.end(), 0.0) / (T - 1);

    for (const StreamPositions positions : {StreamPositions::cache, StreamPositions::text}) {
      const StreamResult sinks = evaluate_stream_cache(
          model, tokens, StreamMode::sinks,
          {.sinks = 4, .recent = T, .positions = positions, .first_target = 1});
      CHECK(sinks.loss == Approx(whole_mean).epsilon(1e-5));
      for (int t = 0; t < T - 1; ++t) CHECK(sinks.token_losses[t] == Approx(whole[t]).epsilon(1e-4));
    }
    const StreamResult dense = evaluate_stream_cache(
        model, tokens, StreamMode::dense, {.sinks = 4, .recent = 3, .first_target = 1,
                                           .dense_segment = 8});
    CHECK(dense.tokens == T - 1);
    CHECK(dense.loss == Approx(whole_mean).epsilon(1e-5));
    // With eviction (S + R = 7 < 39) the loss must change: this comparison can fail.
    const StreamResult evicting = evaluate_stream_cache(
        model, tokens, StreamMode::sinks, {.sinks = 4, .recent = 3, .first_target = 1});
    CHECK(evicting.loss != Approx(whole_mean).epsilon(1e-3));
  }
}

TEST_CASE("streaming cache: window (S = 0, pos-shift) against the sliding window with "
          "recomputation", "[stream]") {
  // Recompute: token t is predicted by a fresh pass over tokens t-A+1..t at positions 0..A-1,
  // A = S + R + 1. Window with cache positions: keys t-R..t at positions 0..R. One layer: the
  // same keys and states, so the same loss. Two layers: the cached layer-2 inputs of token
  // t-R were computed from ITS context (t-2R..t-R), the window's from t-R alone; they agree at
  // the first scored target (nothing evicted yet) and differ after it.
  const int S = 2, R = 5, T = 30;
  const auto tokens = random_tokens(T, 256, 17);
  const StreamOptions o{.sinks = S, .recent = R, .positions = StreamPositions::cache, .batch = 4};
  for (const std::string encoding : {"rope", "alibi", "t5_bias"}) {
    INFO(encoding);
    const auto one_owned = tiny_model(encoding, 1);
    TransformerLM<float>& one = *one_owned;
    const StreamResult window = evaluate_stream_cache(one, tokens, StreamMode::window, o);
    const StreamResult recompute = evaluate_stream_cache(one, tokens, StreamMode::recompute, o);
    REQUIRE(window.first_target == S + R + 1);
    REQUIRE(recompute.first_target == S + R + 1);
    REQUIRE(window.tokens == T - (S + R + 1));
    REQUIRE(recompute.tokens == window.tokens);
    for (long k = 0; k < window.tokens; ++k)
      CHECK(window.token_losses[k] == Approx(recompute.token_losses[k]).epsilon(1e-5));

    const auto two_owned = tiny_model(encoding, 2);
    TransformerLM<float>& two = *two_owned;
    const StreamResult window2 = evaluate_stream_cache(two, tokens, StreamMode::window, o);
    const StreamResult recompute2 = evaluate_stream_cache(two, tokens, StreamMode::recompute, o);
    CHECK(window2.token_losses[0] == Approx(recompute2.token_losses[0]).epsilon(1e-5));
    double largest = 0;
    for (long k = 1; k < window2.tokens; ++k)
      largest = std::max(largest, std::abs(double(window2.token_losses[k]) -
                                           recompute2.token_losses[k]));
    CHECK(largest > 1e-3);
  }
}

TEST_CASE("streaming cache: the loss along the stream in buckets", "[stream]") {
  StreamResult r;
  r.first_target = 5;
  r.token_losses = {1, 2, 3, 4, 5, 6, 7};  // targets 5..11
  r.tokens = 7;
  const auto b = stream_buckets(r, 4);  // [4, 8): 5,6,7  [8, 12): 8..11
  REQUIRE(b.size() == 2);
  CHECK((b[0].low == 4 && b[0].high == 8 && b[0].tokens == 3));
  CHECK(b[0].loss == Approx(2.0));
  CHECK((b[1].low == 8 && b[1].high == 12 && b[1].tokens == 4));
  CHECK(b[1].loss == Approx(5.5));
}

TEST_CASE("streaming cache: bad keys are refused, naming the key, file and line", "[stream]") {
  using poslab::testing::config_error;
  const std::string head = "[train]\nseq_len = 16\n[eval]\n";
  // Absolute encodings: the position is in the cached state; refused with the reason.
  for (const std::string encoding : {"learned", "sinusoidal"}) {
    const std::string e = config_error("[encoding]\ntype = \"" + encoding + "\"\n" + head +
                                       "stream_length = 1600\n");
    CHECK_THAT(e, Catch::Contains("t.toml:6: eval.stream_length") &&
                      Catch::Contains("'" + encoding + "' is absolute") &&
                      Catch::Contains("exceed the trained range"));
  }
  CHECK(config_error("[encoding]\ntype = \"rope\"\n" + head + "stream_length = 1600\n") ==
        "no error");
  CHECK(config_error("[encoding]\ntype = \"none\"\n" + head + "stream_length = 1600\n") ==
        "no error");
  // S + R beyond the stream: the default R = 16 - 1 - 4 = 11, S + R + 1 = 16.
  CHECK_THAT(config_error(head + "stream_length = 16\n"),
             Catch::Contains("t.toml:4: eval.stream_sinks + eval.stream_recent = 4 + 11 reaches "
                             "beyond the stream (eval.stream_length = 16)"));
  CHECK(config_error(head + "stream_length = 17\n") == "no error");
  CHECK_THAT(config_error(head + "stream_length = 100\nstream_sinks = 15\n"),
             Catch::Contains("t.toml:5: eval.stream_recent = 0 means train.seq_len - 1 - "
                             "eval.stream_sinks = 0 recent tokens"));
  CHECK_THAT(config_error(head + "stream_recent = -1\n"),
             Catch::Contains("t.toml:4: eval.stream_recent") && Catch::Contains(">= 0"));
  CHECK_THAT(config_error(head + "stream_sinks = -2\n"), Catch::Contains("t.toml:4: eval.stream_sinks"));
  CHECK_THAT(config_error(head + "stream_positions = \"slots\"\n"),
             Catch::Contains("one of cache, text"));
  CHECK_THAT(config_error(head + "stream_length = 100\nstream_modes = []\n"),
             Catch::Contains("t.toml:5: eval.stream_modes is empty"));
  CHECK_THAT(config_error(head + "stream_modes = [\"sinks\", \"full\"]\n"),
             Catch::Contains("eval.stream_modes[1]"));
  // A mode named twice would write two equal rows, counted twice by a summary (issue 51).
  CHECK_THAT(config_error(head + "stream_length = 100\nstream_modes = [\"sinks\", \"window\", \"sinks\"]\n"),
             Catch::Contains("t.toml:5: eval.stream_modes names 'sinks' twice"));
}

TEST_CASE("streaming cache: memory mode is Transformer-XL's segment recurrence", "[stream]") {
  // Memory, by definition: segments of `dense_segment` tokens starting at t0 = 0, P, 2P, ...;
  // input token t of the segment at t0 attends to the M' = min(t0, M) tokens before t0 (the
  // memory, M = S + R) and to t0..t. One layer: a fresh pass over those tokens computes the same
  // loss. Segments of one token: every token sees the last M tokens and itself, which is the
  // window mode (S = 0) at text positions, with any number of layers.
  const int S = 2, R = 3, M = S + R, P = 6, T = 40;
  const auto tokens = random_tokens(T, 256, 23);
  for (const std::string encoding : {"rope", "alibi", "transformer_xl"}) {
    INFO(encoding);
    const auto one_owned = tiny_model(encoding, 1);
    TransformerLM<float>& one = *one_owned;
    const StreamResult memory = evaluate_stream_cache(
        one, tokens, StreamMode::memory, {.sinks = S, .recent = R, .dense_segment = P});
    REQUIRE(memory.first_target == M + 1);
    REQUIRE(memory.tokens == T - (M + 1));
    for (long k = 0; k < memory.tokens; ++k) {
      const int t = int(memory.first_target + k) - 1;  // the input predicting target t + 1
      const int t0 = t / P * P, from = t0 - std::min(t0, M);
      std::vector<int> ids(std::size_t(t - from + 1));
      std::iota(ids.begin(), ids.end(), from);
      INFO("target " << t + 1);
      CHECK(memory.token_losses[k] ==
            Approx(fresh_loss(one, tokens, ids, range(from, t + 1))).epsilon(1e-4));
    }

    const auto two_owned = tiny_model(encoding, 2);
    TransformerLM<float>& two = *two_owned;
    const StreamOptions by_token{.sinks = S, .recent = R, .positions = StreamPositions::text,
                                 .dense_segment = 1};
    const StreamResult memory1 = evaluate_stream_cache(two, tokens, StreamMode::memory, by_token);
    const StreamResult window = evaluate_stream_cache(two, tokens, StreamMode::window, by_token);
    REQUIRE(memory1.tokens == window.tokens);
    for (long k = 0; k < window.tokens; ++k)
      CHECK(memory1.token_losses[k] == Approx(window.token_losses[k]).epsilon(1e-5));
    // Longer segments see more: the loss must change (this comparison can fail).
    const StreamResult memory6 = evaluate_stream_cache(
        two, tokens, StreamMode::memory, {.sinks = S, .recent = R, .dense_segment = P});
    CHECK(memory6.loss != Approx(window.loss).epsilon(1e-3));
  }
}
