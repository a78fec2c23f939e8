// assoc_recall (associative recall): read key-value pairs, then give the value of one key.
//
//   ^ k1 v1 k2 v2 ... kn vn | kq vq       answer: vq, the value paired with kq     size n >= 1
//   e.g. "^a3Q7c0|Q7"                      keys distinct letters, values digits    length 2n + 4
//
// Keys are n distinct letters (the first `keys` of a..z A..Z), values digits (the first `values`
// of 0..9), both uniform; the query kq is one of the n keys. The answer depends on WHAT was paired
// with kq, not on where: a model solves it by content-based lookup (find kq, read the next token),
// which is position-independent except for the "next token" step. Position encodings that distort
// attention at unseen distances (absolute, rotary at long range) hurt it; NoPE-like and relative
// ones should not (Kazemnejad et al. 2023 for the general pattern; Zoology, Arora et al. 2023, for
// recall as the core skill of language models).
//
// Since keys are distinct, n <= keys <= 52: the longest instance has 2 * 52 + 4 = 108 tokens.
// Evaluating at a length where every instance already fits in the training length is an error
// (there is nothing unseen to test): with train.seq_len = 64, length factor 2 tests n = 31..52.
#include <numeric>

#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class AssocRecall : public InstanceGenerator {
 public:
  explicit AssocRecall(const Options& o)
      : keys_(int(o.get_int("keys"))), values_(int(o.get_int("values"))), pool_(keys_) {}
  std::string name() const override { return "assoc_recall"; }
  int min_size() const override { return 1; }
  int max_size() const override { return keys_; }  // keys are distinct
  int length(int n) const override { return 2 * n + 4; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    // n distinct keys: the first n entries of a partial Fisher-Yates shuffle of all the keys.
    // (pool_ starts in order every time, so an instance depends only on the Rng.)
    std::iota(pool_.begin(), pool_.end(), 0);
    for (int k = 0; k < n; ++k) std::swap(pool_[k], pool_[k + rng.below(keys_ - k)]);

    t[0] = kBos;
    for (int k = 0; k < n; ++k) {
      t[1 + 2 * k] = symbol(pool_[k]);                          // key: a letter
      t[2 + 2 * k] = '0' + std::int32_t(rng.below(values_));    // value: a digit
    }
    const int q = int(rng.below(n));
    t[2 * n + 1] = kSep;
    t[2 * n + 2] = t[1 + 2 * q];  // the query key
    t[2 * n + 3] = t[2 + 2 * q];  // its value: the answer
    answer[2 * n + 3] = 1;
  }

 private:
  int keys_, values_;
  std::vector<int> pool_;  // [keys] scratch for drawing distinct keys
};

}  // namespace

TaskInfo assoc_recall_task_info() {
  return {"assoc_recall",
          "recall the value of a queried key among key-value pairs (lookup by content)",
          "^ k1 v1 .. kn vn | kq vq   (keys distinct letters, values digits; answer: vq)",
          {{"keys", std::int64_t(kLetterCount),
            "number of key symbols, taken from a..z A..Z; keys in an instance are distinct, so "
            "this is also the largest number of pairs",
            1, kLetterCount},
           {"values", std::int64_t(10), "number of value symbols, taken from 0..9", 2, 10}},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<AssocRecall>(o), s);
          }};
}

}  // namespace poslab
