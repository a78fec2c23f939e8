// Matrix views and the one door to BLAS (core/matrix.hpp, core/blas.hpp):
//   1. multiply and parallel_multiply equal a naive triple loop for every combination of
//      transposed operands, with every operand a strided block of a wider buffer, and they
//      write nothing outside C;
//   2. a wrong shape or a wrong row stride is caught before BLAS sees it, in this build type
//      (the checks are on in every build, Release included): a stride smaller than a row, a head
//      cut outside its parent, a forgotten transpose, a C of the wrong shape, Transformer-XL's
//      padded buffer cut one column too wide;
//   3. the FLOP counter counts the products made through the views.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/blas.hpp"
#include "core/matrix.hpp"

using namespace poslab;

namespace {

// Deterministic, distinct, exactly representable values.
template <class T>
std::vector<T> filled(std::size_t n, int seed) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = T(int((i * 7 + seed * 13) % 23) - 11) / T(8);
  return v;
}

// C = alpha op(A) op(B) + beta C, element by element through the views' operator().
template <class T>
void naive_multiply(MatrixView<T> C, ConstMatrixView<T> A, ConstMatrixView<T> B, T alpha,
                    T beta) {
  for (int i = 0; i < C.rows(); ++i)
    for (int j = 0; j < C.cols(); ++j) {
      T sum = 0;
      for (int p = 0; p < A.cols(); ++p) sum += A(i, p) * B(p, j);
      C(i, j) = alpha * sum + beta * C(i, j);
    }
}

// op(A) [m, k], op(B) [k, n], C [m, n], each a block of a wider buffer (row stride larger than
// its columns, not starting at the buffer's first element).
template <class T>
void check_against_naive(int m, int n, int k, bool ta, bool tb, bool parallel, T tolerance) {
  const int pad = 3;
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  std::vector<T> a = filled<T>(std::size_t(a_rows + pad) * (a_cols + pad), 1);
  std::vector<T> b = filled<T>(std::size_t(b_rows + pad) * (b_cols + pad), 2);
  std::vector<T> c = filled<T>(std::size_t(m + pad) * (n + pad), 3);
  std::vector<T> expected = c;

  auto A = matrix(a.data(), a_rows + pad, a_cols + pad).block(1, 2, a_rows, a_cols);
  auto B = matrix(b.data(), b_rows + pad, b_cols + pad).block(2, 1, b_rows, b_cols);
  const auto opA = ta ? A.t() : A, opB = tb ? B.t() : B;
  auto C = matrix(c.data(), m + pad, n + pad).block(1, 1, m, n);
  auto E = matrix(expected.data(), m + pad, n + pad).block(1, 1, m, n);
  REQUIRE(opA.rows() == m);
  REQUIRE(opA.cols() == k);

  const T alpha = T(0.75), beta = T(-0.5);
  if (parallel)
    parallel_multiply(C, opA, opB, alpha, beta);
  else
    multiply(C, opA, opB, alpha, beta);
  naive_multiply<T>(E, opA, opB, alpha, beta);
  // Every element of the buffer: inside C the product, outside C untouched.
  for (std::size_t e = 0; e < c.size(); ++e) REQUIRE(std::abs(c[e] - expected[e]) <= tolerance);
}

}  // namespace

TEST_CASE("multiply through views equals the naive triple loop, transposed and strided",
          "[matrix]") {
  const bool ta = GENERATE(false, true), tb = GENERATE(false, true);
  SECTION("double, small") { check_against_naive<double>(5, 7, 4, ta, tb, false, 1e-12); }
  SECTION("float, a row vector times a matrix") {
    check_against_naive<float>(1, 9, 6, ta, tb, false, 1e-5f);
  }
  // Large enough for parallel_multiply to split the rows of C over the threads (m n k >= 64^3).
  SECTION("parallel, double") { check_against_naive<double>(96, 80, 48, ta, tb, true, 1e-10); }
  SECTION("parallel, float") { check_against_naive<float>(96, 80, 48, ta, tb, true, 1e-3f); }
}

TEST_CASE("a transposed view reads the same memory the other way", "[matrix]") {
  std::vector<double> x = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const auto X = matrix(x.data(), 2, 3);
  const auto Xt = X.t();
  CHECK(Xt.rows() == 3);
  CHECK(Xt.cols() == 2);
  CHECK(Xt.ld() == 3);
  CHECK(Xt(2, 1) == X(1, 2));
  CHECK(Xt.t().transposed() == false);
  // Rows of A^T are columns of A: row_block of a transposed view.
  const auto rows = Xt.row_block(1, 2);  // rows 1, 2 of A^T = columns 1, 2 of A
  CHECK(rows.rows() == 2);
  CHECK(rows.cols() == 2);
  CHECK(rows(0, 0) == 2);
  CHECK(rows(1, 1) == 6);
}

TEST_CASE("a wrong shape or row stride is caught before BLAS sees it", "[matrix]") {
  // Attention's layout: q [B, L, H d_h] as [B L, d]; head h of batch row b is a block of it.
  const int B = 2, L = 4, K = 6, H = 3, dh = 5, d = H * dh;
  std::vector<float> q(std::size_t(B) * L * d, 1.0f), k(std::size_t(B) * K * d, 1.0f);
  std::vector<float> s(std::size_t(L) * K, 0.0f);
  const auto q_all = matrix(q.data(), B * L, d), k_all = matrix(k.data(), B * K, d);
  const auto q_bh = q_all.block(L, 2 * dh, L, dh);  // b = 1, h = 2: [L, d_h], row stride d
  const auto k_bh = k_all.block(K, 2 * dh, K, dh);
  const auto S = matrix(s.data(), L, K);
  REQUIRE(q_bh.ld() == d);
  REQUIRE_NOTHROW(multiply(S, q_bh, k_bh.t()));  // the right call

  SECTION("a row stride smaller than a row: the head's stride written as d_h of a wider row") {
    CHECK_THROWS_AS(strided(q.data(), B * L, d, dh), std::logic_error);
    CHECK_THROWS_WITH(strided(q.data(), B * L, d, dh),
                      Catch::Contains("row stride 5") && Catch::Contains("15 columns"));
  }
  SECTION("a head cut outside its parent: head index H, or batch row B") {
    CHECK_THROWS_AS(q_all.block(L, H * dh, L, dh), std::logic_error);
    CHECK_THROWS_AS(q_all.block(B * L, 0, L, dh), std::logic_error);
    CHECK_THROWS_WITH(q_all.block(L, H * dh, L, dh), Catch::Contains("does not fit in [8 x 15]"));
  }
  SECTION("a forgotten transpose: S = q_h k_h instead of q_h k_h^T") {
    CHECK_THROWS_AS(multiply(S, q_bh, k_bh), std::logic_error);
    CHECK_THROWS_WITH(multiply(S, q_bh, k_bh),
                      Catch::Contains("C [4 x 6]") &&
                          Catch::Contains("A [4 x 5] (row stride 15)") &&
                          Catch::Contains("B [6 x 5] (row stride 15)"));
  }
  SECTION("a C of the wrong shape") {
    CHECK_THROWS_AS(multiply(matrix(s.data(), L, K - 1), q_bh, k_bh.t()), std::logic_error);
    CHECK_THROWS_AS(parallel_multiply(matrix(s.data(), K, L), q_bh, k_bh.t()), std::logic_error);
    CHECK_THROWS_AS(multiply(S.t(), k_bh, q_bh.t()), std::logic_error);  // C cannot be transposed
  }
  SECTION("Transformer-XL's padded buffer [L, K+1]: BD [L, K] fits from column 1, K + 1 does not") {
    std::vector<float> pad(std::size_t(L) * (K + 1), 0.0f);
    const auto padded = matrix(pad.data(), L, K + 1);
    const auto BD = padded.block(0, 1, L, K);
    CHECK(BD.ld() == K + 1);
    CHECK(BD.data() == pad.data() + 1);
    CHECK_NOTHROW(multiply(BD, q_bh, k_bh.t()));
    CHECK_THROWS_AS(padded.block(0, 1, L, K + 1), std::logic_error);
  }
  SECTION("a block of a transposed view is refused (cut the block first)") {
    CHECK_THROWS_AS(q_all.t().block(0, 0, 2, 2), std::logic_error);
  }
  SECTION("a negative shape") { CHECK_THROWS_AS(matrix(q.data(), -1, d), std::logic_error); }
  // Nothing was written by the refused calls.
  for (float x : s) CHECK(x == float(dh));
}

TEST_CASE("the FLOP counter counts products made through views", "[matrix][flops]") {
  std::vector<float> a(6 * 4, 1.0f), b(4 * 5, 1.0f), c(6 * 5, 0.0f);
  count_gemm_flops(true);
  multiply(matrix(c.data(), 6, 5), matrix(a.data(), 6, 4), matrix(b.data(), 4, 5));
  parallel_multiply(matrix(c.data(), 5, 6), matrix(b.data(), 4, 5).t(),
                    matrix(a.data(), 6, 4).t());
  CHECK(counted_gemm_flops() == 2 * (2ULL * 6 * 5 * 4));
  count_gemm_flops(false);
  CHECK(c[0] == 4.0f);
}
