// exp_shifted (core/vector_exp.hpp) must return std::exp's float bit for bit: the softmax of
// attention and of the loss use it, and every committed result was computed with std::exp.
// The test walks all 2^32 float bit patterns with a stride (POSLAB_EXP_STRIDE, default 61: about
// 70 million inputs; POSLAB_EXP_STRIDE=1 checks every float, about 30 s), every float near the
// edges of glibc's fast path, and the special values; in place and out of place, at lengths that
// are not a multiple of the 64-entry blocks.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/vector_exp.hpp"

using namespace poslab;

namespace {

// The number of inputs in x whose exp_shifted(x - shift) differs from std::exp(x - shift) in its
// bits (two NaNs count as equal).
long count_differences(const std::vector<float>& x, float shift) {
  std::vector<float> out(x.size());
  exp_shifted(x.data(), shift, out.data(), int(x.size()));
  long differences = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = std::exp(x[i] - shift);
    const bool both_nan = std::isnan(want) && std::isnan(out[i]);
    if (!both_nan && std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(out[i]))
      ++differences;
  }
  return differences;
}

}  // namespace

TEST_CASE("exp_shifted gives std::exp's bits over the floats", "[vector_exp]") {
  const char* stride_text = std::getenv("POSLAB_EXP_STRIDE");
  const std::uint64_t stride = stride_text ? std::strtoull(stride_text, nullptr, 10) : 61;
  REQUIRE(stride >= 1);
  constexpr int kChunk = 1 << 16;
  std::vector<float> x;
  x.reserve(kChunk);
  long differences = 0, checked = 0;
  for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += stride) {
    x.push_back(std::bit_cast<float>(std::uint32_t(bits)));
    if (x.size() == kChunk) {
      differences += count_differences(x, 0.0f);
      checked += long(x.size());
      x.clear();
    }
  }
  differences += count_differences(x, 0.0f);
  checked += long(x.size());
  INFO("inputs checked: " << checked);
  CHECK(differences == 0);
}

TEST_CASE("exp_shifted at the edges of the fast path and at special values", "[vector_exp]") {
  std::vector<float> x;
  // Every float within 4096 steps of the slow path's threshold (|x| = 88), of overflow
  // (88.72), of the underflow to 0 (-103.97) and of 0.
  for (float centre : {88.0f, -88.0f, 88.72283f, -103.97208f, -87.33655f, 0.0f}) {
    float v = centre;
    for (int i = 0; i < 4096; ++i) v = std::nextafter(v, -std::numeric_limits<float>::infinity());
    for (int i = 0; i < 8192; ++i, v = std::nextafter(v, std::numeric_limits<float>::infinity()))
      x.push_back(v);
  }
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::max()})
    x.push_back(v);
  CHECK(count_differences(x, 0.0f) == 0);
  // The shift is subtracted in float first, as in std::exp(x - shift): scores minus a row maximum.
  CHECK(count_differences(x, 3.25f) == 0);
  CHECK(count_differences(x, -17.5f) == 0);
}

TEST_CASE("exp_shifted in place, at any length", "[vector_exp]") {
  for (int n : {0, 1, 63, 64, 65, 200}) {
    std::vector<float> x(n), want(n);
    for (int i = 0; i < n; ++i) {
      x[i] = -0.37f * float(i) + (i % 7 == 3 ? -120.0f : 0.0f);  // some entries take the slow path
      want[i] = std::exp(x[i] - 1.5f);
    }
    exp_shifted(x.data(), 1.5f, x.data(), n);
    for (int i = 0; i < n; ++i) CHECK(std::bit_cast<std::uint32_t>(x[i]) == std::bit_cast<std::uint32_t>(want[i]));
  }
}
