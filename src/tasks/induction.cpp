// induction: random tokens in which a random block X appears twice; continue the second copy.
//
//   ^ f..f X f..f X              X = m random symbols, f = random filler    size = length T
//   e.g. m = 4, X = "cabd":  ^gcabdhnkcabd   answers: "abd", tokens 2..m of the second X
//
// Layout of an instance of T tokens: BOS, then filler, the first X at a random start s in
// [1, T - 2m], filler, and the second X as the last m tokens (start T - m). The first token of
// the repeat cannot be predicted (it is as random as the filler); tokens 2..m can, but only by
// copying from the first occurrence: "find the earlier place where the previous token occurred,
// and read the token after it". That is the induction-head circuit (Olsson et al. 2022), the
// basis of in-context copying. The distance between the two copies grows with T, so evaluating
// at unseen lengths asks for induction across distances never seen in training.
//
// The block length m is fixed (option block) or, with block = 0 (default), drawn uniformly in
// [4, 8] for each instance. The smallest instance is BOS + two blocks of the largest length.
#include <algorithm>

#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class Induction : public InstanceGenerator {
 public:
  explicit Induction(const Options& o) : alphabet_(int(o.get_int("alphabet"))) {
    const int block = int(o.get_int("block"));
    if (block == 1) task_error("induction", "block must be 0 (4..8) or >= 2: a block of 1 has no "
                                            "predictable token");
    min_block_ = block ? block : 4;
    max_block_ = block ? block : 8;
  }
  std::string name() const override { return "induction"; }
  int min_size() const override { return 1 + 2 * max_block_; }
  int max_size() const override { return kNoSizeLimit; }
  int length(int T) const override { return T; }  // the size is the length

  void generate(int T, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    const int m = min_block_ + int(rng.below(max_block_ - min_block_ + 1));
    t[0] = kBos;
    for (int i = 1; i < T; ++i) t[i] = symbol(int(rng.below(alphabet_)));  // filler everywhere
    const int s = 1 + int(rng.below(T - 2 * m));      // the first X: [s, s + m), s + m <= T - m
    for (int k = 0; k < m; ++k) t[s + k] = symbol(int(rng.below(alphabet_)));
    for (int k = 0; k < m; ++k) {                      // the second X: the last m tokens
      t[T - m + k] = t[s + k];
      answer[T - m + k] = k >= 1;                      // tokens 2..m are predictable
    }
  }

 private:
  int alphabet_;
  int min_block_, max_block_;
};

}  // namespace

TaskInfo induction_task_info() {
  return {"induction",
          "continue a repeated random block by copying its first occurrence (induction heads)",
          "^ f..f X f..f X   (X = m random symbols; answers: tokens 2..m of the second X)",
          {alphabet_option(),
           {"block", std::int64_t(0),
            "length m of the repeated block; 0 = uniform in 4..8 for each instance", 0, 1024}},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<Induction>(o), s);
          }};
}

}  // namespace poslab
