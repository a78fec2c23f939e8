// Linear layer: y = x W + b, the workhorse of every transformer block.
//
//   x [N, in]   W [in, out]   b [out]   y [N, out]
//
// W is stored [in, out] so that the forward pass is one plain sgemm over all N = B * L rows.
// Backward (accumulating, as every backward in poslab; dx may be written instead, see below):
//   dx += dy W^T      dW += x^T dy      db += sum over rows of dy
#pragma once

#include "core/blas.hpp"
#include "core/parallel_loops.hpp"

namespace poslab {

template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out) {
  parallel_multiply(matrix(y, N, out), matrix(x, N, in), matrix(W, in, out));  // y = x W
  if (b == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    T* row = y + static_cast<long>(n) * out;
    for (int o = 0; o < out; ++o) row[o] += b[o];
  }
}

// Any of dx, dW, db may be nullptr when that gradient is not wanted. With dx_beta = 0, dx is
// written instead of accumulated (dx = dy W^T): a buffer that nothing else adds to then needs
// no zeroing pass first.
template <class T>
void linear_backward(const T* dy, const T* x, const T* W, T* dx, T* dW, T* db, int N, int in,
                     int out, T dx_beta = T(1)) {
  const auto dY = matrix(dy, N, out);
  if (dx)
    parallel_multiply(matrix(dx, N, in), dY, matrix(W, in, out).t(), T(1), dx_beta);     // dy W^T
  if (dW) parallel_multiply(matrix(dW, in, out), matrix(x, N, in).t(), dY, T(1), T(1));  // x^T dy
  // A plain loop (measured several times faster than xt::sum over an axis), its columns
  // split over the threads.
  if (db) add_column_sums(dy, N, out, db);  // db += sum over rows of dy
}

}  // namespace poslab
