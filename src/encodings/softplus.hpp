// Positive learned scalars (KERPLE's r1, r2; FIRE's c) are stored raw and mapped through
// softplus, r = log(1 + e^raw): smooth, never zero, with a gradient everywhere.
//   d r / d raw = sigmoid(raw);   raw = softplus^{-1}(r) = r + log(1 - e^{-r})   (r > 0)
#pragma once

#include <cmath>

namespace poslab {

inline double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double softplus_inverse(double y) { return y + std::log(-std::expm1(-y)); }  // y > 0

}  // namespace poslab
