// Example distance bias: the worked example of docs/07-add-your-own-encoding.md. Not from a paper;
// the smallest useful relative encoding, written to be read next to the guide.
//
// Every head learns one scalar per clipped distance and adds it to the attention logits:
//
//   S_ij = q_i . k_j / sqrt(d_h)  +  b[min(i - j, k), h]            (head h, bias not scaled)
//
// with i = q_pos[i], j = k_pos[j] (memory keys included), so the bias depends on i - j only: a
// relative encoding. k is the option `max_distance`: every key k or more positions back shares
// row k. It is T5's bias (t5_bias.cpp) with the simplest possible buckets, or Shaw's clipping
// (shaw.cpp) with a scalar per head instead of a vector per distance.
//
// Parameters: one table `example.bias` [k+1, H], shared by all layers (each layer's backward
// adds its share to the one gradient), init N(0, init_std) (init_std = 0: zeros, so the model
// starts as NoPE), no weight decay.
//
// Hook (c) only. Forward: scores[b, h, i, j] += b[label_ij, h] on visible cells.
// Backward: the bias does not depend on q or k, so dq and dk get nothing; the table gets the
// scatter-add of dscores by label:  dbias[label_ij, h] += sum_b dS[b, h, i, j].
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "encodings/registry.hpp"

namespace poslab {

namespace {

template <class T>
class ExampleDistanceBias : public Encoding<T> {
 public:
  ExampleDistanceBias(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        H_(s.n_heads),
        k_(int(o.get_int("max_distance"))),
        init_std_(o.get_double("init_std")) {
    if (H_ <= 0) throw std::invalid_argument("example_distance_bias: needs n_heads > 0");
    // One table for the whole model: rows = clipped distance 0..k, columns = heads.
    // weight_decay = false: a positional table, not a matrix.
    bias_ = arena.add("example.bias", {std::size_t(k_ + 1), std::size_t(H_)}, false);
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    T* b = arena.value(bias_);
    for (std::size_t n = 0; n < bias_.size; ++n) b[n] = T(rng.normal(0.0, init_std_));
  }

  // Tell the attention layer which hook this encoding uses: (c), the score terms.
  bool has_score_terms() const override { return true; }

  // scores[b, h - h0, i, j] += bias[min(q_pos[i] - k_pos[j], k), h]   (visible cells; no scale)
  // for the heads h = h0 .. h0 + Hc - 1 of this call: scores is [B, Hc, L, K].
  void scores_forward(int /*layer: one table for all*/, const AttentionGeometry& g,
                      const T* /*q*/, const T* /*k*/, T /*scale*/, T* scores) override {
    compute_labels(g);
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_, Hc = g.heads();
    const T* bias = arena_.value(bias_);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * Hc; ++bh) {
      const int h = g.head_begin + bh % Hc;
      for (int i = 0; i < L; ++i) {
        const int* lab = labels_.data() + long(i) * K;
        T* s = scores + (long(bh) * L + i) * K;  // row i of head h: [K]
        for (int j = 0; j < K; ++j)
          if (lab[j] >= 0) s[j] += bias[long(lab[j]) * H + h];
      }
    }
  }

  // dbias[label_ij, h] += dS[b, h, i, j] for every b and visible (i, j). dq, dk: nothing.
  void scores_backward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    require_all_heads(g, "example_distance_bias");  // a training step: all heads at once
    compute_labels(g);
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_;
    T* dbias = arena_.grad(bias_);  // accumulated (+=): every layer adds to the same table
    // One head per thread: head h writes only column h of dbias, so no two threads collide.
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; ++h)
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < L; ++i) {
          const int* lab = labels_.data() + long(i) * K;
          const T* ds = dscores + ((long(b) * H + h) * L + i) * K;
          for (int j = 0; j < K; ++j)
            if (lab[j] >= 0) dbias[long(lab[j]) * H + h] += ds[j];
        }
  }

 private:
  // labels_[i, j] = min(q_pos[i] - k_pos[j], k) on visible cells, -1 on masked ones    [L, K]
  // (the same for every batch row and head). Masked cells may have negative distances: they
  // must never index the table.
  void compute_labels(const AttentionGeometry& g) {
    if (g.n_heads != H_)
      throw std::invalid_argument(
          "example_distance_bias: geometry does not match the shape it was built for");
    const int L = g.q_len, K = g.k_len;
    labels_.resize(std::size_t(L) * K);
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < K; ++j) {
        int label = -1;
        if (g.visible(i, j)) {
          const std::int64_t dist = g.q_pos[i] - g.k_pos[j];
          if (dist < 0)
            throw std::invalid_argument(
                "example_distance_bias: a visible key has a larger position than its query");
          label = int(std::min<std::int64_t>(dist, k_));
        }
        labels_[std::size_t(i) * K + j] = label;
      }
  }

  ParameterArena<T>& arena_;
  int H_, k_;
  double init_std_;
  Param bias_;               // [k+1, H], shared by all layers
  std::vector<int> labels_;  // work buffer [L, K], rebuilt on every call
};

}  // namespace

EncodingInfo example_distance_bias_encoding_info() {
  return {"example_distance_bias",
          EncodingFamily::relative,
          "Example (docs/07): a learned scalar per head and clipped distance min(i - j, k) added "
          "to the logits, one table for all layers",
          "poslab tutorial example",
          {
              {"max_distance", std::int64_t(16),
               "clip distance k: keys k or more positions back share the last row (k + 1 rows)", 0,
               1 << 20},
              {"init_std", 0.0,
               "std of the N(0, std) initialisation of the table (0: zeros, starts as NoPE)", 0},
          },
          factory_float<ExampleDistanceBias>(),
          factory_double<ExampleDistanceBias>()};
}

}  // namespace poslab
