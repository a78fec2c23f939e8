// parity: read random bits, then say whether the number of ones is odd. The negative control.
//
//   ^ b1 b2 ... bn | p          p = b1 xor b2 xor ... xor bn       answer: p    size n >= 1
//   e.g. "^0110|0", "^111|1"     bits written as '0' and '1'       length n + 3
//
// Parity needs no positional information at all (it is a function of the multiset of bits) but
// needs every bit: attention averages, so a transformer has to count, which it does not do in a
// way that transfers to longer inputs. Ruoss et al. 2023 find it fails at unseen lengths for every
// encoding; if an encoding "wins" on parity, suspect the experiment.
#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class Parity : public InstanceGenerator {
 public:
  std::string name() const override { return "parity"; }
  int min_size() const override { return 1; }
  int max_size() const override { return kNoSizeLimit; }
  int length(int n) const override { return n + 3; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    t[0] = kBos;
    int ones = 0;
    for (int k = 0; k < n; ++k) {
      const int bit = int(rng.below(2));
      ones += bit;
      t[1 + k] = '0' + bit;
    }
    t[n + 1] = kSep;
    t[n + 2] = '0' + ones % 2;
    answer[n + 2] = 1;
  }
};

}  // namespace

TaskInfo parity_task_info() {
  return {"parity",
          "the parity of a random bit string (negative control: fails at unseen lengths for all)",
          "^ b1..bn | p   (bits '0'/'1'; answer: p = xor of the bits)",
          {},
          [](const Options&, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<InstanceBatcher>(std::make_unique<Parity>(), s);
          }};
}

}  // namespace poslab
