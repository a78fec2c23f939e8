// The shared machinery of the scalar-bias encodings (T5, KERPLE, FIRE): a bias per head that
// depends on the (query, key) pair only through a small set of table entries.
//
//   scores[b, h, i, j] += tab[h, index_ij]          on visible cells
//
// The idea. Every scalar-bias scheme is a function of the distance per head,
//
//   S_ij = q_i . k_j / sqrt(d_h)  +  f_h(q_pos[i] - k_pos[j])
//
// (T5: a learned bucket table; KERPLE: -r1 log(1 + r2 |d|); FIRE: an MLP of a normalised
// distance). With contiguous positions a segment of L queries over K keys has only K distinct
// distances on its visible cells (0 .. K-1) against B H L K cells, so f is computed once per
// distance of the range [dmin, dmax] into a table tab[H, D] and then gathered:
//
//   dist_ij  = q_pos[i] - k_pos[j] on visible cells, D distinct values in [dmin, dmax]
//   index_ij = dist_ij - dmin                                          [L, K], -1 on masked cells
//   tab[h, d] = f_h(dmin + d)                                          [H, D]   (the encoding)
//   scores[b, h, i, j] += tab[h, index_ij]                             gather, every b
//
// Backward is the transpose, a scatter-sum:
//   dtab[h, n] = sum_{b, i, j : index_ij = n} dS[b, h, i, j]
// which the encoding then maps into its own parameters (dtab -> buckets, r1 and r2, the MLP).
// O(B H L K) adds either way, the same order as the mask itself. The bias does not depend on b:
// each (h, i) row is gathered (or summed over b) once and shared by the batch rows with
// contiguous, vectorised loops.
//
// The table holds every head; a call that covers heads h0 .. h0 + Hc - 1 only (evaluation in
// chunks of heads, encoding.hpp) gathers their rows into its scores [B, Hc, L, K].
//
// An entry need not be a plain distance: FIRE gives each query beyond its threshold its own
// entries (the bias also depends on q_pos[i] there), so it fills the index itself (clear_index)
// and uses the same gather and scatter. The encoding owns the equation; this owns only the
// indexing, the table and the buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "core/buffer.hpp"
#include "encodings/encoding.hpp"
#include "encodings/geometry_key.hpp"

namespace poslab {

template <class T>
class DistanceBias {
 public:
  // index_ij = q_pos[i] - k_pos[j] - dmin on visible cells, -1 on masked ones. Returns D =
  // dmax - dmin + 1, the number of table entries; entry d is the distance distance(d). `who`
  // names the encoding in the error for a range too large to index.
  // Kept between calls with the same mask and positions (forward and backward of a layer, and
  // every layer of a step, ask for the same index).
  int index_distances(const AttentionGeometry& g, const char* who) {
    if (index_key_.same_as_last(g)) return distances_;
    const int L = g.q_len, K = g.k_len;
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(),
                 hi = std::numeric_limits<std::int64_t>::min();
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j)
        if (g.visible(i, j)) {
          lo = std::min(lo, g.q_pos[i] - g.k_pos[j]);
          hi = std::max(hi, g.q_pos[i] - g.k_pos[j]);
        }
    if (lo > hi) lo = hi = 0;  // nothing visible
    if (hi - lo >= std::numeric_limits<int>::max()) {
      index_key_.forget();
      throw std::invalid_argument(std::string(who) + ": position range too large");
    }
    dmin_ = lo;
    index_.resize(std::size_t(L) * K);
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j)
        index_[std::size_t(i) * K + j] = g.visible(i, j) ? int(g.q_pos[i] - g.k_pos[j] - lo) : -1;
    return distances_ = int(hi - lo + 1);
  }

  // The distance of entry d after index_distances.
  std::int64_t distance(int d) const { return dmin_ + d; }

  // For entries that are not plain distances: the index [L, K], all -1, for the caller to fill
  // with entry numbers on the visible cells.
  int* clear_index(const AttentionGeometry& g) {
    index_key_.forget();  // the caller's entries are not plain distances
    index_.assign(std::size_t(g.q_len) * g.k_len, -1);
    return index_.data();
  }

  // The table [H, N] for the encoding to fill before gather (contents unspecified).
  xt::xtensor<T, 2>& table(int H, int N) {
    ensure_shape(tab_, {std::size_t(H), std::size_t(N)});
    return tab_;
  }

  // scores[b, h - h0, i, j] += tab[h, index_ij] on visible cells, for the call's heads
  // h = h0 .. h0 + Hc - 1; scores [B, Hc, L, K], tab [H, N] (all heads). Each (h, i) row is
  // gathered once into a per-thread buffer, then added to the B batch rows.
  void gather(const AttentionGeometry& g, T* scores) {
    const int B = g.batch, Hc = g.heads(), L = g.q_len, K = g.k_len, N = int(tab_.shape(1));
    const int* index = index_.data();
    const T* tab = tab_.data();
    rows_.resize(std::size_t(omp_get_max_threads()) * K);
#pragma omp parallel for schedule(static)
    for (int ci = 0; ci < Hc * L; ++ci) {
      const int c = ci / L, i = ci % L;  // head h = h0 + c of the call, query i
      const int lo = g.first_visible(i), top = g.last_visible(i);
      T* row = rows_.data() + std::size_t(omp_get_thread_num()) * K;
      const int* idx = index + long(i) * K;
      const T* t = tab + long(g.head_begin + c) * N;
      for (int j = lo; j <= top; ++j) row[j] = t[idx[j]];
      for (int b = 0; b < B; ++b) {
        T* s = scores + ((long(b) * Hc + c) * L + i) * K;
        for (int j = lo; j <= top; ++j) s[j] += row[j];
      }
    }
  }

  // Backward of gather: returns the table [H, N] set to dtab[h, n] = sum of dS[b, h, i, j] over
  // the visible cells with index_ij = n and every b. The B batch rows of each (h, i) are summed
  // first (vectorised), then scattered once. One head per thread.
  // Backward hooks get all heads (require_all_heads).
  const xt::xtensor<T, 2>& scatter(const AttentionGeometry& g, const T* dscores, int N) {
    require_all_heads(g, "distance bias scatter");
    const int B = g.batch, H = g.n_heads, L = g.q_len, K = g.k_len;
    ensure_zeros(tab_, {std::size_t(H), std::size_t(N)});
    const int* index = index_.data();
    T* dtab = tab_.data();
    rows_.resize(std::size_t(H) * K);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; ++h) {
      T* acc = rows_.data() + std::size_t(h) * K;
      T* dt = dtab + long(h) * N;
      for (int i = 0; i < L; ++i) {
        const int lo = g.first_visible(i), top = g.last_visible(i);
        const int* idx = index + long(i) * K;
        for (int j = lo; j <= top; ++j) acc[j] = 0;
        for (int b = 0; b < B; ++b) {
          const T* ds = dscores + ((long(b) * H + h) * L + i) * K;
          for (int j = lo; j <= top; ++j) acc[j] += ds[j];
        }
        for (int j = lo; j <= top; ++j) dt[idx[j]] += acc[j];
      }
    }
    return tab_;
  }

 private:
  // Work buffers; the index is kept for the next call with the same geometry.
  std::int64_t dmin_ = 0;
  std::vector<int> index_;  // [L, K]: table entry of each visible cell, -1 on masked ones
  GeometryKey index_key_;   // the mask and positions of index_ (index_distances)
  int distances_ = 0;       // and its number of entries
  xt::xtensor<T, 2> tab_;   // [H, N]: the bias per entry in forward, its gradient in backward
  std::vector<T> rows_;     // [threads, K] or [H, K]: one gathered / summed row each
};

}  // namespace poslab
