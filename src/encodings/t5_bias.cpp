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
// dtab[h, d]. The indexing, gather and scatter are distance_bias.hpp's (shared with KERPLE and
// FIRE): O(B H L K) adds, each (h, i) row gathered once for the whole batch, one table entry per
// distinct distance (K with contiguous positions).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "encodings/distance_bias.hpp"
#include "encodings/registry.hpp"
#include "encodings/t5_buckets.hpp"

namespace poslab {

namespace {

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
    const int D = dist_.index_distances(g, "t5_bias");
    const int H = H_;
    // tab[h, d] = bias[bucket(dmin + d), h]       [H, D]
    auto& tab = dist_.table(H, D);
    const T* bias = arena_.value(bias_);
    for (int d = 0; d < D; ++d) {
      const int bucket = bucket_of(dist_.distance(d));
      for (int h = 0; h < H; ++h) tab(h, d) = bias[long(bucket) * H + h];
    }
    dist_.gather(g, scores);
  }

  // dbias[bucket(dist_ij), h] += sum_b dS[b, h, i, j]. q and k get nothing.
  void scores_backward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    check(g);
    const int D = dist_.index_distances(g, "t5_bias");
    const int H = H_;
    const auto& dtab = dist_.scatter(g, dscores, D);  // [H, D]
    T* dbias = arena_.grad(bias_);
    for (int d = 0; d < D; ++d) {
      const int bucket = bucket_of(dist_.distance(d));
      for (int h = 0; h < H; ++h) dbias[long(bucket) * H + h] += dtab(h, d);
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

  ParameterArena<T>& arena_;
  int H_, num_buckets_, max_distance_;
  bool bidirectional_;
  double init_std_;
  Param bias_;  // [num_buckets, H], shared by all layers

  DistanceBias<T> dist_;  // distance index, table [H, D] and work buffers (distance_bias.hpp)
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
