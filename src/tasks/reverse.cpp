// reverse: read a random string, then write it backwards.
//
//   ^ x1 x2 ... xn | xn ... x2 x1          answers: the reversed string     size n >= 1
//   e.g. "^dcab|bacd"                        length 2n + 2
//
// Unlike copy, the distance to the source changes along the answer: the k-th answer (k = 1..n)
// is predicted at the input 2k - 1 positions after x_{n+1-k}. The model must find "the mirror
// position" of the separator, which a fixed relative offset cannot express. Ruoss et al. 2023
// list it among the tasks where encodings differ most on unseen lengths.
#include "tasks/transduction.hpp"

namespace poslab {
namespace {

class Reverse : public TransductionTask {
 public:
  explicit Reverse(const Options& o) : TransductionTask(o, "reverse") {}

 protected:
  int source(int n, int k) const override { return n - 1 - k; }  // xn first, x1 last
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
