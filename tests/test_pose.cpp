// PoSE's draws and batches, checked against docs/conventions.md ("PoSE"), not against the code under test:
//   code  [dwzhu-pku/PoSE src/train_pose.py, train_preprocess_function_pose]: r1 ~ U[1, (L+1)//2]
//         (chunk 1 = ids[0:r1]); chunk 2 = the L - r1 tokens ending at r2 ~ U[L, len] with
//         len = 5 L here; positions 0..r1-1 and r1 + u .. L - 1 + u, u ~ U[0, L' - L]
//   paper (§3.2, N = 2): u_i ~ U{u_(i-1), ..., L' - L}, u_0 = 0; v_i ~ U{v_(i-1), ..., L_x - L_c}
// Python's random.randint(a, b) includes b; so do all the ranges above.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <vector>

#include "data/pose_batcher.hpp"
#include "data/pose_sampling.hpp"
#include "model/transformer.hpp"
#include "train/train.hpp"

using namespace poslab;

namespace {

// The counts of each value must be those of a uniform draw over {lo, ..., hi}: every value seen,
// none outside, each count within 6 standard deviations of n / (hi - lo + 1).
void require_uniform(const std::map<std::int64_t, int>& counts, std::int64_t lo, std::int64_t hi,
                     int n) {
  const double k = double(hi - lo + 1), p = 1.0 / k;
  const double expected = n * p, sd = std::sqrt(n * p * (1 - p));
  REQUIRE(counts.begin()->first == lo);
  REQUIRE(counts.rbegin()->first == hi);
  REQUIRE(std::int64_t(counts.size()) == hi - lo + 1);
  for (const auto& [value, count] : counts) {
    INFO("value " << value << ": " << count << " draws, " << expected << " expected");
    REQUIRE(std::abs(count - expected) < 6 * sd);
  }
}

}  // namespace

TEST_CASE("PoSE (code): two chunks, ids strictly increasing below L', chunk 1 from 0",
          "[pose]") {
  const int L = 64;
  const std::int64_t target = 256;
  Rng rng(3);
  std::vector<std::int64_t> ids(L);
  std::map<std::int64_t, int> r1_counts, u_counts;
  const int n = 20000;
  for (int draw = 0; draw < n; ++draw) {
    const PoseSkips s = sample_pose_skips(rng, L, target, PoseVariant::code);
    pose_position_ids(s, L, ids.data());
    ++r1_counts[s.chunk1_len];
    ++u_counts[s.skip2];
    REQUIRE(s.skip1 == 0);
    // Chunk 1 = 0 .. r1 - 1; chunk 2 = r1 + u .. L - 1 + u: lengths r1 + (L - r1) = L.
    for (int i = 0; i < s.chunk1_len; ++i) REQUIRE(ids[i] == i);
    for (int i = s.chunk1_len; i < L; ++i) REQUIRE(ids[i] == i + s.skip2);
    // Strictly increasing, with one jump only (of u + 1) where chunk 2 starts.
    int jumps = 0;
    for (int i = 1; i < L; ++i) {
      REQUIRE(ids[i] > ids[i - 1]);
      if (ids[i] - ids[i - 1] != 1) {
        ++jumps;
        REQUIRE(i == s.chunk1_len);
      }
    }
    REQUIRE(jumps == (s.skip2 > 0 ? 1 : 0));
    REQUIRE(ids[L - 1] < target);
  }
  // r1 ~ U[1, (L + 1) // 2] = U[1, 32]; u ~ U[0, L' - L] = U[0, 192] (REFERENCE: "u in [0, 192],
  // chunk 1 <= 32 tokens").
  require_uniform(r1_counts, 1, 32, n);
  require_uniform(u_counts, 0, 192, n);
}

TEST_CASE("PoSE (code): an odd L lets chunk 1 take (L + 1) // 2 tokens; L' = L never skips",
          "[pose]") {
  Rng rng(5);
  std::map<std::int64_t, int> r1_counts;
  for (int draw = 0; draw < 3000; ++draw) {
    const PoseSkips s = sample_pose_skips(rng, 5, 9, PoseVariant::code);
    ++r1_counts[s.chunk1_len];
    REQUIRE(s.skip2 <= 4);
  }
  require_uniform(r1_counts, 1, 3, 3000);  // (5 + 1) // 2 = 3
  for (int draw = 0; draw < 100; ++draw)
    REQUIRE(sample_pose_skips(rng, 8, 8, PoseVariant::code).skip2 == 0);
}

TEST_CASE("PoSE (code): chunk 2 is the L - r1 tokens that end at r2 ~ U[L, 5L]", "[pose]") {
  const int L = 16;
  const std::int64_t span = 5 * L;
  Rng rng(7);
  std::map<std::int64_t, int> r2_counts;
  const int n = 40000;
  for (int draw = 0; draw < n; ++draw) {
    const PoseContent c = sample_pose_content(rng, L, span, PoseVariant::code);
    REQUIRE(c.offset1 == 0);           // chunk 1 = window[0 : r1]
    ++r2_counts[c.offset2 + L];        // chunk 2 = window[v2 + r1 : v2 + L] ends at v2 + L = r2
  }
  require_uniform(r2_counts, L, span, n);
}

TEST_CASE("PoSE (paper): any division, u1 <= u2 and v1 <= v2 drawn one after the other",
          "[pose]") {
  const int L = 32;
  const std::int64_t target = 96, m = target - L;  // skips in [0, 64]
  Rng rng(11);
  std::vector<std::int64_t> ids(L);
  std::map<std::int64_t, int> r1_counts, u1_counts;
  double sum_u2 = 0;
  const int n = 40000;
  for (int draw = 0; draw < n; ++draw) {
    const PoseSkips s = sample_pose_skips(rng, L, target, PoseVariant::paper);
    pose_position_ids(s, L, ids.data());
    ++r1_counts[s.chunk1_len];
    ++u1_counts[s.skip1];
    sum_u2 += double(s.skip2);
    REQUIRE(s.skip1 <= s.skip2);
    REQUIRE(ids[0] == s.skip1);  // chunk 1 moved too
    for (int i = 1; i < L; ++i) REQUIRE(ids[i] > ids[i - 1]);
    REQUIRE(ids[L - 1] < target);
  }
  require_uniform(r1_counts, 1, L - 1, n);  // two non-empty chunks
  require_uniform(u1_counts, 0, m, n);
  // u2 | u1 ~ U{u1, ..., m}: E[u2] = E[(u1 + m) / 2] = (m / 2 + m) / 2 = 3m / 4 = 48. The mean
  // of n draws has a standard deviation below m / sqrt(n) = 0.32.
  REQUIRE(std::abs(sum_u2 / n - 0.75 * double(m)) < 1.5);

  Rng content_rng(13);
  const std::int64_t span = 5 * L;  // v in [0, span - L] = [0, 128]
  std::map<std::int64_t, int> v1_counts;
  double sum_v2 = 0;
  for (int draw = 0; draw < n; ++draw) {
    const PoseContent c = sample_pose_content(content_rng, L, span, PoseVariant::paper);
    ++v1_counts[c.offset1];
    sum_v2 += double(c.offset2);
    REQUIRE(c.offset1 <= c.offset2);
    REQUIRE(c.offset2 <= span - L);
  }
  require_uniform(v1_counts, 0, span - L, n);
  REQUIRE(std::abs(sum_v2 / n - 0.75 * double(span - L)) < 2.5);
}

TEST_CASE("PoSE draws are reproducible from the seed", "[pose]") {
  for (PoseVariant v : {PoseVariant::code, PoseVariant::paper}) {
    Rng a(42), b(42), c(43);
    int differ = 0;
    for (int draw = 0; draw < 50; ++draw) {
      const PoseSkips x = sample_pose_skips(a, 64, 256, v), y = sample_pose_skips(b, 64, 256, v),
                      z = sample_pose_skips(c, 64, 256, v);
      REQUIRE((x.chunk1_len == y.chunk1_len && x.skip1 == y.skip1 && x.skip2 == y.skip2));
      differ += x.chunk1_len != z.chunk1_len || x.skip2 != z.skip2;
    }
    REQUIRE(differ > 40);  // another seed, other draws
  }
  REQUIRE(pose_variant_from_name("code") == PoseVariant::code);
  REQUIRE(pose_variant_from_name("paper") == PoseVariant::paper);
  REQUIRE_THROWS_WITH(pose_variant_from_name("Code"), Catch::Contains("train.pose_variant"));
  Rng rng(1);
  REQUIRE_THROWS(sample_pose_skips(rng, 64, 63, PoseVariant::code));  // L' < L
  REQUIRE_THROWS(sample_pose_skips(rng, 1, 8, PoseVariant::code));    // one token: no chunks
}

TEST_CASE("PoseBatcher: each row's chunks read the window of its stream, targets the next token",
          "[pose]") {
  // Token value = its index in the corpus, so a row tells where each of its tokens came from.
  const int B = 3, L = 8;
  const std::int64_t target = 40;
  auto tokens = std::make_shared<std::vector<std::int32_t>>(1000);
  std::iota(tokens->begin(), tokens->end(), 0);
  for (PoseVariant variant : {PoseVariant::code, PoseVariant::paper}) {
    PoseBatcher batcher(tokens, B, L, target, variant, 99);
    const std::int64_t S = 1000 / B, span = 5 * L;
    REQUIRE(batcher.span() == span);
    REQUIRE(batcher.batches_per_pass() == (S - 1 - span) / L + 1);
    Batch batch;
    for (std::int64_t t = 0; t < batcher.batches_per_pass() + 2; ++t) {
      batcher.next(batch);
      const std::int64_t start = (t % batcher.batches_per_pass()) * L;
      REQUIRE(batch.start == start);
      REQUIRE(batch.first_of_pass == (start == 0));
      const PoseSkips& s = batcher.last_skips();
      REQUIRE(batch.positions.size() == std::size_t(L));
      for (int i = 0; i < L; ++i)
        REQUIRE(batch.positions[i] == i + (i < s.chunk1_len ? s.skip1 : s.skip2));
      for (int b = 0; b < B; ++b) {
        const PoseContent c = batcher.last_contents()[b];
        const std::int64_t window = b * S + start;
        for (int i = 0; i < L; ++i) {
          const std::int64_t at = window + (i < s.chunk1_len ? c.offset1 : c.offset2) + i;
          REQUIRE(batch.inputs[b * L + i] == at);
          REQUIRE(batch.targets[b * L + i] == at + 1);  // the text's next token
          REQUIRE(at + 1 <= window + span);             // inside the window (and stream b)
        }
      }
    }
  }
  // Same seed, same batches; too small a corpus is refused.
  PoseBatcher a(tokens, B, L, target, PoseVariant::code, 5),
      b(tokens, B, L, target, PoseVariant::code, 5);
  Batch x, y;
  for (int t = 0; t < 10; ++t) {
    a.next(x);
    b.next(y);
    REQUIRE(x.inputs == y.inputs);
    REQUIRE(x.positions == y.positions);
  }
  auto few = std::make_shared<std::vector<std::int32_t>>(std::size_t(B) * 5 * L);  // no +1
  REQUIRE_THROWS_WITH(PoseBatcher(few, B, L, target, PoseVariant::code, 1),
                      Catch::Contains("train.pose_target_len"));
}

namespace {
// The batches of another source with their positions dropped: the same rows at 0..L-1.
class WithoutPositions : public BatchSource {
 public:
  explicit WithoutPositions(BatchSource& inner) : inner_(inner) {}
  bool next(Batch& out) override {
    inner_.next(out);
    out.positions.clear();
    return true;
  }
  void reset() override { inner_.reset(); }
  std::int64_t batches_per_pass() const override { return inner_.batches_per_pass(); }
  int batch() const override { return inner_.batch(); }
  int len() const override { return inner_.len(); }

 private:
  BatchSource& inner_;
};

std::vector<float> trained_values(const std::string& encoding, bool keep_positions) {
  Config c;
  c.model.d_model = 16;
  c.model.n_layers = 1;
  c.model.n_heads = 2;
  c.model.d_inner = 32;
  c.encoding.type = encoding;
  c.train.seq_len = 8;
  c.train.batch_size = 2;
  c.train.steps = 3;
  c.train.threads = 1;
  c.train.pose_target_len = 64;
  auto tokens = std::make_shared<std::vector<std::int32_t>>(2000);
  for (std::size_t i = 0; i < tokens->size(); ++i) (*tokens)[i] = std::int32_t(i * 7 % 251);
  PoseBatcher pose(tokens, 2, 8, 64, PoseVariant::code, 3);
  WithoutPositions plain(pose);
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(1);
  std::ostringstream quiet;
  train_model(model, c, keep_positions ? static_cast<BatchSource&>(pose) : plain, nullptr,
              nullptr, quiet);
  return {model.arena().values(), model.arena().values() + model.arena().count()};
}
}  // namespace

TEST_CASE("the trainer hands PoSE's positions to the model", "[pose]") {
  set_threads(1);
  // rope reads them: the same rows at skipping positions train to other values ...
  REQUIRE(trained_values("rope", true) != trained_values("rope", false));
  // ... and an encoding without positions cannot tell (so the rows themselves are the same).
  REQUIRE(trained_values("none", true) == trained_values("none", false));
}
