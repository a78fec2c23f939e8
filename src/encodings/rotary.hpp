// Rotating pairs of dimensions by position: the machinery shared by RoPE (rope.cpp, with its
// scalings, rope_scaling.hpp) and xPos (xpos.cpp).
//
// Pair p of every head of a row at position m is multiplied by a scaled rotation
//
//   [y_{2p}  ]         [cos m theta_p   -sin m theta_p] [x_{2p}  ]
//   [y_{2p+1}] = a_mp  [sin m theta_p    cos m theta_p] [x_{2p+1}]
//
// with an amplitude a_mp that is 1 for plain RoPE, YaRN's attention factor for YaRN, and
// zeta_p^(+-m / scale_base) for xPos. A RotaryTable holds a cos and a sin of every (row, pair),
// amplitude included ([rows, pairs], computed in double, stored in T), and is rebuilt only when
// the positions (or its tag, e.g. dynamic NTK's key count) change: every layer of a step reads
// the same table, and a training step with fixed positions computes it once.
//
// Backward: the Jacobian of y = a R x is a R, so the gradient is a R^T dy; with the amplitude
// folded into the table that is the same loop with the sign of sin flipped:
//   dx_{2p} = c dy_{2p} + s dy_{2p+1},   dx_{2p+1} = -s dy_{2p} + c dy_{2p+1}
// (c = a cos, s = a sin). For a = 1 it is the inverse rotation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace poslab {

// The number of rotated pairs d_rot / 2 of a head of d_h dimensions of which `fraction` is rotated:
// d_rot = 2 round(fraction d_h / 2), at most d_h (an odd d_h never rotates its last dimension).
inline int rotated_pairs(double fraction, int d_head) {
  int pairs = int(std::lround(fraction * d_head / 2.0));
  if (2 * pairs > d_head) pairs = d_head / 2;
  return pairs;
}

template <class T>
struct RotaryTable {
  std::vector<std::int64_t> pos;  // the positions it was built for
  std::int64_t tag = 0;           // anything else it was built for (0 if nothing)
  std::vector<T> cos, sin;        // [rows, pairs]: a_rp cos(pos[r] theta_p), a_rp sin(...)
  bool built = false;

  bool holds(const std::int64_t* p, int rows, std::int64_t t) const {
    return built && tag == t && int(pos.size()) == rows && std::equal(pos.begin(), pos.end(), p);
  }

  // (Re)builds the table for positions p [rows] and angles pos * theta[pairs]; amplitude(r, q)
  // is a_rq (double). Allocates only when the number of rows grows.
  template <class Amplitude>
  void build(const std::int64_t* p, int rows, std::int64_t t, const double* theta, int pairs,
             Amplitude&& amplitude) {
    build(p, rows, t, theta, pairs, amplitude, theta, 0);
  }
  // The same, except that rows at positions 0 <= p < start_positions turn by theta_start[pairs]
  // (LongRoPE's start tokens keep the plain frequencies).
  template <class Amplitude>
  void build(const std::int64_t* p, int rows, std::int64_t t, const double* theta, int pairs,
             Amplitude&& amplitude, const double* theta_start, std::int64_t start_positions) {
    pos.assign(p, p + rows);
    tag = t;
    built = true;
    cos.resize(std::size_t(rows) * pairs);
    sin.resize(std::size_t(rows) * pairs);
    for (int r = 0; r < rows; ++r) {
      const double* th = (p[r] >= 0 && p[r] < start_positions) ? theta_start : theta;
      for (int q = 0; q < pairs; ++q) {
        const double angle = double(p[r]) * th[q];
        const double a = amplitude(r, q);
        cos[std::size_t(r) * pairs + q] = T(a * std::cos(angle));
        sin[std::size_t(r) * pairs + q] = T(a * std::sin(angle));
      }
    }
  }
};

// x [B, rows, H d_h]: the first `pairs` pairs (2p, 2p+1) of every head, turned and scaled by the
// table (forward), or by its transpose (transpose = true: the backward pass). The dimensions
// 2 pairs .. d_h - 1 of each head pass through.
template <class T>
void rotate_pairs(T* x, int B, int rows, int H, int dh, int pairs, const RotaryTable<T>& t,
                  bool transpose) {
  const int d = H * dh;
  const T sign = transpose ? T(-1) : T(1);
#pragma omp parallel for schedule(static)
  for (long br = 0; br < long(B) * rows; ++br) {
    const long r = br % rows;
    const T* c = t.cos.data() + r * pairs;
    const T* s = t.sin.data() + r * pairs;
    for (int h = 0; h < H; ++h) {
      T* xh = x + br * d + long(h) * dh;
      for (int p = 0; p < pairs; ++p) {
        const T x0 = xh[2 * p], x1 = xh[2 * p + 1], sn = sign * s[p];
        xh[2 * p] = c[p] * x0 - sn * x1;
        xh[2 * p + 1] = sn * x0 + c[p] * x1;
      }
    }
  }
}

}  // namespace poslab
