// The one door to BLAS. Every product in poslab is
//
//   C = alpha op(A) op(B) + beta C          op(X) = X, or X^T for a view X.t()
//
// over matrix views (core/matrix.hpp): row-major, each with its own row stride, so that a
// "matrix" may be a column slice of a wider buffer (a head inside [rows, d_model]). multiply
// checks that the shapes agree before it calls BLAS; the positional sgemm call lives in
// blas.cpp only.
//
// xtensor-blas declares its own cblas prototypes, so <cblas.h> is included only in blas.cpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/matrix.hpp"

namespace poslab {

// C [m, n] = alpha * op(A) [m, k] * op(B) [k, n] + beta * C [m, n]
// float calls sgemm, double (used by the gradient checks) calls dgemm.
// Throws std::logic_error when the shapes disagree (see check_product_shapes).
template <class T>
void multiply(MatrixView<T> C, std::type_identity_t<ConstMatrixView<T>> A,
              std::type_identity_t<ConstMatrixView<T>> B, std::type_identity_t<T> alpha = T(1),
              std::type_identity_t<T> beta = T(0));

// The same product, with the rows of C cut into fixed blocks (product_blocks below) and the
// blocks shared among the OpenMP threads, each block one single-threaded BLAS call. poslab runs
// OpenBLAS single-threaded and does all threading with OpenMP: two thread pools on two cores
// (OpenMP spinning while OpenBLAS' pthreads wait for a core) cost a factor of 4 in training
// speed here. Inside a parallel region the same blocks are computed by one thread.
//
// Why fixed blocks: OpenBLAS picks its kernel and its blocking by the shape of each call, and on
// some kernels (OPENBLAS_CORETYPE=Haswell, for one) a 512-row call rounds differently from the
// same rows inside a 1024-row call. Blocks that depend on the thread count would then make the
// bits depend on it; blocks that depend on the shape alone make the same calls at 1 thread and
// at 5, on every kernel. (Whether the blocks equal ONE call over all rows is the kernel's
// business, and is not promised.)
template <class T>
void parallel_multiply(MatrixView<T> C, std::type_identity_t<ConstMatrixView<T>> A,
                       std::type_identity_t<ConstMatrixView<T>> B,
                       std::type_identity_t<T> alpha = T(1), std::type_identity_t<T> beta = T(0));

// The row blocks of a parallel_multiply of C [m, n] = op(A) [m, k] op(B) [k, n]: one block per
// 2^23 multiply-adds (m n k), at most kMaxBlocks and m / kMinRows, at least 1, starting at
// multiples of kAlign rows (blas.cpp says why 2^23). A function of (m, n, k) only.
struct ProductBlocks {
  static constexpr int kMinRows = 32;   // no block thinner than this (BLAS is slow on thin ones)
  static constexpr int kMaxBlocks = 8;  // enough to share among the threads of a small machine
  static constexpr int kAlign = 16;     // block starts on a multiple of 16 rows
  int m = 0;
  int count = 1;
  int begin(int block) const;  // first row of `block`; begin(count) = m
};
ProductBlocks product_blocks(int m, int n, int k);

// Counting the work of every float product, 2 m n k FLOPs each (`poslab bench` measures a
// training step's FLOPs this way, encodings' own products included). Off unless switched on;
// counting changes nothing that is computed.
void count_gemm_flops(bool on);           // on: also restarts the count from 0
std::uint64_t counted_gemm_flops();

// OpenBLAS threads per call; poslab keeps it at 1 (see parallel_multiply).
void set_blas_threads(int threads);

// The library behind multiply, as it describes itself: "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
// (openblas_get_config()). `poslab bench` prints it in its build line: a different BLAS rounds
// differently and runs at a different speed.
const char* blas_backend();

}  // namespace poslab
