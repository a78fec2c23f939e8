// The whole-model property checks of the conformance kit (property_checks.hpp), proven: each
// check is run here on a test-only encoding with one bug planted, the bug the check exists to
// catch, and must fail on it with a message that says what went wrong. The kit
// (test_conformance.cpp) calls the very same functions on every registered encoding.
//
// Every planted encoding wraps a real one (T5's bias, whose backward is right) and adds its bug
// in one hook; the wrapper without a bug passes every check, so each failure below is the
// bug's doing.
//
//   check                planted bug                                          caught by
//   causality            S_ij += q_i . k_{j+1} (the next key: a future one)   influence
//                        backward sends dS_ij into dk_{j+1}                   gradient
//   batch independence   S_ij of row b += q_i . k_j of row b+1                logits
//                        backward sends row b's dS into row b+1's dk          gradient
//   determinism          a global call counter in the scores                  two runs
//                        a score term that counts the threads                 1 vs 2 threads
//   checkpoint           learned slopes kept outside the parameter arena      logits
#include <catch2/catch.hpp>

#include <omp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "encoding_test_helpers.hpp"
#include "property_checks.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Contains;

namespace {

// Calls f(b, h, i, j) for every visible cell of a [B, H, L, K] score tensor.
template <class F>
void for_each_visible_cell(const AttentionGeometry& g, F&& f) {
  for (int b = 0; b < g.batch; ++b)
    for (int h = 0; h < g.n_heads; ++h)
      for (int i = 0; i < g.q_len; ++i)
        for (int j = g.first_visible(i); j <= g.last_visible(i); ++j) f(b, h, i, j);
}

// Where things are: q [B, L, H d_h], k [B, K, H d_h], S [B, H, L, K].
struct Layout {
  const AttentionGeometry& g;
  std::size_t q(int b, int i, int h) const {
    return (std::size_t(b) * g.q_len + i) * g.d_model() + std::size_t(h) * g.d_head;
  }
  std::size_t k(int b, int j, int h) const {
    return (std::size_t(b) * g.k_len + j) * g.d_model() + std::size_t(h) * g.d_head;
  }
  std::size_t s(int b, int h, int i, int j) const {
    return ((std::size_t(b) * g.n_heads + h) * g.q_len + i) * g.k_len + j;
  }
};

template <class T>
T head_dot(const T* a, const T* b, int d_head) {
  T s = 0;
  for (int c = 0; c < d_head; ++c) s += a[c] * b[c];
  return s;
}

// A registered encoding behind every hook: the planted bugs override one hook each.
template <class T>
class Wrapped : public Encoding<T> {
 public:
  Wrapped(std::unique_ptr<Encoding<T>> inner, const EncodingShape&) : inner_(std::move(inner)) {}
  void init(ParameterArena<T>& arena, Rng& rng) override { inner_->init(arena, rng); }
  T score_scale(int d_head) const override { return inner_->score_scale(d_head); }
  bool has_content_term() const override { return inner_->has_content_term(); }
  void embed_forward(const AttentionGeometry& g, T* x) override { inner_->embed_forward(g, x); }
  void embed_backward(const AttentionGeometry& g, const T* dx) override {
    inner_->embed_backward(g, dx);
  }
  bool has_qk_transform() const override { return inner_->has_qk_transform(); }
  void qk_forward(int layer, const AttentionGeometry& g, T* q, T* k) override {
    inner_->qk_forward(layer, g, q, k);
  }
  void qk_backward(int layer, const AttentionGeometry& g, T* dq, T* dk) override {
    inner_->qk_backward(layer, g, dq, dk);
  }
  bool has_score_terms() const override { return true; }
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* scores) override {
    inner_->scores_forward(layer, g, q, k, scale, scores);
  }
  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dscores, T* dq, T* dk) override {
    inner_->scores_backward(layer, g, q, k, scale, dscores, dq, dk);
  }
  bool has_value_terms() const override { return inner_->has_value_terms(); }
  void values_forward(int layer, const AttentionGeometry& g, const T* probs, T* ctx) override {
    inner_->values_forward(layer, g, probs, ctx);
  }
  void values_backward(int layer, const AttentionGeometry& g, const T* probs, const T* dctx,
                       T* dprobs) override {
    inner_->values_backward(layer, g, probs, dctx, dprobs);
  }

 protected:
  std::unique_ptr<Encoding<T>> inner_;
};

// Two planted leaks, each with a forward and a backward version: a score cell (b, i, j) that
// reads another key than k[b]_j, named by key_of(b, j) -> {b', j'} ({-1, -1}: none).
struct KeyCell {
  int b, j;
};

// Forward: S[b]_ij += scale * q[b]_i . k[b']_j'.
template <class T, class KeyOf>
void add_scores_of_other_keys(const AttentionGeometry& g, const T* q, const T* k, T scale, T* S,
                              KeyOf key_of) {
  const Layout at{g};
  for_each_visible_cell(g, [&](int b, int h, int i, int j) {
    const KeyCell o = key_of(b, j);
    if (o.b >= 0) S[at.s(b, h, i, j)] += scale * head_dot(q + at.q(b, i, h), k + at.k(o.b, o.j, h),
                                                          g.d_head);
  });
}

// Backward only (a wrong backward of a right forward): dk[b']_j' += scale * dS[b]_ij q[b]_i.
template <class T, class KeyOf>
void send_score_gradients_to_other_keys(const AttentionGeometry& g, const T* q, T scale,
                                        const T* dS, T* dk, KeyOf key_of) {
  const Layout at{g};
  for_each_visible_cell(g, [&](int b, int h, int i, int j) {
    const KeyCell o = key_of(b, j);
    if (o.b < 0) return;
    for (int c = 0; c < g.d_head; ++c)
      dk[at.k(o.b, o.j, h) + c] += scale * dS[at.s(b, h, i, j)] * q[at.q(b, i, h) + c];
  });
}

// Causality: the next key, j + 1. For the last key query i sees (j = i + M) it is position
// i + 1, in the query's future.
inline KeyCell next_key(const AttentionGeometry& g, int b, int j) {
  return j + 1 < g.k_len ? KeyCell{b, j + 1} : KeyCell{-1, -1};
}
// Batch independence: the same key of the next batch row, b + 1 (mod B).
inline KeyCell next_row(const AttentionGeometry& g, int b, int j) {
  return KeyCell{(b + 1) % g.batch, j};
}

template <class T>
struct FutureKeyInScores : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* S) override {
    Wrapped<T>::scores_forward(layer, g, q, k, scale, S);
    add_scores_of_other_keys(g, q, k, scale, S, [&](int b, int j) { return next_key(g, b, j); });
  }
};

template <class T>
struct FutureGradientInBackward : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dS, T* dq, T* dk) override {
    Wrapped<T>::scores_backward(layer, g, q, k, scale, dS, dq, dk);
    send_score_gradients_to_other_keys(g, q, scale, dS, dk,
                                       [&](int b, int j) { return next_key(g, b, j); });
  }
};

template <class T>
struct BatchMixInScores : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* S) override {
    Wrapped<T>::scores_forward(layer, g, q, k, scale, S);
    add_scores_of_other_keys(g, q, k, scale, S, [&](int b, int j) { return next_row(g, b, j); });
  }
};

template <class T>
struct BatchMixInBackward : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  void scores_backward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dS, T* dq, T* dk) override {
    Wrapped<T>::scores_backward(layer, g, q, k, scale, dS, dq, dk);
    send_score_gradients_to_other_keys(g, q, scale, dS, dk,
                                       [&](int b, int j) { return next_row(g, b, j); });
  }
};

// Determinism, across runs: hidden global state, a counter of every scores_forward call made
// by any instance, S_ij += 0.01 * calls * (j mod 2) (a constant would cancel in the softmax).
template <class T>
struct GlobalCounterInScores : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  static inline int calls = 0;
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* S) override {
    Wrapped<T>::scores_forward(layer, g, q, k, scale, S);
    ++calls;
    const Layout at{g};
    for_each_visible_cell(g, [&](int b, int h, int i, int j) {
      S[at.s(b, h, i, j)] += T(0.01) * T(calls) * T(j % 2);
    });
  }
};

// Determinism, across thread counts: S_ij += 0.01 * threads * (j mod 2), a result that depends
// on the thread count beyond rounding (as a race or a per-thread table would).
template <class T>
struct ThreadCountInScores : Wrapped<T> {
  using Wrapped<T>::Wrapped;
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* S) override {
    Wrapped<T>::scores_forward(layer, g, q, k, scale, S);
    const T threads = T(omp_get_max_threads());
    const Layout at{g};
    for_each_visible_cell(g, [&](int b, int h, int i, int j) {
      S[at.s(b, h, i, j)] += T(0.01) * threads * T(j % 2);
    });
  }
};

// Checkpoint: a learned slope per head, S_ij -= slope_h (i + M - j), kept in a member vector
// instead of the parameter arena, so no checkpoint holds it.
template <class T>
struct SlopesOutsideTheArena : Wrapped<T> {
  std::vector<T> slope;  // [H]
  SlopesOutsideTheArena(std::unique_ptr<Encoding<T>> inner, const EncodingShape& shape)
      : Wrapped<T>(std::move(inner), shape), slope(shape.n_heads) {}
  void init(ParameterArena<T>& arena, Rng& rng) override {
    Wrapped<T>::init(arena, rng);
    for (auto& s : slope) s = T(rng.normal(0.0, 0.3));
  }
  void scores_forward(int layer, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* S) override {
    Wrapped<T>::scores_forward(layer, g, q, k, scale, S);
    const Layout at{g};
    for_each_visible_cell(g, [&](int b, int h, int i, int j) {
      S[at.s(b, h, i, j)] -= slope[h] * T(i + g.mem_len - j);
    });
  }
};

// A whole model (the kit's) whose encoding is Bug<T> around T5's bias, at memory mem_len.
template <template <class> class Bug, class T = double>
ModelFactory<T> planted(int mem_len = 3) {
  MemoryConfig mem;
  mem.mem_len = mem_len;
  return model_factory<T>(
      tiny_model_config(false, false, "gelu"), mem,
      [](const EncodingShape& shape, ParameterArena<T>& arena) -> std::unique_ptr<Encoding<T>> {
        const EncodingInfo* info = find_encoding("t5_bias");
        auto inner = info->make<T>(Options::defaults(info->options), shape, arena);
        return std::make_unique<Bug<T>>(std::move(inner), shape);
      });
}

// REQUIREs the check to fail, with a violation that contains `what`.
void require_caught(const PropertyCheck& c, const std::string& what) {
  INFO("violation: " << c.violation);
  REQUIRE_FALSE(c.holds());
  CHECK_THAT(c.violation, Contains(what));
}

}  // namespace

TEST_CASE("conformance, planted bugs: the wrapper without a bug passes every property check",
          "[conformance][planted]") {
  for (int mem_len : {0, 3}) {
    CAPTURE(mem_len);
    require_property(check_causality(planted<Wrapped>(mem_len)));
    require_property(check_batch_independence(planted<Wrapped>(mem_len)));
    require_property(check_determinism(planted<Wrapped, float>(mem_len)));
    require_property(check_checkpoint_round_trip(planted<Wrapped, float>(mem_len)));
  }
}

TEST_CASE("conformance, planted bugs: causality catches a future key in the scores and a gradient sent to "
          "the future",
          "[conformance][planted]") {
  for (int mem_len : {0, 3}) {
    CAPTURE(mem_len);
    require_caught(check_causality(planted<FutureKeyInScores>(mem_len)),
                   "influence of the future: the logits at position");
    require_caught(check_causality(planted<FutureGradientInBackward>(mem_len)),
                   "gradient from the future: d loss(positions <=");
  }
}

TEST_CASE("conformance, planted bugs: batch independence catches rows mixed in the scores and in the "
          "backward pass",
          "[conformance][planted]") {
  require_caught(check_batch_independence(planted<BatchMixInScores>()), "the logits of row");
  require_caught(check_batch_independence(planted<BatchMixInBackward>()),
                 "the gradient of a loss without row");
}

TEST_CASE("conformance, planted bugs: determinism catches a global counter and a thread-count dependence",
          "[conformance][planted]") {
  require_caught(check_determinism(planted<GlobalCounterInScores, float>()),
                 "two runs of the same model on the same inputs differ");
  require_caught(check_determinism(planted<ThreadCountInScores, float>()),
                 "the thread count changes the result beyond rounding");
}

TEST_CASE("conformance, planted bugs: the checkpoint round trip catches a parameter outside the arena",
          "[conformance][planted]") {
  require_caught(check_checkpoint_round_trip(planted<SlopesOutsideTheArena, float>()),
                 "the model holds state the checkpoint does not");
}
