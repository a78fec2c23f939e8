// Layer normalisation (Ba et al. 2016), over the last axis of x [N, d]:
//
//   mu = mean(x),  rstd = 1 / sqrt(var(x) + eps),  x_hat = (x - mu) * rstd,  y = g * x_hat + b
//
// Forward caches mu and rstd [N] (and the caller keeps x) for the backward pass:
//   dg += sum_n dy * x_hat      db += sum_n dy
//   dx += rstd * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)),  dx_hat = dy * g
#pragma once

#include <cmath>

namespace poslab {

template <class T>
void layernorm_forward(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, int N, int d,
                       T eps = T(1e-5)) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* xr = x + static_cast<long>(n) * d;
    T* yr = y + static_cast<long>(n) * d;
    T mu = 0;
    for (int i = 0; i < d; ++i) mu += xr[i];
    mu /= d;
    T var = 0;
    for (int i = 0; i < d; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    var /= d;
    const T rs = T(1) / std::sqrt(var + eps);
    for (int i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs * g[i] + b[i];
    mean[n] = mu;
    rstd[n] = rs;
  }
}

// dx is accumulated; dg, db are accumulated (serially, so the result does not depend on threads).
template <class T>
void layernorm_backward(const T* dy, const T* x, const T* g, const T* mean, const T* rstd, T* dx,
                        T* dg, T* db, int N, int d) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* dyr = dy + static_cast<long>(n) * d;
    const T* xr = x + static_cast<long>(n) * d;
    T* dxr = dx + static_cast<long>(n) * d;
    T mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (int i = 0; i < d; ++i) {
      const T xhat = (xr[i] - mean[n]) * rstd[n];
      const T dxhat = dyr[i] * g[i];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
    }
    mean_dxhat /= d;
    mean_dxhat_xhat /= d;
    for (int i = 0; i < d; ++i) {
      const T xhat = (xr[i] - mean[n]) * rstd[n];
      dxr[i] += rstd[n] * (dyr[i] * g[i] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  for (int n = 0; n < N; ++n) {
    const T* dyr = dy + static_cast<long>(n) * d;
    const T* xr = x + static_cast<long>(n) * d;
    for (int i = 0; i < d; ++i) {
      dg[i] += dyr[i] * (xr[i] - mean[n]) * rstd[n];
      db[i] += dyr[i];
    }
  }
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
