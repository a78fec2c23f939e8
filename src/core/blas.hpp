// The one door to BLAS. Matrices are row-major; a "matrix" may be a column slice of a wider
// buffer (a head inside [rows, d_model]), which is why every call takes leading dimensions.
//
// xtensor-blas declares its own cblas prototypes, so <cblas.h> is included only in blas.cpp.
#pragma once

namespace poslab {

enum class Trans { No, Yes };

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C[m, n]
// float calls sgemm, double (used by the gradient checks) calls dgemm.
template <class T>
void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

// Threads OpenBLAS may use for one call (0 = leave OpenBLAS' default).
void set_blas_threads(int threads);
int blas_threads();

}  // namespace poslab
