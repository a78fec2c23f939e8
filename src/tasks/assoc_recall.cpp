// assoc_recall (associative recall): read key-value pairs, then give the value of one key.
//
//   ^ k1 v1 k2 v2 ... kn vn | kq vq       answer: vq, the value paired with kq     size n >= 1
//   e.g. "^a3Q7c0|Q7"       (key_len 1)    keys distinct, values digits
//        "^ab3Qc7ca0|Qc7"   (key_len 2)    length (n + 1)(key_len + 1) + 2
//                                          (= 2n + 4 for key_len 1)
//
// A key is a string of key_len letters (each one of the first `keys` of a..z A..Z); the n keys
// of an instance are distinct; values are digits (the first `values` of 0..9), uniform; the
// query kq is one of the n keys. The answer depends on WHAT was paired with kq, not on where: a
// model solves it by content-based lookup (find kq, read the token after it), which is
// position-independent except for the "next token" step. Position encodings that distort
// attention at unseen distances (absolute, rotary at long range) hurt it; NoPE-like and relative
// ones should not (Kazemnejad et al. 2023 for the general pattern; Zoology, Arora et al. 2023, for
// recall as the core skill of language models).
//
// Why key_len: distinct keys bound the size, n <= K = keys^key_len. With single letters
// (key_len 1, the default) K <= 52, so the longest instance has 2 * 52 + 4 = 108 tokens: with
// train.seq_len = 32, length factors 4x and 8x would test the very same sizes, and beyond 108
// tokens there is nothing to test at all. Keys of 2 letters give K = 52^2 = 2704 pairs (8,117
// tokens): a real length axis. Evaluating at a length where every instance already fits in the
// training length is an error (there is nothing unseen to test).
//
// Drawing n distinct keys out of K: a partial Fisher-Yates shuffle of the key numbers 0..K-1,
// whose first n entries are the keys; the swaps are undone afterwards, so the pool is in order
// again for the next instance (an instance depends only on the Rng) at a cost of O(n), not O(K).
// Key number i is written as its key_len digits in base `keys`, most significant first, each
// digit a letter: for key_len 1 that is symbol(i), exactly the keys of before key_len existed.
#include <algorithm>
#include <numeric>

#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

// The most pairs an instance can have whatever K is: 2^16 pairs take over 131k tokens, longer
// than any segment poslab attends over; the cap keeps the list of sizes bounded.
constexpr int kMaxPairs = 1 << 16;

class AssocRecall : public InstanceGenerator {
 public:
  explicit AssocRecall(const Options& o)
      : keys_(int(o.get_int("keys"))),
        key_len_(int(o.get_int("key_len"))),
        values_(int(o.get_int("values"))) {
    std::int64_t distinct = 1;  // K = keys^key_len
    for (int j = 0; j < key_len_; ++j) distinct *= keys_;
    pool_.resize(distinct);
    std::iota(pool_.begin(), pool_.end(), 0);
  }
  std::string name() const override { return "assoc_recall"; }
  int min_size() const override { return 1; }
  int max_size() const override { return int(std::min<std::size_t>(pool_.size(), kMaxPairs)); }
  // BOS, n pairs and the query pair of key_len + 1 tokens each, SEP.
  int length(int n) const override { return (n + 1) * (key_len_ + 1) + 2; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    // n distinct keys: pool_[0..n) after n steps of a partial Fisher-Yates shuffle.
    const int K = int(pool_.size());
    swaps_.resize(n);
    for (int k = 0; k < n; ++k) {
      swaps_[k] = k + int(rng.below(K - k));
      std::swap(pool_[k], pool_[swaps_[k]]);
    }

    const int pair = key_len_ + 1;                 // tokens per key-value pair
    t[0] = kBos;
    for (int k = 0; k < n; ++k) {
      std::int32_t* p = t + 1 + k * pair;          // [pair] = key_len letters, one digit
      write_key(pool_[k], p);
      p[key_len_] = '0' + std::int32_t(rng.below(values_));
    }
    const int q = int(rng.below(n));
    std::int32_t* query = t + 1 + n * pair;        // SEP, then the queried pair again
    query[0] = kSep;
    std::copy(t + 1 + q * pair, t + 1 + (q + 1) * pair, query + 1);
    answer[n * pair + 1 + pair] = 1;               // its value (the last token) is the answer

    for (int k = n - 1; k >= 0; --k) std::swap(pool_[k], pool_[swaps_[k]]);  // pool in order
  }

 private:
  // Key number i as key_len letters: its digits in base `keys`, most significant first.
  void write_key(int i, std::int32_t* out) const {
    for (int j = key_len_ - 1; j >= 0; --j) {
      out[j] = symbol(i % keys_);
      i /= keys_;
    }
  }

  int keys_, key_len_, values_;
  std::vector<int> pool_;   // [K] the key numbers, in order between instances
  std::vector<int> swaps_;  // [n] the Fisher-Yates swaps of the current instance, to undo them
};

}  // namespace

TaskInfo assoc_recall_task_info() {
  return {"assoc_recall",
          "recall the value of a queried key among key-value pairs (lookup by content)",
          "^ k1 v1 .. kn vn | kq vq   (keys distinct strings of key_len letters, values digits; "
          "answer: vq)",
          {{"keys", std::int64_t(kLetterCount),
            "number of key letters, taken from a..z A..Z; keys in an instance are distinct, so "
            "keys^key_len is also the largest number of pairs",
            1, kLetterCount},
           {"key_len", std::int64_t(1),
            "letters per key (1 = single-letter keys, at most 52 pairs; 2 = up to 2704 pairs, a "
            "real length axis)",
            1, 3},
           {"values", std::int64_t(10), "number of value symbols, taken from 0..9", 2, 10}},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<AssocRecall>(o), s);
          }};
}

}  // namespace poslab
