#include "data/ngram_baseline.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace poslab {

double bigram_cross_entropy(const std::vector<std::int32_t>& train,
                            const std::vector<std::int32_t>& valid, int vocab) {
  if (vocab <= 0) throw std::runtime_error("bigram_cross_entropy: vocab must be positive");
  if (valid.size() < 2) throw std::runtime_error("bigram_cross_entropy: need two validation tokens");
  const auto V = static_cast<std::size_t>(vocab);
  auto index = [&](std::int32_t token) {
    if (token < 0 || token >= vocab)
      throw std::runtime_error("bigram_cross_entropy: token " + std::to_string(token) +
                               " outside [0, " + std::to_string(vocab) + ")");
    return static_cast<std::size_t>(token);
  };
  // pair[a * V + b] = count(a, b); first[a] = count(a as the first of a pair).
  std::vector<double> pair(V * V, 0.0), first(V, 0.0);
  for (std::size_t i = 1; i < train.size(); ++i) {
    const std::size_t a = index(train[i - 1]), b = index(train[i]);
    pair[a * V + b] += 1;
    first[a] += 1;
  }
  double sum_log_p = 0;
  for (std::size_t i = 1; i < valid.size(); ++i) {
    const std::size_t a = index(valid[i - 1]), b = index(valid[i]);
    sum_log_p += std::log((pair[a * V + b] + 1) / (first[a] + double(vocab)));
  }
  return -sum_log_p / double(valid.size() - 1);
}

}  // namespace poslab
