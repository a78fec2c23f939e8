#include "core/blas.hpp"

#include <omp.h>

#include <cblas.h>

#include <algorithm>
#include <atomic>

namespace poslab {

namespace {

std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_flops{0};

template <class T>
CBLAS_TRANSPOSE op(MatrixView<T> x) {
  return x.transposed() ? CblasTrans : CblasNoTrans;
}

// The positional call, C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, read off the views:
// m, n from C, k from op(A); each operand's pointer and row stride as stored.
void gemm(MatrixView<float> C, ConstMatrixView<float> A, ConstMatrixView<float> B, float alpha,
          float beta) {
  const int m = C.rows(), n = C.cols(), k = A.cols();
  if (g_counting.load(std::memory_order_relaxed))
    g_flops.fetch_add(2ULL * std::uint64_t(m) * std::uint64_t(n) * std::uint64_t(k),
                      std::memory_order_relaxed);
  cblas_sgemm(CblasRowMajor, op(A), op(B), m, n, k, alpha, A.data(), A.ld(), B.data(), B.ld(),
              beta, C.data(), C.ld());
}

void gemm(MatrixView<double> C, ConstMatrixView<double> A, ConstMatrixView<double> B,
          double alpha, double beta) {
  const int m = C.rows(), n = C.cols(), k = A.cols();
  cblas_dgemm(CblasRowMajor, op(A), op(B), m, n, k, alpha, A.data(), A.ld(), B.data(), B.ld(),
              beta, C.data(), C.ld());
}

}  // namespace

void count_gemm_flops(bool on) {
  g_flops.store(0);
  g_counting.store(on);
}

std::uint64_t counted_gemm_flops() { return g_flops.load(); }

template <class T>
void multiply(MatrixView<T> C, std::type_identity_t<ConstMatrixView<T>> A,
              std::type_identity_t<ConstMatrixView<T>> B, std::type_identity_t<T> alpha,
              std::type_identity_t<T> beta) {
  check_product_shapes(C, A, B);
  gemm(C, A, B, alpha, beta);
}

// The fixed decomposition of C's rows into blocks (ProductBlocks in blas.hpp). Chosen from the
// shape alone, never from the thread count: every thread count makes the same BLAS calls on the
// same blocks, so each element of C is computed by the same kernel call, whichever thread runs it.
ProductBlocks product_blocks(int m, int n, int k) {
  ProductBlocks blocks;
  blocks.m = m;
  // A block per 2^23 multiply-adds: below that a call is too short to share (and each call
  // repacks op(B)). Measured (results/bench/product_blocks.csv): with a block per 32 rows of any
  // product over 64^3, one thread at the studies' size (width 64) ran 9% slower than one call;
  // with 2^23, the reference size's 128 x 128 products over 1,024 rows make 2 blocks (what 2
  // threads made before) and the studies' size's are mostly one call.
  const double work = double(m) * n * k;
  const int by_work = int(std::min(work / double(1 << 23), double(ProductBlocks::kMaxBlocks)));
  blocks.count = std::clamp(std::min(by_work, m / ProductBlocks::kMinRows), 1, ProductBlocks::kMaxBlocks);
  return blocks;
}

int ProductBlocks::begin(int b) const {
  if (b >= count) return m;
  // Block starts at multiples of kAlign rows (OpenBLAS' register tiles stay whole); the last
  // block ends at m.
  const long even = long(m) * b / count;
  return int(even - even % kAlign);
}

template <class T>
void parallel_multiply(MatrixView<T> C, std::type_identity_t<ConstMatrixView<T>> A,
                       std::type_identity_t<ConstMatrixView<T>> B, std::type_identity_t<T> alpha,
                       std::type_identity_t<T> beta) {
  check_product_shapes(C, A, B);
  const ProductBlocks blocks = product_blocks(C.rows(), C.cols(), A.cols());
  if (blocks.count == 1) {
    gemm(C, A, B, alpha, beta);
    return;
  }
  // Rows [begin, end) of C and of op(A) (columns of the stored A when it is transposed): one
  // single-threaded sgemm per block. The threads only decide who computes which block; inside
  // another parallel region (or with one thread) one thread does them all, in the same calls.
  const bool parallel = !omp_in_parallel() && omp_get_max_threads() > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int b = 0; b < blocks.count; ++b) {
    const int begin = blocks.begin(b), end = blocks.begin(b + 1);
    if (end > begin)
      gemm(C.row_block(begin, end - begin), A.row_block(begin, end - begin), B, alpha, beta);
  }
}

template void multiply<float>(MatrixView<float>, ConstMatrixView<float>, ConstMatrixView<float>,
                              float, float);
template void multiply<double>(MatrixView<double>, ConstMatrixView<double>,
                               ConstMatrixView<double>, double, double);
template void parallel_multiply<float>(MatrixView<float>, ConstMatrixView<float>,
                                       ConstMatrixView<float>, float, float);
template void parallel_multiply<double>(MatrixView<double>, ConstMatrixView<double>,
                                        ConstMatrixView<double>, double, double);

void set_blas_threads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

const char* blas_backend() { return openblas_get_config(); }

}  // namespace poslab
