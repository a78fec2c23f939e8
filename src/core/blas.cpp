#include "core/blas.hpp"

#include <cblas.h>

namespace poslab {

namespace {
CBLAS_TRANSPOSE to_cblas(Trans t) { return t == Trans::Yes ? CblasTrans : CblasNoTrans; }
}  // namespace

template <>
void gemm<float>(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <>
void gemm<double>(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                  const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void set_blas_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

int blas_threads() { return openblas_get_num_threads(); }

}  // namespace poslab
