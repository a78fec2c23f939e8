// Remembering an attention call's mask and positions, so that work depending on nothing else
// (Shaw's label table, the distance index of the scalar-bias encodings) is done once per
// geometry instead of at every call: a training step makes several calls per layer (forward and
// backward, keys and values) with the same segment, memory and positions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "encodings/encoding.hpp"

namespace poslab {

class GeometryKey {
 public:
  // True if `g` has the mask (L, K, M, window) and the positions remembered last. Otherwise
  // remembers g's and returns false: the caller recomputes. O(L + K).
  bool same_as_last(const AttentionGeometry& g) {
    const bool same = g.q_len == L_ && g.k_len == K_ && g.mem_len == M_ && g.window == window_ &&
                      std::equal(g.q_pos, g.q_pos + g.q_len, q_pos_.begin()) &&
                      std::equal(g.k_pos, g.k_pos + g.k_len, k_pos_.begin());
    if (same) return true;
    L_ = g.q_len, K_ = g.k_len, M_ = g.mem_len, window_ = g.window;
    q_pos_.assign(g.q_pos, g.q_pos + g.q_len);
    k_pos_.assign(g.k_pos, g.k_pos + g.k_len);
    return false;
  }
  // The remembered work is gone (overwritten by something else): the next call recomputes.
  void forget() { L_ = -1; }

 private:
  int L_ = -1, K_ = -1, M_ = -1, window_ = -1;
  std::vector<std::int64_t> q_pos_, k_pos_;
};

}  // namespace poslab
