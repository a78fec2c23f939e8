// The evaluation-only forward (nn/inference_scratch.hpp) against the training forward.
//
// 1. Unchunked (one chunk of all B rows and H heads, every setting whose scores fit the budget):
//    the very same calls in the same order, so logits and losses are bit-identical, in float.
// 2. In chunks of (batch rows, heads): the budget forces R = 1 row and Hc heads per chunk, and
//    the encodings get a geometry with batch = 1, head_begin = h0, head_count = Hc and pointers
//    offset to row b, so each (b, h) cell sees the same inputs; only the shapes of the
//    encodings' own BLAS calls change (e.g. Shaw's q a^K product over B L H rows instead of one
//    call per head), which can change the summation order inside BLAS. In double, that is a
//    rounding difference of a few ulps of the values summed (|x| < 100 here, d_h <= 8 and
//    K <= 24 terms), so 1e-10 on the logits is far above rounding and far below any indexing
//    mistake (a wrong head's parameters or scores move logits by O(0.1) with init_std 0.5).
//    Across several segments the memory carries it forward too.
//
// Every registered encoding runs, with its default options and with the options that select
// another code path (naive references, Shaw's per-head tables), with memory, with same_length,
// and with randomized positions (Transformer-XL's gather instead of the relative shift).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/rng.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"

using namespace poslab;

namespace {

constexpr int kHeads = 4, kBatch = 3, kSegment = 8, kSegments = 3, kMemory = 8;

struct InferenceSetting {
  std::string encoding;
  std::vector<std::pair<std::string, OptionValue>> options;
  int mem_len = kMemory;
  bool same_length = false;
  bool randomized_positions = false;

  std::string name() const {
    std::string s = encoding + " mem_len=" + std::to_string(mem_len);
    for (const auto& [k, v] : options) s += " " + k;
    if (same_length) s += " same_length";
    if (randomized_positions) s += " randomized_positions";
    return s;
  }
};

// (A unique_ptr: the layers and the encoding hold references into the model's arena.)
template <class T>
std::unique_ptr<TransformerLM<T>> make_model(const InferenceSetting& s) {
  ModelConfig m;
  m.d_model = 16, m.n_layers = 2, m.n_heads = kHeads, m.d_inner = 32, m.vocab_size = 32;
  m.init_std = 0.5;  // sharp attention: a wrong cell would show
  EncodingConfig e;
  e.type = s.encoding;
  e.options = Options::defaults(find_encoding(s.encoding)->options);
  // Tables of size, not the near-0 (or 0: example_distance_bias) start: a head's entries must
  // differ from another head's for a wrong head index to show.
  if (e.options.has("init_std")) e.options.set("init_std", 0.5);
  for (const auto& [k, v] : s.options) e.options.set(k, v);
  MemoryConfig memory;
  memory.mem_len = s.mem_len;
  memory.same_length = s.same_length;
  auto model = std::make_unique<TransformerLM<T>>(m, e, memory);
  model->init(5);
  // The same seed in every model: both sides of a comparison see the same positions.
  if (s.randomized_positions) model->enable_randomized_positions(11, 64);
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
    for (int i = 0; i < B * L; ++i)
      in[i] = std::int32_t(rng.below(32)), out[i] = std::int32_t(rng.below(32));
    model.forward(in.data(), out.data(), nullptr, B, L, 0, true);
    all.insert(all.end(), model.logits().begin(), model.logits().end());
  }
  return all;
}

// Options that switch an encoding to another implementation of its hooks: each is run as a
// setting of its own (if the encoding has it).
const std::vector<std::pair<std::string, OptionValue>> kPathOptions = {
    {"naive", true},     // Shaw, Transformer-XL, DeBERTa, FIRE: the pair-by-pair references
    {"per_head", true},  // Shaw: one table per head
};

// Every registered encoding, with memory; again with same_length and with randomized positions;
// and once more per option of kPathOptions it has.
std::vector<InferenceSetting> all_settings() {
  std::vector<InferenceSetting> settings;
  for (const EncodingInfo& info : registered_encodings()) {
    settings.push_back({info.name, {}});
    settings.push_back({info.name, {}, kMemory, /*same_length=*/true});
    settings.push_back({info.name, {}, kMemory, false, /*randomized_positions=*/true});
    for (const auto& option : kPathOptions)
      for (const OptionSpec& spec : info.options)
        if (spec.key == option.first) settings.push_back({info.name, {option}});
  }
  return settings;
}

// The largest difference between the logits of the training forward, whole batch, and of the
// evaluation-only forward with a score budget of `budget_bytes`, in double. `chunk` receives the
// shape [R, Hc] of the last chunk's score buffer.
double chunked_difference(const InferenceSetting& s, double budget_bytes,
                          std::array<std::size_t, 2>& chunk) {
  auto whole = make_model<double>(s);
  auto chunked = make_model<double>(s);
  chunked->set_inference_only(true);
  chunked->inference_scratch().score_budget_bytes = budget_bytes;
  const auto a = logits_of(*whole, kBatch, kSegment, kSegments);
  const auto b = logits_of(*chunked, kBatch, kSegment, kSegments);
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  const auto& scores = chunked->inference_scratch().scores;  // [R, Hc, L, K]
  chunk = {scores.shape(0), scores.shape(1)};
  return worst;
}

}  // namespace

TEST_CASE("the settings cover every registered encoding", "[inference]") {
  std::set<std::string> covered;
  for (const InferenceSetting& s : all_settings()) covered.insert(s.encoding);
  for (const EncodingInfo& info : registered_encodings()) CHECK(covered.count(info.name) == 1);
  CHECK(covered.size() == registered_encodings().size());
}

TEST_CASE("evaluation-only forward, one chunk: bit-identical to the training forward",
          "[inference]") {
  for (const auto& s : all_settings()) {
    INFO(s.name());
    auto train_path = make_model<float>(s);
    auto eval_path = make_model<float>(s);
    eval_path->set_inference_only(true);
    const auto a = logits_of(*train_path, kBatch, kSegment, kSegments);
    const auto b = logits_of(*eval_path, kBatch, kSegment, kSegments);
    REQUIRE(a.size() == b.size());
    long differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    CHECK(differ == 0);
    CHECK(eval_path->inference_scratch().scores.shape(0) == std::size_t(kBatch));  // one chunk
    CHECK(eval_path->inference_scratch().scores.shape(1) == std::size_t(kHeads));
    CHECK_THROWS_AS(eval_path->backward(), std::logic_error);
  }
}

TEST_CASE("the chunk of an inference pass: all of it, or one row and as many heads as fit",
          "[inference]") {
  const int B = 3, H = 4, L = 8, K = 16;
  const double one_head = double(L) * K * sizeof(double);  // bytes of one [L, K]
  auto chunk = [&](double budget) {
    const InferenceChunk c = inference_chunk(B, H, L, K, sizeof(double), budget);
    return std::pair{c.rows, c.heads};
  };
  CHECK(chunk(B * H * one_head) == std::pair{B, H});  // fits: the whole batch
  CHECK(chunk(B * H * one_head - 1) == std::pair{1, H});
  CHECK(chunk(3 * one_head) == std::pair{1, 3});
  CHECK(chunk(2 * one_head + 1) == std::pair{1, 2});
  CHECK(chunk(one_head) == std::pair{1, 1});
  CHECK(chunk(0) == std::pair{1, 1});  // at least one head, even over the budget
}

TEST_CASE("evaluation-only forward in chunks of (rows, heads): equal to the whole-batch forward",
          "[inference]") {
  // Bytes of one head's [L, K] scores at the full memory (K = M + L), in double.
  const double one_head = double(kSegment) * (kMemory + kSegment) * sizeof(double);
  struct Budget {
    double bytes;
    std::size_t heads;  // Hc of the last segment's chunks (K = M + L)
    const char* what;
  };
  const std::vector<Budget> budgets = {
      {0, 1, "one row, one head at a time"},
      {2 * one_head, 2, "one row, heads 0-1 then 2-3"},
      {3 * one_head, 3, "one row, heads 0-2 then 3 (a shorter last chunk)"},
  };
  for (const auto& s : all_settings())
    for (const Budget& budget : budgets) {
      INFO(s.name() << ", " << budget.what);
      std::array<std::size_t, 2> chunk{};
      const double worst = chunked_difference(s, budget.bytes, chunk);
      CHECK(worst <= 1e-10);
      CHECK(chunk[0] == 1);  // [1, Hc, L, K]
      CHECK(chunk[1] == budget.heads);
    }
}

TEST_CASE("backward hooks refuse a range of heads", "[inference]") {
  // A training step always covers all heads; a backward hook given part of them must not
  // quietly compute a partial gradient: it throws, or (a hook with nothing to do, like ALiBi's
  // inherited one: a constant bias) leaves every gradient at 0. Every encoding with a backward
  // score or value hook, on each of its code paths.
  const int L = 2, K = 2, H = 2, dh = 2;
  std::vector<std::int64_t> qp = {0, 1}, kp = {0, 1};
  AttentionGeometry g{1, L, 0, K, H, dh, 0, qp.data(), kp.data()};
  g.head_begin = 1, g.head_count = 1;
  std::vector<double> q(L * H * dh, 0.5), k(K * H * dh, 0.5), probs(H * L * K, 0.5),
      dscores(H * L * K, 0.5), dctx(q.size(), 0.5);
  int refused = 0;
  for (const InferenceSetting& s : all_settings()) {
    if (s.same_length || s.randomized_positions) continue;
    INFO(s.name());
    const EncodingInfo* info = find_encoding(s.encoding);
    Options options = Options::defaults(info->options);
    for (const auto& [key, value] : s.options) options.set(key, value);
    ParameterArena<double> arena;
    auto enc = info->make<double>(options, {H * dh, H, dh, 1}, arena);
    arena.allocate();
    std::vector<double> dq(q.size()), dk(k.size()), dprobs(probs.size());
    auto zero = [](const double* x, std::size_t n) {
      return std::all_of(x, x + n, [](double v) { return v == 0; });
    };
    auto refuses = [&](auto&& hook) {
      try {
        hook();
      } catch (const std::logic_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("all heads"));
        return true;
      }
      CHECK(zero(dq.data(), dq.size()));  // did nothing at all
      CHECK(zero(dk.data(), dk.size()));
      CHECK(zero(dprobs.data(), dprobs.size()));
      CHECK(zero(arena.grads(), arena.count()));
      return false;
    };
    if (enc->has_score_terms())
      refused += refuses([&] {
        enc->scores_backward(0, g, q.data(), k.data(), 1.0, dscores.data(), dq.data(), dk.data());
      });
    if (enc->has_value_terms())
      refused +=
          refuses([&] { enc->values_backward(0, g, probs.data(), dctx.data(), dprobs.data()); });
  }
  CHECK(refused > 0);
}
