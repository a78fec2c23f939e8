// T5's relative-position buckets (Raffel et al. 2020, "Exploring the Limits of Transfer Learning
// with a Unified Text-to-Text Transformer", section 2.1; the function `_relative_position_bucket`
// of Mesh TensorFlow / the T5 code), used by src/encodings/t5_bias.cpp.
//
// The distance n = i - j (query position minus key position; n >= 0 for every key a causal
// query can see) is mapped to one of `num_buckets` buckets: small distances exactly, larger ones
// logarithmically, everything at or beyond `max_distance` into the last bucket.
//
//   causal (bidirectional = false), nb = num_buckets, n <- max(n, 0):
//     max_exact = nb / 2
//     bucket(n) = n                                                             if n < max_exact
//               = min(nb - 1, max_exact + floor( log(n / max_exact)
//                                              / log(max_distance / max_exact)
//                                              * (nb - max_exact) ))           otherwise
//
//   bidirectional: half of the buckets for each direction. Keys to the right of the query
//   (j > i, n < 0) are offset by nb / 2; then |n| goes through the causal rule with nb / 2
//   buckets (so max_exact = nb / 4):
//     bucket(n) = (n < 0 ? nb / 2 : 0) + causal_bucket(|n|, nb / 2)
//
// With the defaults (nb = 32, max_distance = 128), causal: buckets 0..15 are distances 0..15, and
// bucket b >= 16 starts at n = ceil(16 * 8^((b - 16) / 16)): 16, 19, 21, 24, 27, 31, 35, 40, 46,
// 52, 59, 67, 77, 87, 99, 113; n >= 128 is bucket 31. Bidirectional, per direction: 0..7 exact,
// bucket 8 + m starts at n = ceil(8 * 16^(m / 8)): 8, 12, 16, 23, 32, 46, 64, 91; n >= 128 -> 15.
//
// Floating point: the log ratio is computed in double and floored with a 1e-9 guard, so that
// distances sitting exactly on a boundary (n = 16, 32, 64 in the bidirectional default, where the
// ratio is exactly 2, 4, 6) get the bucket the formula gives in exact arithmetic rather than one
// that depends on the last bit of log(). Boundaries that are not exact are irrational and lie far
// further than 1e-9 from any integer distance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

namespace poslab {

// The bucket of distance n = i - j, in [0, num_buckets).
// Requires num_buckets >= 2 (>= 4 if bidirectional) and max_distance > max_exact.
inline int t5_relative_bucket(std::int64_t n, bool bidirectional, int num_buckets,
                              int max_distance) {
  int offset = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (n < 0) offset = num_buckets;  // keys to the right of the query
    n = n < 0 ? -n : n;
  } else {
    n = std::max<std::int64_t>(n, 0);  // a causal query never sees keys to its right
  }
  const int max_exact = num_buckets / 2;
  if (max_exact < 1 || max_distance <= max_exact)
    throw std::invalid_argument("t5 buckets: need num_buckets / 2 >= 1 per direction and "
                                "max_distance > max_exact");
  if (n < max_exact) return offset + int(n);
  const double large = std::log(double(n) / max_exact) /
                       std::log(double(max_distance) / max_exact) * (num_buckets - max_exact);
  // Capped before the conversion so that huge n cannot overflow the int.
  const double steps = std::min(std::floor(large + 1e-9), double(num_buckets - 1 - max_exact));
  return offset + max_exact + int(steps);
}

}  // namespace poslab
