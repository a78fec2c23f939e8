// The shape shared by copy and reverse: a random string, the separator, then the string again
// with its tokens taken in some order (a string transduction). Each task says only which question
// token its k-th answer token repeats.
//
//   ^ x_0 x_1 ... x_{n-1} | y_0 ... y_{n-1}      y_k = x_{source(n, k)}     size n >= 1
//                                                answers: the y              length 2n + 2
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tasks/instance_batcher.hpp"
#include "tasks/tokens.hpp"

namespace poslab {

class TransductionTask : public InstanceGenerator {
 public:
  TransductionTask(const Options& o, std::string name)
      : name_(std::move(name)), alphabet_(int(o.get_int("alphabet"))) {}
  std::string name() const override { return name_; }
  int min_size() const override { return 1; }
  int max_size() const override { return kNoSizeLimit; }
  int length(int n) const override { return 2 * n + 2; }

  void generate(int n, Rng& rng, std::int32_t* t, std::uint8_t* answer) override {
    t[0] = kBos;
    for (int k = 0; k < n; ++k) t[1 + k] = symbol(int(rng.below(alphabet_)));  // the question
    t[n + 1] = kSep;
    for (int k = 0; k < n; ++k) {                                              // the answer
      t[n + 2 + k] = t[1 + source(n, k)];
      answer[n + 2 + k] = 1;
    }
  }

 protected:
  // The question token (0-based, in 0..n-1) that answer token k repeats.
  virtual int source(int n, int k) const = 0;

 private:
  std::string name_;
  int alphabet_;
};

}  // namespace poslab
