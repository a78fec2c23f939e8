// libxsmm 1.17 (column-major, like Fortran BLAS). A row-major product is the column-major
// product of the transposes: C^T[n, m] = op(B)^T op(A)^T, that is the column-major call with
// the operands swapped, m and n swapped, and the same transpose letters and strides.
#include <libxsmm.h>

#include <cblas.h>

#include "backends.hpp"

namespace bb {

void xsmm_init() { libxsmm_init(); }

void xsmm_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
  const libxsmm_blasint M = n, N = m, K = k, LDA = ldb, LDB = lda, LDC = ldc;
  libxsmm_sgemm(&tb, &ta, &M, &N, &K, &alpha, B, &LDA, A, &LDB, &beta, C, &LDC);
}

namespace {
int flags_of(char ta, char tb) {
  return (tb == 'T' ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (ta == 'T' ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
}
}  // namespace

void xsmm_jit_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc) {
  const libxsmm_blasint LDA = ldb, LDB = lda, LDC = ldc;
  const int flags = flags_of(ta, tb);
  const libxsmm_smmfunction kernel =
      libxsmm_smmdispatch(n, m, k, &LDA, &LDB, &LDC, &alpha, &beta, &flags, nullptr);
  if (kernel)
    kernel(B, A, C);
  else
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
                tb == 'T' ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

bool xsmm_uses_jit(char ta, char tb, int m, int n, int k, float alpha, int lda, int ldb, int ldc,
                   float beta, bool any_size) {
  if (!any_size && double(m) * n * k > double(LIBXSMM_MAX_MNK)) return false;
  const libxsmm_blasint LDA = ldb, LDB = lda, LDC = ldc;
  const int flags = flags_of(ta, tb);
  return libxsmm_smmdispatch(n, m, k, &LDA, &LDB, &LDC, &alpha, &beta, &flags, nullptr) != nullptr;
}

std::string xsmm_version() {
  return std::string(LIBXSMM_VERSION) + " (target " + libxsmm_get_target_arch() + ")";
}

}  // namespace bb
