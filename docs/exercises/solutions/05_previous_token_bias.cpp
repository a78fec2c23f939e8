// Exercise 5, solution: previous_token_bias. Copy to src/encodings/previous_token_bias.cpp and
// register it in src/encodings/registry.cpp (docs/07, step 3):
//
//   EncodingInfo previous_token_bias_encoding_info();        // with the other declarations
//   previous_token_bias_encoding_info(),                      // in the list of encodings
//
// Every head learns one scalar b_h, added to the score of the key exactly one position back:
//
//   S_ij = q_i . k_j / sqrt(d_h)  +  b_h [q_pos[i] - k_pos[j] = 1]          (not scaled)
//
// Depends on i - j only: a relative encoding. Parameters: `prev.bias` [H], shared by all layers,
// init 0 (the model starts as NoPE), no weight decay.
// Backward: dq, dk get nothing; db_h = sum over b and the cells with i - j = 1 of dS[b, h, i, j],
// accumulated (+=) because every layer adds its share to the one parameter.
#include <cstdint>
#include <stdexcept>

#include "encodings/registry.hpp"

namespace poslab {

namespace {

template <class T>
class PreviousTokenBias : public Encoding<T> {
 public:
  PreviousTokenBias(const Options& /*o*/, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena), H_(s.n_heads) {
    if (H_ <= 0) throw std::invalid_argument("previous_token_bias: needs n_heads > 0");
    bias_ = arena.add("prev.bias", {std::size_t(H_)}, false);
  }

  void init(ParameterArena<T>& arena, Rng& /*rng*/) override {
    T* b = arena.value(bias_);
    for (std::size_t n = 0; n < bias_.size; ++n) b[n] = T(0);
  }

  bool has_score_terms() const override { return true; }

  // scores[b, h, i, j] += bias[h] where key j is one position before query i (and visible)
  void scores_forward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                      T /*scale*/, T* scores) override {
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_;
    const T* bias = arena_.value(bias_);
    for (int bh = 0; bh < B * H; ++bh)
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < K; ++j)
          if (g.visible(i, j) && g.q_pos[i] - g.k_pos[j] == 1)
            scores[(long(bh) * L + i) * K + j] += bias[bh % H];
  }

  // dbias[h] += dS[b, h, i, j] over the same cells
  void scores_backward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_;
    T* dbias = arena_.grad(bias_);
    for (int bh = 0; bh < B * H; ++bh)
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < K; ++j)
          if (g.visible(i, j) && g.q_pos[i] - g.k_pos[j] == 1)
            dbias[bh % H] += dscores[(long(bh) * L + i) * K + j];
  }

 private:
  ParameterArena<T>& arena_;
  int H_;
  Param bias_;  // [H], shared by all layers
};

}  // namespace

EncodingInfo previous_token_bias_encoding_info() {
  return {"previous_token_bias",
          EncodingFamily::relative,
          "Exercise 5: a learned scalar per head added to the score of the previous token",
          "poslab exercise",
          {},
          factory_float<PreviousTokenBias>(),
          factory_double<PreviousTokenBias>()};
}

}  // namespace poslab
