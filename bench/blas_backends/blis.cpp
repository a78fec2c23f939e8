// BLIS through its typed API (bli_sgemm): row and column strides per operand, so row-major and
// transposes are strides, no flag and no cblas symbol (those would clash with OpenBLAS's).
#include <blis.h>

#include "backends.hpp"

namespace bb {

void blis_init() { bli_thread_set_num_threads(1); }

void blis_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
  // op(A)(i, j) = A[i lda + j] (not transposed) or A[j lda + i] (transposed).
  const inc_t rsa = ta == 'T' ? 1 : lda, csa = ta == 'T' ? lda : 1;
  const inc_t rsb = tb == 'T' ? 1 : ldb, csb = tb == 'T' ? ldb : 1;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(A), rsa, csa,
            const_cast<float*>(B), rsb, csb, &beta, C, ldc, 1);
}

std::string blis_version() { return bli_info_get_version_str(); }

}  // namespace bb
