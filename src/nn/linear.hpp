// Linear layer: y = x W + b, the workhorse of every transformer block.
//
//   x [N, in]   W [in, out]   b [out]   y [N, out]
//
// W is stored [in, out] so that the forward pass is one plain sgemm over all N = B * L rows.
// Backward (accumulating, as every backward in poslab):
//   dx += dy W^T      dW += x^T dy      db += sum over rows of dy
#pragma once

#include "core/blas.hpp"

namespace poslab {

template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out) {
  parallel_gemm<T>(Trans::No, Trans::No, N, out, in, T(1), x, in, W, out, T(0), y, out);
  if (b == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* row = y + static_cast<long>(n) * out;
    for (int o = 0; o < out; ++o) row[o] += b[o];
  }
}

// Any of dx, dW, db may be nullptr when that gradient is not wanted.
template <class T>
void linear_backward(const T* dy, const T* x, const T* W, T* dx, T* dW, T* db, int N, int in,
                     int out) {
  if (dx) parallel_gemm<T>(Trans::No, Trans::Yes, N, in, out, T(1), dy, out, W, out, T(1), dx, in);
  if (dW) parallel_gemm<T>(Trans::Yes, Trans::No, in, out, N, T(1), x, in, dy, out, T(1), dW, out);
  if (db) {
    // A plain loop: several times faster than xt::sum over an axis (ENGINEERING.md).
    for (int n = 0; n < N; ++n) {
      const T* row = dy + static_cast<long>(n) * out;
      for (int o = 0; o < out; ++o) db[o] += row[o];
    }
  }
}

}  // namespace poslab
