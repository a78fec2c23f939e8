// Sums of long rows, added in their serial order, several rows at a time.
//
// A relative encoding's backward pass sums, on every query row, the gradient of all the keys
// beyond its clip distance into one table entry (Shaw's bucket k, DeBERTa's end row):
//
//   s = 0;  for (j = begin; j < end; ++j) s += x[j];
//
// Each add waits for the one before it (about 4 cycles), so one such loop keeps the adder a
// quarter busy. Splitting it into partial sums would be faster but would round differently, and
// poslab's results do not depend on how the code is scheduled. So instead R rows advance
// together, R independent chains, each of them still adding its terms in the serial order: the
// sums are bit-identical to the plain loop's, R times as many adds are in flight.
#pragma once

#include <algorithm>

namespace poslab {

// sums[r] = x[r][begin[r]] + x[r][begin[r] + 1] + ... + x[r][end[r] - 1], from 0, left to right,
// for r < R (an empty range gives 0).
template <int R, class T>
void ordered_row_sums(const T* const (&x)[R], const int (&begin)[R], const int (&end)[R],
                      T (&sums)[R]) {
  // The columns every row covers, [shared_begin, shared_end); each row's own terms before and
  // after them are added alone, so every row keeps its order.
  int shared_begin = begin[0], shared_end = end[0];
  for (int r = 1; r < R; ++r) {
    shared_begin = std::max(shared_begin, begin[r]);
    shared_end = std::min(shared_end, end[r]);
  }
  T s[R];
  for (int r = 0; r < R; ++r) s[r] = T(0);
  if (shared_begin >= shared_end) {  // no common columns: one row at a time
    for (int r = 0; r < R; ++r)
      for (int j = begin[r]; j < end[r]; ++j) s[r] += x[r][j];
  } else {
    for (int r = 0; r < R; ++r)
      for (int j = begin[r]; j < shared_begin; ++j) s[r] += x[r][j];
    for (int j = shared_begin; j < shared_end; ++j)
      for (int r = 0; r < R; ++r) s[r] += x[r][j];  // R chains side by side
    for (int r = 0; r < R; ++r)
      for (int j = shared_end; j < end[r]; ++j) s[r] += x[r][j];
  }
  for (int r = 0; r < R; ++r) sums[r] = s[r];
}

// dots[r] = x[r][0] y[r][0] + x[r][1] y[r][1] + ... + x[r][n-1] y[r][n-1], from 0, left to
// right, for r < R: the plain loop `s = 0; for (j = 0; j < n; ++j) s += x[j] * y[j];` R times
// over, its chains side by side (a row-wise softmax backward: sum_j P_ij dP_ij).
template <int R, class T>
void ordered_row_dots(const T* const (&x)[R], const T* const (&y)[R], int n, T (&dots)[R]) {
  T s[R];
  for (int r = 0; r < R; ++r) s[r] = T(0);
  for (int j = 0; j < n; ++j)
    for (int r = 0; r < R; ++r) s[r] += x[r][j] * y[r][j];
  for (int r = 0; r < R; ++r) dots[r] = s[r];
}

}  // namespace poslab
