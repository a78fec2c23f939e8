// Loss by copy distance (eval/copy_distance.hpp) on planted sequences whose answer is known:
// which targets continue a repeated string, at which distance, and the per-bucket mean loss.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>

#include "core/rng.hpp"
#include "data/batch_source.hpp"
#include "data/corpus.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "eval/copy_distance.hpp"
#include "eval/chunked.hpp"

using namespace poslab;

namespace {

// n distinct bytes first, first+1, ...: no k-gram of it repeats.
std::vector<std::int32_t> distinct(int first, int n) {
  std::vector<std::int32_t> s(static_cast<std::size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return s;
}

std::vector<std::int32_t> concat(std::initializer_list<std::vector<std::int32_t>> parts) {
  std::vector<std::int32_t> s;
  for (const auto& p : parts) s.insert(s.end(), p.begin(), p.end());
  return s;
}

// One row from a string s[0..L]: inputs s[0..L-1], targets s[1..L].
struct DistanceRow {
  std::vector<std::int32_t> inputs, targets;
  int L = 0;
  explicit DistanceRow(const std::vector<std::int32_t>& s)
      : inputs(s.begin(), s.end() - 1), targets(s.begin() + 1, s.end()), L(int(s.size()) - 1) {}
  std::vector<CopyMatch> match(int k) const {
    return match_copies(inputs.data(), targets.data(), L, k);
  }
};

}  // namespace

TEST_CASE("copy distance: a block repeated after a filler is copied at the planted distance",
          "[copy_distance]") {
  // s = X F X: X = 16 distinct bytes, F = 20 others. s has 52 bytes; the second X starts at 36.
  const auto X = distinct(1, 16), F = distinct(50, 20);
  const DistanceRow row(concat({X, F, X}));
  REQUIRE(row.L == 51);
  const int k = 4;
  const auto m = row.match(k);
  // Target i predicts s[t], t = i + 1. The 4 bytes before t lie in the second X from t = 40 on;
  // they match X at the same offset, 36 bytes earlier: d = 36, and the continuation is right.
  for (int i = 0; i < row.L; ++i) {
    const int t = i + 1;
    INFO("target i = " << i);
    if (t >= 40) {
      CHECK(m[i].kind == CopyClass::copy);
      CHECK(m[i].distance == 36);
    } else {
      CHECK(m[i].kind == CopyClass::no_match);
    }
  }
  // k = 16: no target has 16 bytes of the second X before it (the last has 15 and F's last).
  for (const CopyMatch& c : row.match(16)) CHECK(c.kind == CopyClass::no_match);
  // k = 15: only the last target has 15 matching bytes before it.
  const auto m15 = row.match(15);
  for (int i = 0; i < row.L; ++i) CHECK((m15[i].kind == CopyClass::copy) == (i == row.L - 1));
}

TEST_CASE("copy distance: the most recent match is taken; a wrong continuation is a mismatch",
          "[copy_distance]") {
  // s = X F X G X' where X' is X with its last byte changed: the third copy matches the second
  // (|X| + |G| = 16 + 5 = 21 bytes back), not the first.
  const auto X = distinct(1, 16), F = distinct(50, 20), G = distinct(100, 5);
  auto Xchanged = X;
  Xchanged.back() = 200;
  const DistanceRow row(concat({X, F, X, G, Xchanged}));
  const int k = 4;
  const auto m = row.match(k);
  const int third = 16 + 20 + 16 + 5;  // where the third copy starts: 57
  int copies = 0;
  for (int i = 0; i < row.L; ++i) {
    const int t = i + 1;
    INFO("target i = " << i);
    if (t >= third + k && t < row.L) {
      CHECK(m[i].kind == CopyClass::copy);
      CHECK(m[i].distance == 21);
      ++copies;
    } else if (t == row.L) {  // 200 where the second copy continued with X's last byte
      CHECK(m[i].kind == CopyClass::mismatch);
      CHECK(m[i].distance == 21);
    } else if (t >= 36 + k && t < 52) {
      CHECK(m[i].kind == CopyClass::copy);  // the second copy, 36 back
      CHECK(m[i].distance == 36);
    } else if (t == 52) {  // G's first byte where the first copy continued with F's
      CHECK(m[i].kind == CopyClass::mismatch);
      CHECK(m[i].distance == 36);
    } else {
      CHECK(m[i].kind == CopyClass::no_match);
    }
  }
  CHECK(copies == 11);
}

TEST_CASE("copy distance: a run of one byte is copied at distance 1", "[copy_distance]") {
  const DistanceRow row(std::vector<std::int32_t>(10, 7));  // s = 7 7 7 7 7 7 7 7 7 7
  const auto m = row.match(2);
  // t = 1, 2: fewer than 2 bytes, or the only 2-gram has no earlier occurrence ending before t-1.
  CHECK(m[0].kind == CopyClass::no_match);
  CHECK(m[1].kind == CopyClass::no_match);
  for (int i = 2; i < row.L; ++i) {
    CHECK(m[i].kind == CopyClass::copy);
    CHECK(m[i].distance == 1);
  }
}

TEST_CASE("copy distance: buckets are powers of two and hold the mean loss of their bytes",
          "[copy_distance]") {
  CHECK(copy_distance_bucket(1) == 0);
  CHECK(copy_distance_bucket(2) == 1);
  CHECK(copy_distance_bucket(3) == 1);
  CHECK(copy_distance_bucket(4) == 2);
  CHECK(copy_distance_bucket(36) == 5);
  CHECK(copy_distance_bucket(63) == 5);
  CHECK(copy_distance_bucket(64) == 6);

  // The s = X F X row of the first case, with a fake model whose loss on target i is i.
  const auto X = distinct(1, 16), F = distinct(50, 20);
  const DistanceRow row(concat({X, F, X}));
  std::vector<float> loss(static_cast<std::size_t>(row.L));
  std::iota(loss.begin(), loss.end(), 0.0f);
  CopyDistanceLoss c(4, row.L);
  REQUIRE(c.bucket_loss.size() == 6);  // d <= 50: buckets [1,2) .. [32,64)
  c.add_row(row.inputs.data(), row.targets.data(), loss.data(), nullptr, row.L);
  for (int b = 0; b < 5; ++b) CHECK(c.bucket_tokens[b] == 0);
  CHECK(c.bucket_tokens[5] == 12);                       // targets i = 39 .. 50
  CHECK(c.bucket_loss[5] / c.bucket_tokens[5] == Approx(44.5));  // mean of 39 .. 50
  CHECK(c.no_match_tokens == 39);                        // targets i = 0 .. 38
  CHECK(c.no_match_loss / c.no_match_tokens == Approx(19.0));
  CHECK(c.mismatch_tokens == 0);

  // Weights: a target of weight 0 is not scored, as in evaluate().
  std::vector<float> weights(std::size_t(row.L), 1.0f);
  weights[50] = 0;  // the last copy byte
  weights[0] = 0;
  CopyDistanceLoss weighted(4, row.L);
  weighted.add_row(row.inputs.data(), row.targets.data(), loss.data(), weights.data(), row.L);
  CHECK(weighted.bucket_tokens[5] == 11);
  CHECK(weighted.bucket_loss[5] / weighted.bucket_tokens[5] == Approx(44.0));  // 39 .. 49
  CHECK(weighted.no_match_tokens == 38);
  CHECK(weighted.no_match_loss / weighted.no_match_tokens == Approx(19.5));  // 1 .. 38
}

TEST_CASE("copy distance in evaluate(): every scored token in one class, the loss recovered",
          "[copy_distance]") {
  // A tiny untrained model reading a stream with repeats: the classes' weighted losses add up
  // to the evaluation's loss and token count.
  ModelConfig m;
  m.d_model = 16, m.n_layers = 1, m.n_heads = 2, m.d_inner = 32;
  EncodingConfig e;
  e.type = "rope";
  e.options = Options::defaults(find_encoding("rope")->options);
  TransformerLM<float> model(m, e, MemoryConfig{});
  model.init(5);
  std::vector<std::int32_t> tokens;
  Rng rng(11);
  const auto block = distinct(1, 12);
  while (tokens.size() < 400) {  // random bytes with a planted block now and then
    if (rng.below(4) == 0) tokens.insert(tokens.end(), block.begin(), block.end());
    else tokens.push_back(std::int32_t(rng.below(m.vocab_size)));
  }
  const int L = 32, B = 2;
  StreamBatcher source(tokens, B, L);
  CopyDistanceLoss c(4, L);
  const EvalResult r = evaluate(model, source, 0, 0, false, false, nullptr, &c);
  double tokens_sum = c.mismatch_tokens + c.no_match_tokens, loss_sum = c.mismatch_loss + c.no_match_loss;
  for (std::size_t b = 0; b < c.bucket_loss.size(); ++b) {
    tokens_sum += c.bucket_tokens[b];
    loss_sum += c.bucket_loss[b];
  }
  CHECK(tokens_sum == double(r.tokens));
  CHECK(loss_sum / tokens_sum == Approx(r.loss).epsilon(1e-6));
  double copies = 0;
  for (double n : c.bucket_tokens) copies += n;
  CHECK(copies > 0);  // the planted blocks were found
}

TEST_CASE("copy distance: the worked example of docs/06", "[copy_distance]") {
  // s = "ab_cd=ab_cd!", k = 3: t = 9, 10 copy at d = 6; t = 11 ('!' where 'ab_cd' went on with
  // '=') is a mismatch at d = 6; t = 1 .. 8 have no match.
  const std::string text = "ab_cd=ab_cd!";
  const DistanceRow row(std::vector<std::int32_t>(text.begin(), text.end()));
  const auto m = row.match(3);
  for (int t = 1; t <= 8; ++t) CHECK(m[t - 1].kind == CopyClass::no_match);
  CHECK(m[8].kind == CopyClass::copy);
  CHECK(m[8].distance == 6);
  CHECK(m[9].kind == CopyClass::copy);
  CHECK(m[9].distance == 6);
  CHECK(m[10].kind == CopyClass::mismatch);
  CHECK(m[10].distance == 6);
}
