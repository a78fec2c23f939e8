// ALiBi's head slopes (Press, Smith & Lewis 2022, "Train Short, Test Long: Attention with Linear
// Biases Enables Input Length Extrapolation", section 3), used by src/encodings/alibi.cpp.
//
// For H a power of two the slopes are the geometric sequence that starts and has ratio 2^(-8/H):
//
//   m_h = 2^(-8h/H),  h = 1..H            H = 8:  1/2, 1/4, ..., 1/256
//
// For other H the paper (and its code) takes the H' = largest power of two <= H slopes, then
// every other slope of the set for 2H' (the ones that fall between them: 2^(-4/H'), 2^(-12/H'),
// ...) until there are H:
//
//   H = 12:  1/2, 1/4, ..., 1/256,  2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
//   H = 6:   1/4, 1/16, 1/64, 1/256,  1/2, 1/8
//   H = 3:   1/16, 1/256,  1/4
//
// Head h (0-based, in the order the attention numbers its heads) gets slopes[h].
#pragma once

#include <cmath>
#include <stdexcept>
#include <vector>

namespace poslab {

// m_h = 2^(-8h/n), h = 1..n.
inline std::vector<double> alibi_power_of_two_slopes(int n) {
  std::vector<double> m(n);
  for (int h = 1; h <= n; ++h) m[h - 1] = std::exp2(-8.0 * h / n);
  return m;
}

inline std::vector<double> alibi_slopes(int H) {
  if (H < 1) throw std::invalid_argument("alibi: needs at least one head");
  int p = 1;  // largest power of two <= H
  while (2 * p <= H) p *= 2;
  std::vector<double> m = alibi_power_of_two_slopes(p);
  const std::vector<double> twice = alibi_power_of_two_slopes(2 * p);
  for (int t = 0; int(m.size()) < H; t += 2) m.push_back(twice[t]);  // H - p < p: t stays < 2p
  return m;
}

}  // namespace poslab
