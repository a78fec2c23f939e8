// The sinusoid table of Vaswani et al. (2017), section 3.5:
//
//   PE[pos, 2k]   = sin(pos / 10000^(2k/d))
//   PE[pos, 2k+1] = cos(pos / 10000^(2k/d))
//
// Used by the absolute `sinusoidal` encoding (pos = absolute position) and by Transformer-XL as
// its relative table R (pos = distance i - j). poslab interleaves sin and cos as the formula
// reads; the Transformer-XL code concatenates [sin | cos] instead, which is the same table up to
// a fixed permutation of columns (absorbed by the learned W_kR).
#pragma once

#include <cmath>
#include <cstdint>

namespace poslab {

// out [n, d] = PE[positions[0..n), :]. d must be even.
template <class T>
void sinusoid_table(const std::int64_t* positions, int n, int d, T* out) {
  for (int r = 0; r < n; ++r) {
    const double pos = double(positions[r]);
    for (int k = 0; 2 * k < d; ++k) {
      const double angle = pos / std::pow(10000.0, 2.0 * k / d);
      out[long(r) * d + 2 * k] = T(std::sin(angle));
      if (2 * k + 1 < d) out[long(r) * d + 2 * k + 1] = T(std::cos(angle));
    }
  }
}

}  // namespace poslab
