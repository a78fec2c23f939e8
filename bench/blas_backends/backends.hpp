// One row-major sgemm, C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, per backend. Each
// backend lives in its own file (blis.h and OpenBLAS's cblas.h both declare the cblas_* API).
#pragma once

#include <string>

namespace bb {

// ta, tb: 'N' or 'T'; lda, ldb, ldc: row strides of the matrices as stored.
using Gemm = void (*)(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
                      const float* B, int ldb, float beta, float* C, int ldc);

void openblas_init();
void openblas_gemm(char, char, int, int, int, float, const float*, int, const float*, int, float,
                   float*, int);
std::string openblas_version();

void blis_init();
void blis_gemm(char, char, int, int, int, float, const float*, int, const float*, int, float,
               float*, int);
std::string blis_version();

void xsmm_init();
// libxsmm_sgemm: the library's own policy (a JIT kernel when m n k <= LIBXSMM_MAX_MNK and one
// can be made, else its BLAS fallback, which here is OpenBLAS's sgemm_).
void xsmm_gemm(char, char, int, int, int, float, const float*, int, const float*, int, float,
               float*, int);
// libxsmm_smmdispatch at any size; OpenBLAS where it returns no kernel.
void xsmm_jit_gemm(char, char, int, int, int, float, const float*, int, const float*, int, float,
                   float*, int);
// Whether xsmm_gemm / xsmm_jit_gemm run a JIT kernel for this call (not OpenBLAS).
bool xsmm_uses_jit(char, char, int, int, int, float, int, int, int, float, bool any_size);
std::string xsmm_version();

}  // namespace bb
