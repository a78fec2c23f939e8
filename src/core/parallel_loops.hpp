// The loops of a training step that are not matrix products, split over the OpenMP threads.
//
// On two cores a serial loop costs twice its time: the other core waits at the next parallel
// region. These are the element-wise and column-wise passes the layers run between their
// products (zeroing gradient buffers, residual sums, bias gradients). Each gives exactly the
// results of its serial loop, whatever the number of threads:
//   - element-wise loops compute every element by itself, in any order;
//   - column sums split the *columns* over the threads, and each column is still summed over
//     the rows in order 0, 1, ..., N-1 (splitting the rows would change the rounding).
// Inside a parallel region, or for short loops, they run serially.
#pragma once

#include <algorithm>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace poslab {

// Below this many elements a loop is not worth waking the other threads for.
inline constexpr long kParallelLoopMinElements = 1L << 18;

// dst[i] = value, i < n
template <class T>
void parallel_fill(T* dst, long n, T value) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelLoopMinElements)
  for (long i = 0; i < n; ++i) dst[i] = value;
}

// out[i] = a[i] + b[i], i < n
template <class T>
void parallel_add(const T* a, const T* b, T* out, long n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelLoopMinElements)
  for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// out[i] += a[i], i < n
template <class T>
void parallel_add_into(T* out, const T* a, long n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelLoopMinElements)
  for (long i = 0; i < n; ++i) out[i] += a[i];
}

// A row-major [N, cols] pass that accumulates into a vector of `cols` sums (a bias gradient,
// a layer norm's gain gradient): rows(n, c0, c1) handles columns [c0, c1) of row n. The
// columns are split over the threads; every thread visits the rows in order, so each sum
// adds its terms in the order of the serial loop.
template <class RowPass>
void for_column_blocks(int N, int cols, RowPass rows) {
  const bool parallel = long(N) * cols >= kParallelLoopMinElements;
#pragma omp parallel if (parallel)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
#else
    const int t = 0, threads = 1;
#endif
    // Blocks of 16 columns (one 64-byte line of floats): threads never share a cache line.
    const int blocks = (cols + 15) / 16;
    const int c0 = std::min(cols, 16 * int(long(blocks) * t / threads));
    const int c1 = std::min(cols, 16 * int(long(blocks) * (t + 1) / threads));
    if (c1 > c0)
      for (int n = 0; n < N; ++n) rows(n, c0, c1);
  }
}

// sums[c] += x[0, c] + x[1, c] + ... + x[N-1, c] for x [N, cols], row by row as the serial loop.
template <class T>
void add_column_sums(const T* x, int N, int cols, T* sums) {
  for_column_blocks(N, cols, [&](int n, int c0, int c1) {
    const T* row = x + long(n) * cols;
#pragma omp simd
    for (int c = c0; c < c1; ++c) sums[c] += row[c];
  });
}

}  // namespace poslab
