// Layer normalisation (Ba et al. 2016), over the last axis of x [N, d]:
//
//   mu = mean(x),  rstd = 1 / sqrt(var(x) + eps),  x_hat = (x - mu) * rstd,  y = g * x_hat + b
//
// Forward caches mu and rstd [N] (and the caller keeps x) for the backward pass:
//   dg += sum_n dy * x_hat      db += sum_n dy
//   dx += rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)),  dx_hat = dy * g
#pragma once

#include <algorithm>
#include <cmath>

#include "core/parallel_loops.hpp"

namespace poslab {

// The row sums (mean, variance, and the two means of the backward pass) are chains of
// dependent adds. kLayerNormRows rows advance side by side, each sum still in the order
// i = 0, 1, ..., d-1 (as in core/ordered_sums.hpp): the results of a row-by-row loop, with
// kLayerNormRows chains in flight instead of one.
inline constexpr int kLayerNormRows = 8;

template <class T>
void layernorm_forward(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int N, int d,
                       T eps = T(1e-5)) {
  constexpr int R = kLayerNormRows;
#pragma omp parallel for schedule(static)
  for (int n0 = 0; n0 < N; n0 += R) {
    const T* xr[R];  // rows n0 .. n0 + R - 1 (past N: the last row again, results dropped)
    for (int r = 0; r < R; ++r) xr[r] = x + static_cast<long>(std::min(n0 + r, N - 1)) * d;
    T mu[R], var[R];
    for (int r = 0; r < R; ++r) mu[r] = var[r] = 0;
    for (int i = 0; i < d; ++i)
      for (int r = 0; r < R; ++r) mu[r] += xr[r][i];
    for (int r = 0; r < R; ++r) mu[r] /= d;
    for (int i = 0; i < d; ++i)
      for (int r = 0; r < R; ++r) var[r] += (xr[r][i] - mu[r]) * (xr[r][i] - mu[r]);
    for (int n = n0; n < std::min(N, n0 + R); ++n) {
      const int r = n - n0;
      const T rs = T(1) / std::sqrt(var[r] / d + eps);
      T* yr = y + static_cast<long>(n) * d;
      for (int i = 0; i < d; ++i) yr[i] = (xr[r][i] - mu[r]) * rs * g[i] + b[i];
      mean[n] = mu[r];
      rstd[n] = rs;
    }
  }
}

// dx is accumulated; dg, db are accumulated over the rows in order (core/parallel_loops.hpp), so
// the result does not depend on the number of threads.
template <class T>
void layernorm_backward(const T* dy, const T* x, const T* g, const T* mean, const T* rstd, T* dx,
                        T* dg, T* db, int N, int d) {
  constexpr int R = kLayerNormRows;
#pragma omp parallel for schedule(static)
  for (int n0 = 0; n0 < N; n0 += R) {
    const T *dyr[R], *xr[R], *mr[R], *rr[R];  // past N: the last row again, results dropped
    for (int r = 0; r < R; ++r) {
      const long n = std::min(n0 + r, N - 1);
      dyr[r] = dy + n * d, xr[r] = x + n * d, mr[r] = mean + n, rr[r] = rstd + n;
    }
    T mean_dxhat[R], mean_dxhat_xhat[R];
    for (int r = 0; r < R; ++r) mean_dxhat[r] = mean_dxhat_xhat[r] = 0;
    for (int i = 0; i < d; ++i)
      for (int r = 0; r < R; ++r) {
        const T xhat = (xr[r][i] - *mr[r]) * *rr[r];
        const T dxhat = dyr[r][i] * g[i];
        mean_dxhat[r] += dxhat;
        mean_dxhat_xhat[r] += dxhat * xhat;
      }
    for (int n = n0; n < std::min(N, n0 + R); ++n) {
      const int r = n - n0;
      const T m1 = mean_dxhat[r] / d, m2 = mean_dxhat_xhat[r] / d;
      T* dxr = dx + static_cast<long>(n) * d;
      for (int i = 0; i < d; ++i) {
        const T xhat = (xr[r][i] - mean[n]) * rstd[n];
        dxr[i] += rstd[n] * (dyr[r][i] * g[i] - m1 - xhat * m2);
      }
    }
  }
  for_column_blocks(N, d, [&](int n, int i0, int i1) {
    const T* dyr = dy + static_cast<long>(n) * d;
    const T* xr = x + static_cast<long>(n) * d;
    for (int i = i0; i < i1; ++i) {
      dg[i] += dyr[i] * (xr[i] - mean[n]) * rstd[n];
      db[i] += dyr[i];
    }
  });
}

}  // namespace poslab

#include <string>

#include "core/arena.hpp"
#include "core/buffer.hpp"

namespace poslab {

// A layer norm's parameters (gain g = 1, bias b = 0 at init) and its cached statistics.
template <class T>
class LayerNorm {
 public:
  LayerNorm(ParameterArena<T>& arena, const std::string& prefix, int d) : arena_(arena), d_(d) {
    g = arena.add(prefix + "g", {std::size_t(d)}, false);
    b = arena.add(prefix + "b", {std::size_t(d)}, false);
  }
  void init() { std::fill(arena_.value(g), arena_.value(g) + d_, T(1)); }

  void forward(const T* x, T* y, int N) {
    ensure_shape(mean_, {std::size_t(N)});
    ensure_shape(rstd_, {std::size_t(N)});
    layernorm_forward<T>(x, arena_.value(g), arena_.value(b), y, mean_.data(), rstd_.data(), N,
                         d_);
  }
  // x is the forward input; dx is accumulated.
  void backward(const T* dy, const T* x, T* dx, int N) {
    layernorm_backward<T>(dy, x, arena_.value(g), mean_.data(), rstd_.data(), dx,
                          arena_.grad(g), arena_.grad(b), N, d_);
  }

  Param g, b;

 private:
  ParameterArena<T>& arena_;
  int d_;
  xt::xtensor<T, 1> mean_, rstd_;
};

}  // namespace poslab
