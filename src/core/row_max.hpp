// The maximum of a row, in 16 partial maxima (one vector register): a maximum is the same in any
// order, so this equals the one-by-one loop, without its chain of dependent steps. The softmax of
// attention and of the loss subtract it from every logit before exp.
#pragma once

#include <algorithm>
#include <limits>

namespace poslab {

// max of s[begin .. end-1] (-infinity for an empty range).
template <class T>
T row_max(const T* s, int begin, int end) {
  constexpr int kLanes = 16;
  T part[kLanes];
  std::fill(part, part + kLanes, -std::numeric_limits<T>::infinity());
  int j = begin;
  for (; j + kLanes <= end; j += kLanes)
    for (int u = 0; u < kLanes; ++u) part[u] = std::max(part[u], s[j + u]);
  for (; j < end; ++j) part[0] = std::max(part[0], s[j]);
  return *std::max_element(part, part + kLanes);
}

}  // namespace poslab
