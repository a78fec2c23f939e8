// copy: read a random string, then write it again.
//
//   ^ x1 x2 ... xn | x1 x2 ... xn          answers: the second x1..xn       size n >= 1
//   e.g. "^dcab|dcab"                        length 2n + 2
//
// The x are uniform random data symbols (option alphabet), so the only way to get an answer
// token right is to attend to the matching token of the first copy: the k-th answer sits exactly
// n + 1 positions after its source. A relative encoding can learn "look n + 1 back" only for the
// n it saw; copying longer strings than in training is the classic length-generalization test
// (Kazemnejad et al. 2023: NoPE and T5 stay near 100% at twice the training length, absolute and
// rotary encodings collapse).
#include "tasks/transduction.hpp"

namespace poslab {
namespace {

class Copy : public TransductionTask {
 public:
  explicit Copy(const Options& o) : TransductionTask(o, "copy") {}

 protected:
  int source(int /*n*/, int k) const override { return k; }  // y_k = x_k
};

}  // namespace

TaskInfo copy_task_info() {
  return {"copy",
          "copy a random string after the separator (length generalization)",
          "^ x1..xn | x1..xn   (answers: the second x1..xn)",
          {alphabet_option()},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<Copy>(o), s);
          }};
}

}  // namespace poslab
