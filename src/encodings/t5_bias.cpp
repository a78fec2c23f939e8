// T5 relative position bias: Raffel et al. (2020), "Exploring the Limits of Transfer Learning
// with a Unified Text-to-Text Transformer", JMLR, section 2.1.
//
// Every (query, key) pair gets one learned scalar per head, chosen by the bucket of their distance,
// and added to the attention logits:
//
//   S_ij = q_i . k_j / sqrt(d_h)  +  b[bucket(i - j), h]            (head h)
//
// The bias is not scaled: T5 scales neither term (it folds 1/sqrt(d) into the initialisation of
// W_q); poslab's attention scales the content term by 1/sqrt(d_h) as for every encoding, and this
// encoding adds b unscaled, as T5 adds it. bucket() is T5's `_relative_position_bucket`
// (t5_buckets.hpp): distances below num_buckets/2 exactly, then logarithmic bins up to
// max_distance, beyond which all distances share the last bucket. `bidirectional` selects T5's
// encoder buckets (half of them for keys to the right); attention here is always causal, so it
// only changes which bucket a backward distance falls into.
//
// Parameters: one table t5.bias [num_buckets, H], shared by all layers (T5: only the first layer
// owns it and the others reuse it), N(0, init_std), no weight decay. Each layer's backward pass
// adds its share to the one gradient.
//
// Computation, per call (the bias depends on positions only, not on the batch or the content):
//   dist_ij = q_pos[i] - k_pos[j] on visible cells, D distinct values in [dmin, dmax]
//   tab[h, d - dmin] = b[bucket(d), h]                                     [H, D]
//   scores[b, h, i, j] += tab[h, dist_ij - dmin]                           gather, every b
// Backward: dtab[h, d] = sum_{b, i, j : dist_ij = d} dS[b, h, i, j], then db[bucket(d), h] +=
// dtab[h, d]. O(B H L K) adds, the same order as the mask itself; the gathers and scatters are
// done once per (h, i) row and shared by the batch (add_bias_rows, scatter_bias_rows), and the
// table has one entry per distinct distance (K with contiguous positions).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "core/buffer.hpp"
#include "encodings/registry.hpp"
#include "encodings/t5_buckets.hpp"

namespace poslab {

namespace {

// The keys visible to query i are the contiguous range [lo, hi] (AttentionGeometry::visible).
inline void visible_range(const AttentionGeometry& g, int i, int& lo, int& hi) {
  hi = std::min(g.k_len - 1, i + g.mem_len);
  lo = g.window > 0 ? std::max(0, hi - g.window + 1) : 0;
}

// scores[b, h, i, j] += tab[h, index[i, j]] on visible cells; tab is [H, N], index [L, K]. The
// bias does not depend on b: each (h, i) row is gathered once into a per-thread buffer, then
// added to the B batch rows with contiguous (vectorised) loops.
template <class T>
void add_bias_rows(const AttentionGeometry& g, const int* index, const T* tab, int N, T* scores,
                   std::vector<T>& buffer) {
  const int B = g.batch, H = g.n_heads, L = g.q_len, K = g.k_len;
  buffer.resize(std::size_t(omp_get_max_threads()) * K);
#pragma omp parallel for schedule(static)
  for (int hi = 0; hi < H * L; ++hi) {
    const int h = hi / L, i = hi % L;
    int lo, top;
    visible_range(g, i, lo, top);
    T* row = buffer.data() + std::size_t(omp_get_thread_num()) * K;
    const int* idx = index + long(i) * K;
    const T* t = tab + long(h) * N;
    for (int j = lo; j <= top; ++j) row[j] = t[idx[j]];
    for (int b = 0; b < B; ++b) {
      T* s = scores + ((long(b) * H + h) * L + i) * K;
      for (int j = lo; j <= top; ++j) s[j] += row[j];
    }
  }
}

// dtab[h, index[i, j]] += sum_b dS[b, h, i, j] on visible cells: the B batch rows are summed
// first (vectorised), then scattered once per (h, i). One head per thread.
template <class T>
void scatter_bias_rows(const AttentionGeometry& g, const int* index, const T* dscores, int N,
                       T* dtab, std::vector<T>& buffer) {
  const int B = g.batch, H = g.n_heads, L = g.q_len, K = g.k_len;
  buffer.resize(std::size_t(H) * K);
#pragma omp parallel for schedule(static)
  for (int h = 0; h < H; ++h) {
    T* acc = buffer.data() + std::size_t(h) * K;
    T* dt = dtab + long(h) * N;
    for (int i = 0; i < L; ++i) {
      int lo, top;
      visible_range(g, i, lo, top);
      const int* idx = index + long(i) * K;
      for (int j = lo; j <= top; ++j) acc[j] = 0;
      for (int b = 0; b < B; ++b) {
        const T* ds = dscores + ((long(b) * H + h) * L + i) * K;
        for (int j = lo; j <= top; ++j) acc[j] += ds[j];
      }
      for (int j = lo; j <= top; ++j) dt[idx[j]] += acc[j];
    }
  }
}

template <class T>
class T5Bias : public Encoding<T> {
 public:
  T5Bias(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        H_(s.n_heads),
        num_buckets_(int(o.get_int("num_buckets"))),
        max_distance_(int(o.get_int("max_distance"))),
        bidirectional_(o.get_bool("bidirectional")),
        init_std_(o.get_double("init_std")) {
    if (H_ <= 0) throw std::invalid_argument("t5_bias: needs n_heads > 0");
    const int per_direction = bidirectional_ ? num_buckets_ / 2 : num_buckets_;
    if (per_direction < 2)
      throw std::invalid_argument("t5_bias: num_buckets must be >= 2 (>= 4 if bidirectional)");
    if (max_distance_ <= per_direction / 2)
      throw std::invalid_argument("t5_bias: max_distance must exceed the exact range (" +
                                  std::to_string(per_direction / 2) + ")");
    bias_ = arena.add("t5.bias", {std::size_t(num_buckets_), std::size_t(H_)}, false);
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    T* b = arena.value(bias_);
    for (std::size_t i = 0; i < bias_.size; ++i) b[i] = T(rng.normal(0.0, init_std_));
  }

  bool has_score_terms() const override { return true; }

  // scores[b, h, i, j] += bias[bucket(q_pos[i] - k_pos[j]), h]     (scale not applied)
  void scores_forward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                      T /*scale*/, T* scores) override {
    check(g);
    const int D = compute_distances(g);
    const int H = H_;
    // tab[h, d] = bias[bucket(dmin + d), h]       [H, D]
    ensure_shape(tab_, {std::size_t(H), std::size_t(D)});
    const T* bias = arena_.value(bias_);
    for (int d = 0; d < D; ++d) {
      const int bucket = bucket_of(dmin_ + d);
      for (int h = 0; h < H; ++h) tab_(h, d) = bias[long(bucket) * H + h];
    }
    add_bias_rows(g, index_.data(), tab_.data(), D, scores, rows_);
  }

  // dbias[bucket(dist_ij), h] += sum_b dS[b, h, i, j]. q and k get nothing.
  void scores_backward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    check(g);
    const int D = compute_distances(g);
    const int H = H_;
    ensure_zeros(tab_, {std::size_t(H), std::size_t(D)});  // holds dtab here
    scatter_bias_rows(g, index_.data(), dscores, D, tab_.data(), rows_);
    T* dbias = arena_.grad(bias_);
    for (int d = 0; d < D; ++d) {
      const int bucket = bucket_of(dmin_ + d);
      for (int h = 0; h < H; ++h) dbias[long(bucket) * H + h] += tab_(h, d);
    }
  }

 private:
  int bucket_of(std::int64_t dist) const {
    return t5_relative_bucket(dist, bidirectional_, num_buckets_, max_distance_);
  }

  void check(const AttentionGeometry& g) const {
    if (g.n_heads != H_)
      throw std::invalid_argument("t5_bias: geometry does not match the shape it was built for");
  }

  // index_[i, j] = q_pos[i] - k_pos[j] - dmin on visible cells, -1 on masked ones   [L, K].
  // Returns D = dmax - dmin + 1, the size of the per-distance table.
  int compute_distances(const AttentionGeometry& g) {
    const int L = g.q_len, K = g.k_len;
    std::int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j)
        if (g.visible(i, j)) {
          lo = std::min(lo, g.q_pos[i] - g.k_pos[j]);
          hi = std::max(hi, g.q_pos[i] - g.k_pos[j]);
        }
    if (lo > hi) lo = hi = 0;  // nothing visible
    if (hi - lo >= INT32_MAX) throw std::invalid_argument("t5_bias: position range too large");
    dmin_ = lo;
    index_.resize(std::size_t(L) * K);
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j)
        index_[std::size_t(i) * K + j] = g.visible(i, j) ? int(g.q_pos[i] - g.k_pos[j] - lo) : -1;
    return int(hi - lo + 1);
  }

  ParameterArena<T>& arena_;
  int H_, num_buckets_, max_distance_;
  bool bidirectional_;
  double init_std_;
  Param bias_;  // [num_buckets, H], shared by all layers

  // Work buffers (nothing kept between calls).
  std::int64_t dmin_ = 0;
  std::vector<int> index_;  // [L, K]
  xt::xtensor<T, 2> tab_;   // [H, D]: the bias per distance in forward, its gradient in backward
  std::vector<T> rows_;     // [threads, K] or [H, K]: one gathered / summed row each
};

}  // namespace

EncodingInfo t5_bias_encoding_info() {
  return {"t5_bias",
          EncodingFamily::relative,
          "T5 relative bias: one learned scalar per (distance bucket, head) added to the logits, "
          "log-spaced buckets, shared by all layers",
          "Raffel et al. 2020",
          {
              {"num_buckets", std::int64_t(32),
               "number of distance buckets (half exact, half log-spaced up to max_distance; "
               "halved per direction if bidirectional)",
               2, 4096},
              {"max_distance", std::int64_t(128),
               "distances at or beyond this share the last bucket (must exceed the exact range "
               "num_buckets/2, or num_buckets/4 if bidirectional)",
               2},
              {"bidirectional", false,
               "T5 encoder buckets: half the buckets per direction (attention stays causal, so "
               "only the backward half is used)"},
              {"init_std", 0.02, "standard deviation of the N(0, std) initialisation of the table",
               0},
          },
          factory_float<T5Bias>(),
          factory_double<T5Bias>()};
}

}  // namespace poslab
