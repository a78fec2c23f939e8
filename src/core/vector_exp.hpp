// exp over a row of floats, vectorised, with the bits of the C library's expf.
//
// The softmax of attention and of the loss spends most of its time in exp: a call to the C
// library's expf per entry (about 5% of a training step at the studies' size, profiled with
// `perf record -e cpu-clock`; docs/09). A faster approximation would change the rounding of every
// probability, and so every committed result. This file instead does the C library's own
// computation (glibc 2.28 and later, sysdeps/ieee754/flt-32/e_expf.c, as its FMA build
// `__expf_fma` compiles it: the instructions were read from Debian 12's libm) in a loop the
// compiler vectorises, so the result is the same float for every input, bit for bit:
//
//   exp(x) = 2^(k/N) 2^(r/N),   N = 32,   x N / ln 2 = k + r,   k an integer, |r| <= 1/2
//   2^(r/N) ~= C0 r^3 + C1 r^2 + C2 r + 1          (C = the polynomial scaled by 1/N^3, 1/N^2, 1/N)
//   2^(k/N)  = the double whose bits are T[k mod N] + (k << (52 - 5))
//
// all in double precision, rounded once to float at the end. k is rounded to the nearest integer
// by adding and subtracting 1.5 * 2^52 (SHIFT), whose low bits then hold k.
// Inputs with |x| >= 88 or NaN (overflow, underflow to 0, infinities) go to std::exp, as glibc
// takes its slow path there; so does everything on a CPU where glibc runs its unfused build.
// tests/test_vector_exp.cpp compares every 61st float bit pattern (all of them with
// POSLAB_EXP_STRIDE=1), the edges of the fast path and the special values with std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace poslab {

namespace vector_exp_detail {

// glibc's __exp2f_data (sysdeps/ieee754/flt-32/e_exp2f_data.c), EXP2F_TABLE_BITS = 5:
// kTable[i] = bits of 2^(i/32) minus (i << 47).
inline constexpr std::uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
inline constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32;  // N / ln 2
inline constexpr double kShift = 0x1.8p+52;                     // 1.5 * 2^52
inline constexpr double kC0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32;
inline constexpr double kC1 = 0x1.ebfce50fac4f3p-3 / 32 / 32;
inline constexpr double kC2 = 0x1.62e42ff0c52d6p-1 / 32;

// glibc's fast path, for |x| < 88; the order of the operations and which of them are fused is
// the compiled __expf_fma's (each std::fma is one vfmadd/vfmsub there).
inline float exp_fast_path(float x) {
  const double xd = x;
  const double kd_shifted = std::fma(kInvLn2N, xd, kShift);  // z + SHIFT, z = x N / ln 2
  const std::uint64_t ki = std::bit_cast<std::uint64_t>(kd_shifted);
  const double kd = kd_shifted - kShift;                     // k
  const double r = std::fma(kInvLn2N, xd, -kd);              // z - k, z not rounded
  const double s = std::bit_cast<double>(kTable[ki % 32] + (ki << 47));  // 2^(k/N)
  const double p = std::fma(kC0, r, kC1);
  const double r2 = r * r;
  double y = std::fma(kC2, r, 1.0);
  y = std::fma(p, r2, y);
  return static_cast<float>(y * s);
}

// glibc's test for its slow path: the top 12 bits of |x| >= those of 88 (also NaN, infinities).
inline bool takes_slow_path(float x) {
  return ((std::bit_cast<std::uint32_t>(x) >> 20) & 0x7ff) >= 0x42a;
}

// glibc runs __expf_fma on CPUs with FMA and AVX2 (sysdeps/x86_64/fpu/multiarch/ifunc-fma.h) and
// an unfused build elsewhere, which rounds some results differently: there, exp_shifted calls
// std::exp itself.
inline bool libm_uses_fused_expf() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool fused = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return fused;
#else
  return false;
#endif
}

}  // namespace vector_exp_detail

// out[j] = exp(x[j] - shift) for j < n, with the bits of std::exp(x[j] - shift) (the difference
// rounded to float first, as there); out may be x. Blocks of 64: the fast path for all of them
// (vectorised), then std::exp again for the rare entries glibc sends to its slow path (a logit
// 88 below its row's maximum, an infinity).
inline void exp_shifted(const float* x, float shift, float* out, int n) {
  using namespace vector_exp_detail;
  if (!libm_uses_fused_expf()) {
    for (int j = 0; j < n; ++j) out[j] = std::exp(x[j] - shift);
    return;
  }
  constexpr int kBlock = 64;
  float arg[kBlock], value[kBlock];
  for (int j0 = 0; j0 < n; j0 += kBlock) {
    const int m = n - j0 < kBlock ? n - j0 : kBlock;
    int slow = 0;
#pragma omp simd reduction(| : slow)
    for (int j = 0; j < m; ++j) {
      arg[j] = x[j0 + j] - shift;
      slow |= takes_slow_path(arg[j]);
      value[j] = exp_fast_path(arg[j]);
    }
    if (slow)
      for (int j = 0; j < m; ++j)
        if (takes_slow_path(arg[j])) value[j] = std::exp(arg[j]);
    for (int j = 0; j < m; ++j) out[j0 + j] = value[j];
  }
}

// Double precision (gradient checks): the plain loop.
inline void exp_shifted(const double* x, double shift, double* out, int n) {
  for (int j = 0; j < n; ++j) out[j] = std::exp(x[j] - shift);
}

}  // namespace poslab
