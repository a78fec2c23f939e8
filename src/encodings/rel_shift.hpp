// The "relative shift" of Transformer-XL (Dai et al. 2019, appendix B): how to turn one score per
// (query, *distance*) into one score per (query, *key*) with a pad and two reshapes, no gather.
//
// Setting. L queries, K = M + L keys (M memory rows first), causal: query i (0-based, inside the
// segment) may see key j iff j <= i + M, and the distance between them is i + M - j, between 0
// and K - 1. Term (b) + (d) of Transformer-XL needs, for every visible (i, j), a value that
// depends on i and on the distance only:
//
//   BD[i][j] = (q_i + v) . Rk[i + M - j]
//
// Computing BD cell by cell would need the vector Rk[distance] for every pair (quadratic gathers).
// Instead one multiplies every query with every one of the K distance vectors (one gemm), giving
//
//   x [L, K],  column c holds distance K-1-c   (distances K-1, K-2, ..., 0: pos_seq =
//                                               arange(klen-1, -1, -1) in the official code)
//
// and then moves each row sideways: row i must be shifted left by L-1-i columns so that the cell
// of key j lands on distance i + M - j. Every row needs a different shift, and that is what the
// trick does with pure memory layout:
//
//   1. pad one zero column on the left               -> padded [L, K+1]
//   2. reinterpret the same memory as [K+1, L]
//   3. drop the first row (L values)                 -> [K, L]
//   4. reinterpret the remaining L*K values as [L, K] -> out
//
// Steps 2-4 only move the start of the buffer by L entries: out[i][j] = flat(padded)[L + i*K + j].
// Row i of `out` therefore starts L + i*K = i*(K+1) + (L - i) entries into the padded buffer, i.e.
// at column L - i of padded row i: one column further left per row, which is exactly the
// per-row shift we wanted (padded column c' holds x column c'-1, so out[i][j] = x[i][L-1-i+j],
// whose distance is K-1-(L-1-i+j) = i + M - j).
//
// Worked example, L = 2, M = 1, K = 3. Write x[i][c] = "i:dist":
//
//   x       = [ 0:2  0:1  0:0 ]        padded = [ 0  0:2  0:1  0:0 ]
//             [ 1:2  1:1  1:0 ]                 [ 0  1:2  1:1  1:0 ]
//
//   flat(padded) = 0 0:2 | 0:1 0:0 0 1:2 1:1 1:0    (the first L = 2 entries are dropped)
//
//   out     = [ 0:1  0:0  0   ]        query 0 sees keys 0, 1 (distances 1, 0)    j <= 0 + 1
//             [ 1:2  1:1  1:0 ]        query 1 sees keys 0, 1, 2 (distances 2, 1, 0)
//
// Every visible cell holds the right distance. The cell out[0][2] (key 2 is in query 0's future)
// holds the padding zero; with more rows, cells further right hold values of the *next* row of x
// (wrong query, meaningless distance).
//
// !!! THE SHIFTED MATRIX IS ONLY CORRECT ON CELLS j <= i + M. !!!
// Every cell with j > i + M holds a zero or garbage copied from the next query's row. The trick is
// correct *only because the causal mask removes exactly those cells* before the softmax. Reusing
// it without a causal mask (bidirectional attention, an encoder, a "non-causal" flag) silently
// gives wrong scores to every future key -- a known bug of several ports of Transformer-XL. It
// also assumes contiguous positions (query i at s + i, key j at s - M + j): with any other
// positions, distances are not i + M - j and one must gather by distance instead
// (transformer_xl.cpp does so).
//
// Backward. The forward is a linear map x -> out; its transpose scatters dout back through the
// same layout: dpadded = 0, flat(dpadded)[L + i*K + j] = dout[i][j], dx[i][c] = dpadded[i][c+1].
// We scatter only the causal cells j <= i + M: the others carry garbage in the forward and must
// never carry gradient (dscores is exactly 0 there anyway, see attention.hpp). Restricted to causal
// cells the map is a permutation into x, so no two cells add into the same entry.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>

#include "core/matrix.hpp"

namespace poslab {

// Size of the padded work buffer, [L, K+1].
inline std::size_t rel_shift_padded_size(int L, int K) { return std::size_t(L) * (K + 1); }

// Step 1, in place: where x goes inside the padded buffer, [L, K] with row stride K + 1. A caller
// may write x there directly (e.g. as the C of a gemm with ldc = K + 1) and skip the copy.
template <class T>
T* rel_shift_input(T* padded) {
  return padded + 1;
}

// The same, as a matrix view: x [L, K] is the block from column 1 of padded [L, K+1].
template <class T>
MatrixView<T> rel_shift_input_view(T* padded, int L, int K) {
  return matrix(padded, L, K + 1).block(0, 1, L, K);  // data = rel_shift_input(padded)
}

// Step 1, the pad: zeroes column 0 of padded [L, K+1].
template <class T>
void rel_shift_zero_pad(T* padded, int L, int K) {
  for (int i = 0; i < L; ++i) padded[std::size_t(i) * (K + 1)] = T(0);
}

// Steps 2-4: the shifted matrix is the padded buffer seen L entries later, [L, K] with row stride
// K. No data moves. Only cells j <= i + (K - L) are meaningful (see the warning above).
template <class T>
const T* rel_shift_output(const T* padded, int L) {
  return padded + L;
}

// The whole trick with copies, for tests and readers:
//   x [L, K] (column c = distance K-1-c)  ->  out [L, K] (cell (i, j) = distance i + M - j,
//   M = K - L, valid for j <= i + M only).  padded: work buffer of rel_shift_padded_size(L, K).
template <class T>
void rel_shift(const T* x, int L, int K, T* padded, T* out) {
  assert(K >= L);
  T* in = rel_shift_input(padded);
  for (int i = 0; i < L; ++i)
    std::copy(x + std::size_t(i) * K, x + std::size_t(i + 1) * K, in + std::size_t(i) * (K + 1));
  rel_shift_zero_pad(padded, L, K);
  const T* shifted = rel_shift_output(padded, L);
  std::copy(shifted, shifted + std::size_t(L) * K, out);
}

// The transpose on causal cells. dout [L, K] (only cells j <= i + M are read, M = K - L) ->
// dpadded [L, K+1] (overwritten; the gradient of x is rel_shift_input(dpadded), row stride K+1).
template <class T>
void rel_shift_backward(const T* dout, int L, int K, T* dpadded) {
  assert(K >= L);
  const int M = K - L;
  std::fill(dpadded, dpadded + rel_shift_padded_size(L, K), T(0));
  T* flat = dpadded + L;  // same offset as rel_shift_output
  for (int i = 0; i < L; ++i) {
    const int last = std::min(K - 1, i + M);
    std::copy(dout + std::size_t(i) * K, dout + std::size_t(i) * K + last + 1,
              flat + std::size_t(i) * K);
  }
}

// rel_shift_backward followed by a copy of the gradient out of the padded layout: dx [L, K] +=.
template <class T>
void rel_shift_backward(const T* dout, int L, int K, T* dpadded, T* dx) {
  rel_shift_backward(dout, L, K, dpadded);
  const T* g = rel_shift_input(dpadded);
  for (int i = 0; i < L; ++i)
    for (int c = 0; c < K; ++c) dx[std::size_t(i) * K + c] += g[std::size_t(i) * (K + 1) + c];
}

}  // namespace poslab
