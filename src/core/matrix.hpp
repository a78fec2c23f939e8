// A matrix as BLAS sees it: a pointer, a shape and a row stride. No data of its own.
//
//   MatrixView<T>        rows x cols, element (i, j) at data[i * ld + j]     (row-major)
//   ConstMatrixView<T>   the same, read-only (= MatrixView<const T>)
//
// The row stride ("leading dimension", ld) is what lets a view be a piece of a wider buffer
// without a copy. The two pieces poslab relies on:
//
//   a head           q [B, L, H d_h] seen as [B L, d]; head h of batch row b is the block
//                    rows [b L, (b+1) L), columns [h d_h, (h+1) d_h): [L, d_h], row stride d
//   Transformer-XL   BD [L, K] written inside the padded buffer [L, K + 1], from column 1:
//                    row stride K + 1 (encodings/rel_shift.hpp)
//
// Getting such a stride wrong does not crash: BLAS reads the wrong numbers. So a view is built
// only by the named constructors below, every sub-view is cut from its parent with block(),
// which inherits the parent's stride and checks that the block lies inside it, and multiply()
// (core/blas.hpp) checks that the three shapes of a product agree:
//
//   matrix(p, rows, cols)           contiguous: ld = cols
//   strided(p, rows, cols, ld)      a given row stride (ld >= cols)
//   matrix(x)                       an xt::xtensor [.., .., n] as [product of the others, n]
//   row_vector(p, n), column_vector(p, n)     [1, n] and [n, 1]
//   A.block(r, c, rows, cols), A.row_block(r, rows), A.column_block(c, cols)
//   A.t()                           the transpose: a flag, no data moves; rows() and cols()
//                                   are then those of A^T, the operand the product sees
//
// The checks are always on, in every build type: each is a handful of integer comparisons next
// to a BLAS call of a microsecond or more, and a training step makes a few hundred such calls.
// A failed check throws std::logic_error naming the shapes. (Inside an OpenMP parallel region an
// exception cannot leave the region: the program then ends through std::terminate, which prints
// the same message.)
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <xtensor/xtensor.hpp>

namespace poslab {

namespace matrix_detail {
inline void append(std::string& m, const std::string& s) { m += s; }
inline void append(std::string& m, const char* s) { m += s; }
inline void append(std::string& m, int n) { m += std::to_string(n); }
// Throws std::logic_error with the parts joined. Out of line and cold: the checks that call it
// stay a few comparisons on the path that is taken.
template <class... Parts>
[[noreturn, gnu::cold, gnu::noinline]] void fail(const Parts&... parts) {
  std::string message;
  (append(message, parts), ...);
  throw std::logic_error(message);
}
}  // namespace matrix_detail

template <class T>
class MatrixView {
 public:
  MatrixView() = default;  // the empty 0 x 0 matrix

  // rows x cols, row i at data + i * ld. Prefer the named constructors below.
  MatrixView(T* data, int rows, int cols, int ld)
      : data_(data), rows_(rows), cols_(cols), ld_(ld) {
    if (rows < 0 || cols < 0)
      matrix_detail::fail("matrix view: negative shape ", shape_text(rows, cols));
    if (ld < cols || ld < 1)
      matrix_detail::fail("matrix view ", shape_text(rows, cols), ": row stride ", ld,
                          " is smaller than the ", cols, " columns of a row (rows would overlap)");
  }

  // A writable view is also a read-only one.
  template <class U = T, class = std::enable_if_t<!std::is_const_v<U>>>
  operator MatrixView<const U>() const {
    MatrixView<const U> v;
    v.data_ = data_;
    v.rows_ = rows_;
    v.cols_ = cols_;
    v.ld_ = ld_;
    v.transposed_ = transposed_;
    return v;
  }

  // The shape of the operand a product sees: that of A^T for a transposed view.
  int rows() const { return transposed_ ? cols_ : rows_; }
  int cols() const { return transposed_ ? rows_ : cols_; }
  // How the memory is laid out: the stored matrix is [stored_rows, stored_cols], row stride ld.
  int stored_rows() const { return rows_; }
  int stored_cols() const { return cols_; }
  int ld() const { return ld_; }
  bool transposed() const { return transposed_; }
  T* data() const { return data_; }

  // A^T: the same memory, read the other way.
  MatrixView t() const {
    MatrixView v = *this;
    v.transposed_ = !transposed_;
    return v;
  }

  // Element (i, j) of the operand (of A^T for a transposed view). For tests and references;
  // hot loops use row() of an untransposed view.
  T& operator()(int i, int j) const {
    return transposed_ ? data_[long(j) * ld_ + i] : data_[long(i) * ld_ + j];
  }
  // Stored row i.
  T* row(int i) const { return data_ + long(i) * ld_; }

  // The block rows [r, r + rows), columns [c, c + cols) of an untransposed view: the same row
  // stride, checked to lie inside this view.
  MatrixView block(int r, int c, int rows, int cols) const {
    if (transposed_)
      matrix_detail::fail("matrix view: block() of a transposed view; cut the block first");
    if (r < 0 || c < 0 || rows < 0 || cols < 0 || r + rows > rows_ || c + cols > cols_)
      matrix_detail::fail("matrix view: block of ", shape_text(rows, cols), " at (", r, ", ", c,
                          ") does not fit in ", shape_text(rows_, cols_));
    MatrixView v = *this;
    v.data_ = data_ + long(r) * ld_ + c;
    v.rows_ = rows;
    v.cols_ = cols;
    return v;
  }
  MatrixView column_block(int c, int cols) const { return block(0, c, rows_, cols); }

  // Rows [r, r + rows) of the operand: of A, or, for a transposed view, columns of the stored
  // matrix (rows of A^T). parallel_multiply splits a product this way.
  MatrixView row_block(int r, int rows) const {
    return transposed_ ? t().block(0, r, rows_, rows).t() : block(r, 0, rows, cols_);
  }

  // "[4 x 8]", "[8 x 4]^T" (the stored shape, marked when it is read transposed).
  std::string shape_text() const {
    std::string s = shape_text(rows_, cols_);
    if (transposed_) s += "^T";
    if (ld_ != cols_) {
      s += " (row stride ";
      s += std::to_string(ld_);
      s += ")";
    }
    return s;
  }

 private:
  template <class U>
  friend class MatrixView;

  static std::string shape_text(int rows, int cols) {
    std::string s = "[";
    s += std::to_string(rows);
    s += " x ";
    s += std::to_string(cols);
    s += "]";
    return s;
  }

  T* data_ = nullptr;
  int rows_ = 0, cols_ = 0, ld_ = 1;
  bool transposed_ = false;
};

template <class T>
using ConstMatrixView = MatrixView<const T>;

// ---- Named constructors ----

// [rows, cols], contiguous rows.
template <class T>
MatrixView<T> matrix(T* data, int rows, int cols) {
  return MatrixView<T>(data, rows, cols, cols > 0 ? cols : 1);  // BLAS wants ld >= 1
}

// [rows, cols], row i at data + i * ld.
template <class T>
MatrixView<T> strided(T* data, int rows, int cols, int ld) {
  return MatrixView<T>(data, rows, cols, ld);
}

// A vector as a one-row [1, n] or one-column [n, 1] matrix.
template <class T>
MatrixView<T> row_vector(T* data, int n) {
  return MatrixView<T>(data, 1, n, n);
}
template <class T>
MatrixView<T> column_vector(T* data, int n) {
  return MatrixView<T>(data, n, 1, 1);
}

// A tensor [n_0, ..., n_{N-2}, n_{N-1}] as the matrix [n_0 ... n_{N-2}, n_{N-1}]: e.g.
// q [B, L, d] -> [B L, d], the layout the projections and heads are cut from.
template <class E, std::size_t N>
auto matrix_of_tensor(E* data, const std::array<std::size_t, N>& shape) {
  static_assert(N >= 2, "a matrix view needs a tensor of rank 2 or more");
  std::size_t rows = 1;
  for (std::size_t a = 0; a + 1 < N; ++a) rows *= shape[a];
  return matrix(data, int(rows), int(shape[N - 1]));
}
template <class T, std::size_t N>
MatrixView<T> matrix(xt::xtensor<T, N>& x) {
  return matrix_of_tensor<T, N>(x.data(), x.shape());
}
template <class T, std::size_t N>
MatrixView<const T> matrix(const xt::xtensor<T, N>& x) {
  return matrix_of_tensor<const T, N>(x.data(), x.shape());
}

// C = op(A) op(B) needs op(A) [m, k], op(B) [k, n], C [m, n] (C itself not transposed).
template <class T>
void check_product_shapes(MatrixView<T> C, std::type_identity_t<ConstMatrixView<T>> A,
                          std::type_identity_t<ConstMatrixView<T>> B) {
  const bool ok = !C.transposed() && A.rows() == C.rows() && A.cols() == B.rows() &&
                  B.cols() == C.cols();
  if (!ok)
    matrix_detail::fail("matrix product C = op(A) op(B) with C ", C.shape_text(), ", A ",
                        A.shape_text(), ", B ", B.shape_text(),
                        ": needs op(A) [m x k], op(B) [k x n], C [m x n]");
}

}  // namespace poslab
