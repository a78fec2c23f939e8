// Random token ids for tests: n ids drawn uniformly from [0, vocab) with a seeded Rng.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.hpp"

namespace poslab::testing {

inline std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = std::int32_t(rng.below(vocab));
  return t;
}

}  // namespace poslab::testing
