// The one door to BLAS. Matrices are row-major; a "matrix" may be a column slice of a wider
// buffer (a head inside [rows, d_model]), which is why every call takes leading dimensions.
//
// xtensor-blas declares its own cblas prototypes, so <cblas.h> is included only in blas.cpp.
#pragma once

#include <cstdint>

namespace poslab {

enum class Trans { No, Yes };

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C[m, n]
// float calls sgemm, double (used by the gradient checks) calls dgemm.
template <class T>
void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

// The same product, with the rows of C split across the OpenMP threads (each thread one
// sgemm on its block of rows). poslab runs OpenBLAS single-threaded and does all threading with
// OpenMP: two thread pools on two cores (OpenMP spinning while OpenBLAS' pthreads wait for a
// core) cost a factor of 4 in training speed here. Inside a parallel region, or for small
// products, this is a plain gemm.
template <class T>
void parallel_gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a,
                   int lda, const T* b, int ldb, T beta, T* c, int ldc);

// Counting the work of every float gemm, 2 m n k FLOPs each (`poslab bench` measures a training
// step's FLOPs this way, encodings' own products included). Off unless switched on; counting
// changes nothing that is computed.
void count_gemm_flops(bool on);           // on: also restarts the count from 0
std::uint64_t counted_gemm_flops();

// OpenBLAS threads per call; poslab keeps it at 1 (see parallel_gemm).
void set_blas_threads(int threads);

}  // namespace poslab
