// The loops that replace serial ones for speed (core/ordered_sums.hpp, core/parallel_loops.hpp)
// must give exactly, bit for bit, what the serial loops give: poslab's results do not depend on
// how the code is scheduled. Float sums of values of mixed magnitude round differently in any
// other order, so a reassociated sum fails these equalities.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <vector>

#include "core/ordered_sums.hpp"
#include "core/parallel_loops.hpp"
#include "core/rng.hpp"

using namespace poslab;

namespace {

// Values spanning several orders of magnitude, so that the order of a sum shows in its rounding.
std::vector<float> mixed_values(int n, Rng& rng) {
  std::vector<float> x(n);
  for (float& v : x) v = float(rng.normal(0.0, 1.0) * std::pow(10.0, rng.uniform() * 6 - 3));
  return x;
}

// mixed_values rounded to 12 significant bits: the product of two of them has at most 24 and is
// exact in float. Whether the compiler fuses `s += x * y` into one FMA depends on what
// -march=native vectorises on each CPU (GCC fuses the scalar tail of a loop and not its
// vectorised body, so a plain loop is itself a mix). With exact products a fused and an unfused
// add round the same, so a dot-product test checks what it should: the order of the sum.
std::vector<float> mixed_short_values(int n, Rng& rng) {
  auto x = mixed_values(n, rng);
  for (float& v : x) {
    int exponent;  // v = mantissa 2^exponent, |mantissa| in [1/2, 1)
    const float mantissa = std::frexp(v, &exponent);
    v = std::ldexp(std::round(std::ldexp(mantissa, 12)), exponent - 12);
  }
  return x;
}

float serial_sum(const float* x, int begin, int end) {
  float s = 0;
  for (int j = begin; j < end; ++j) s += x[j];
  return s;
}

}  // namespace

TEST_CASE("ordered_row_sums equals the serial loop of every row, bit for bit", "[ordered]") {
  Rng rng(11);
  constexpr int R = 8, K = 300;
  const auto data = mixed_values(R * K, rng);
  // Ranges that share columns, ranges that do not, empty ones, a causal staircase.
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> cases = {
      {{0, 0, 0, 0, 0, 0, 0, 0}, {300, 300, 300, 300, 300, 300, 300, 300}},
      {{0, 0, 0, 0, 0, 0, 0, 0}, {100, 101, 102, 103, 104, 105, 106, 107}},
      {{0, 5, 10, 15, 20, 25, 30, 35}, {250, 251, 252, 253, 254, 255, 256, 257}},
      {{0, 0, 0, 0, 0, 0, 0, 0}, {50, 60, 0, 0, 70, 80, 90, 0}},
      {{0, 200, 0, 200, 0, 200, 0, 200}, {100, 300, 100, 300, 100, 300, 100, 300}},
  };
  for (const auto& [b, e] : cases) {
    const float* rows[R];
    int begin[R], end[R];
    for (int r = 0; r < R; ++r) rows[r] = data.data() + r * K, begin[r] = b[r], end[r] = e[r];
    float sums[R];
    ordered_row_sums(rows, begin, end, sums);
    for (int r = 0; r < R; ++r) {
      CAPTURE(r, begin[r], end[r]);
      REQUIRE(sums[r] == serial_sum(rows[r], begin[r], end[r]));
    }
  }
  // The check can fail: the same terms summed in halves round differently here.
  const float* row = data.data();
  REQUIRE(serial_sum(row, 0, 150) + serial_sum(row, 150, 300) != serial_sum(row, 0, 300));
}

TEST_CASE("ordered_row_dots equals the serial dot product of every row", "[ordered]") {
  Rng rng(12);
  constexpr int R = 8, K = 257;
  const auto x = mixed_short_values(R * K, rng), y = mixed_short_values(R * K, rng);
  const float *xr[R], *yr[R];
  for (int r = 0; r < R; ++r) xr[r] = x.data() + r * K, yr[r] = y.data() + r * K;
  float dots[R];
  ordered_row_dots(xr, yr, K, dots);
  int reversed_differs = 0;
  for (int r = 0; r < R; ++r) {
    float s = 0, reversed = 0;
    for (int j = 0; j < K; ++j) s += xr[r][j] * yr[r][j];
    for (int j = K - 1; j >= 0; --j) reversed += xr[r][j] * yr[r][j];
    CAPTURE(r);
    REQUIRE(dots[r] == s);
    reversed_differs += reversed != s;
  }
  // The check can fail: the same products summed in the other order round differently here.
  REQUIRE(reversed_differs > 0);
}

TEST_CASE("column sums split over threads equal the serial row-by-row loop", "[ordered]") {
  Rng rng(13);
  const int threads_before = omp_get_max_threads();
  for (int cols : {1, 15, 16, 17, 128, 300}) {
    const int N = 1000;
    const auto x = mixed_values(N * cols, rng);
    std::vector<float> serial(cols, 0.5f);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < cols; ++c) serial[c] += x[long(n) * cols + c];
    for (int threads : {1, 2, 3}) {
      CAPTURE(cols, threads);
      omp_set_num_threads(threads);
      std::vector<float> split(cols, 0.5f);
      add_column_sums(x.data(), N, cols, split.data());
      REQUIRE(split == serial);
    }
  }
  omp_set_num_threads(threads_before);
}
