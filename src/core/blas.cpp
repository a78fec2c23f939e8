#include "core/blas.hpp"

#include <omp.h>

#include <cblas.h>

#include <atomic>

namespace poslab {

namespace {
CBLAS_TRANSPOSE to_cblas(Trans t) { return t == Trans::Yes ? CblasTrans : CblasNoTrans; }

std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_flops{0};
}  // namespace

void count_gemm_flops(bool on) {
  g_flops.store(0);
  g_counting.store(on);
}

std::uint64_t counted_gemm_flops() { return g_flops.load(); }

template <>
void gemm<float>(Trans ta, Trans tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  if (g_counting.load(std::memory_order_relaxed))
    g_flops.fetch_add(2ULL * std::uint64_t(m) * std::uint64_t(n) * std::uint64_t(k),
                      std::memory_order_relaxed);
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <>
void gemm<double>(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* a, int lda,
                  const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <class T>
void parallel_gemm(Trans ta, Trans tb, int m, int n, int k, T alpha, const T* a, int lda,
                   const T* b, int ldb, T beta, T* c, int ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool small = double(m) * n * k < 64.0 * 64 * 64;
  if (threads == 1 || small || m < 2 * threads) {
    gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Rows [begin, end) of C, i.e. of op(A): rows of A, or columns of A when it is transposed.
    const int t = omp_get_thread_num();
    const int begin = int(long(m) * t / threads), end = int(long(m) * (t + 1) / threads);
    const T* a_rows = ta == Trans::No ? a + long(begin) * lda : a + begin;
    if (end > begin)
      gemm<T>(ta, tb, end - begin, n, k, alpha, a_rows, lda, b, ldb, beta, c + long(begin) * ldc,
              ldc);
  }
}

template void parallel_gemm<float>(Trans, Trans, int, int, int, float, const float*, int,
                                   const float*, int, float, float*, int);
template void parallel_gemm<double>(Trans, Trans, int, int, int, double, const double*, int,
                                    const double*, int, double, double*, int);

void set_blas_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}


}  // namespace poslab
