// reverse: read a random string, then write it backwards.
//
//   ^ x1 x2 ... xn | xn ... x2 x1          answers: the reversed string     size n >= 1
//   e.g. "^dcab|bacd"                        length 2n + 2
//
// Unlike copy, the distance to the source changes along the answer: the k-th answer (k = 1..n)
// is predicted at the input 2k - 1 positions after x_{n+1-k}. The model must find "the mirror
// position" of the separator, which a fixed relative offset cannot express. Ruoss et al. 2023
// list it among the tasks where encodings differ most on unseen lengths.
#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class Reverse : public InstanceGenerator {
 public:
  explicit Reverse(const Options& o) : alphabet_(int(o.get_int("alphabet"))) {}
  std::string name() const override { return "reverse"; }
  int min_size() const override { return 1; }
  int max_size() const override { return kNoSizeLimit; }
  int length(int n) const override { return 2 * n + 2; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    t[0] = kBos;
    for (int k = 0; k < n; ++k) t[1 + k] = symbol(int(rng.below(alphabet_)));  // the question
    t[n + 1] = kSep;
    for (int k = 0; k < n; ++k) {                                              // the answer
      t[n + 2 + k] = t[n - k];  // x_{n-k}: xn first, x1 last
      answer[n + 2 + k] = 1;
    }
  }

 private:
  int alphabet_;
};

}  // namespace

TaskInfo reverse_task_info() {
  return {"reverse",
          "write a random string backwards after the separator (length generalization)",
          "^ x1..xn | xn..x1   (answers: the reversed string)",
          {alphabet_option()},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<Reverse>(o), s);
          }};
}

}  // namespace poslab
