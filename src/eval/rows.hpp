// What every evaluation mode's rows share: the split and batch size they read, the sampling
// error of an exact-match rate, and the memory they took. A row is one JSON object of
// eval.json's "evaluations" (docs/06 lists its fields); eval/mode.hpp says how a mode makes them.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

#include "config/config.hpp"
#include "core/memory_usage.hpp"
#include "data/batch_source.hpp"

namespace poslab {

// The held-out split the final evaluation reads (eval.split).
inline Split evaluation_split(const Config& cfg) {
  return cfg.eval.split == "test" ? Split::test : Split::valid;
}

// Rows per evaluation batch: eval.batch_size, or train.batch_size when that is 0.
inline int evaluation_batch_size(const Config& cfg) {
  return cfg.eval.batch_size > 0 ? cfg.eval.batch_size : cfg.train.batch_size;
}

// Wilson's 95% interval for a proportion p of n trials (exact match over instances): the
// sampling error of one run's evaluation, to set beside the spread over seeds.
//   centre = (p + z^2 / 2n) / (1 + z^2 / n)
//   half   = z sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)
inline std::pair<double, double> wilson_interval(double p, long n) {
  if (n <= 0) return {0.0, 1.0};
  const double z = 1.959963984540054, z2 = z * z, nn = double(n);
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

// Peak resident memory since the last reset_peak_memory(), MiB (a row's peak_memory_mb).
inline double peak_memory_mb() { return double(peak_memory_bytes()) / (1 << 20); }

}  // namespace poslab
