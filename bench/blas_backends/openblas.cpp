#include <cblas.h>

#include "backends.hpp"

namespace bb {

void openblas_init() { openblas_set_num_threads(1); }

void openblas_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
              tb == 'T' ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::string openblas_version() { return openblas_get_config(); }

}  // namespace bb
