// The bigram baseline: the loss of a model that sees only the previous byte. A language model
// that is "past the bigram level" uses more context than one token: that is the in-distribution
// gate of the language-modelling studies (a model that has not got there has not learned enough
// for its use of memory or of longer inputs to say anything about its positional encoding).
//
// Add-one (Laplace) smoothing, counts from `train`:
//   p(b | a) = (count_train(a, b) + 1) / (count_train(a) + vocab)
//   H        = -(1 / (|valid| - 1)) * sum_{i >= 1} log p(valid_i | valid_{i-1})
// The unigram baseline (data/corpus.hpp) is the same with no context at all.
#pragma once

#include <cstdint>
#include <vector>

namespace poslab {

// Nats per token. Tokens must lie in [0, vocab); `valid` needs at least two tokens.
double bigram_cross_entropy(const std::vector<std::int32_t>& train,
                            const std::vector<std::int32_t>& valid, int vocab);

}  // namespace poslab
