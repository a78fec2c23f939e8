// sort: read a random string, then write its symbols in sorted order.
//
//   ^ x1 x2 ... xn | y1 y2 ... yn          y = x sorted (ascending)          size n >= 1
//   e.g. "^dcab|abcd", "^baba|aabb"        answers: the y                   length 2n + 2
//
// The order is the order of the data symbols (tokens.hpp): a < b < ... < z < A < ... < Z < 0 <
// ... < 9; with the default alphabet of 16 ('a'..'p') it is simply alphabetical. The x are
// uniform, so symbols repeat (about n / alphabet times each).
//
// Why it tests position in a length-dependent way: unlike copy, no fixed offset links an answer
// to its source (the source of y_k can be anywhere in the question), and unlike a pure lookup the
// answer at a position depends on WHICH position it is. With c(s) the number of occurrences of
// symbol s in the question, the answer at offset k after the separator (k = 1..n) is
//
//   y_k = the smallest s with  c(s_1) + ... + c(s) >= k      (s_1 = the smallest symbol)
//
// so the model must know its exact offset k from the separator and compare it with counts over
// the whole question; both k and the counts grow with n. A model that locates itself by absolute
// position, or only within the distances seen in training, has to extrapolate exactly that.
// Kazemnejad et al. 2023 include sorting among their length-generalization tasks.
#include <algorithm>

#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class Sort : public InstanceGenerator {
 public:
  explicit Sort(const Options& o) : alphabet_(int(o.get_int("alphabet"))) {}
  std::string name() const override { return "sort"; }
  int min_size() const override { return 1; }
  int max_size() const override { return kNoSizeLimit; }
  int length(int n) const override { return 2 * n + 2; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    // Draw symbol numbers 0..alphabet-1 (their order is the sorting order), sort a copy of them.
    question_.resize(n);
    for (int k = 0; k < n; ++k) question_[k] = int(rng.below(alphabet_));
    sorted_ = question_;
    std::sort(sorted_.begin(), sorted_.end());

    t[0] = kBos;
    for (int k = 0; k < n; ++k) t[1 + k] = symbol(question_[k]);   // the question
    t[n + 1] = kSep;
    for (int k = 0; k < n; ++k) {                                  // the answer
      t[n + 2 + k] = symbol(sorted_[k]);
      answer[n + 2 + k] = 1;
    }
  }

 private:
  int alphabet_;
  std::vector<int> question_, sorted_;  // [n] scratch: symbol numbers
};

}  // namespace

TaskInfo sort_task_info() {
  return {"sort",
          "write a random string's symbols in sorted order (position depends on counts and "
          "length)",
          "^ x1..xn | sorted(x1..xn)   (answers: the sorted string; order a..z A..Z 0..9)",
          {alphabet_option()},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<Sort>(o), s);
          }};
}

}  // namespace poslab
