// ALiBi, attention with linear biases: Press, Smith & Lewis (2022), "Train Short, Test Long:
// Attention with Linear Biases Enables Input Length Extrapolation", ICLR, section 3.
//
// No position vectors and no parameters: each head penalises a key linearly in its distance from
// the query, with a fixed head-specific slope m_h:
//
//   S_ij = q_i . k_j / sqrt(d_h)  -  m_h * (i - j)                  (head h, not scaled)
//
// with i = q_pos[i], j = k_pos[j] (memory keys included), so the bias depends on i - j only. The
// slopes (alibi_slopes.hpp) are the geometric sequence m_h = 2^(-8h/H), h = 1..H, with the paper's
// interleaving rule when H is not a power of two; they span short-sighted heads (m = 1/2: a key
// 10 back loses 5 nats) to almost position-blind ones (m = 1/256).
//
// The paper adds the bias after the 1/sqrt(d_h) scaling of q.k (the fairseq code adds it to the
// mask), which is what this does: `scale` is ignored.
//
// Cost: one multiply-add per visible cell, O(B H L K); backward has nothing to do (no parameters,
// and the bias does not depend on q or k). ALiBi is a distance bias like T5 and KERPLE, but one
// multiply per cell costs about what a gather from their per-distance table (distance_bias.hpp)
// would, so it computes the bias in place and shares only the mask's visible range.
#include <stdexcept>
#include <vector>

#include "encodings/alibi_slopes.hpp"
#include "encodings/distance_bias.hpp"
#include "encodings/registry.hpp"

namespace poslab {

namespace {

template <class T>
class Alibi : public Encoding<T> {
 public:
  Alibi(const Options&, const EncodingShape& s, ParameterArena<T>&) : H_(s.n_heads) {
    for (double m : alibi_slopes(H_)) slopes_.push_back(T(m));
  }

  bool has_score_terms() const override { return true; }

  // scores[b, h - h0, i, j] -= m_h * (q_pos[i] - k_pos[j])   (visible cells; heads h0 .. h0+Hc-1)
  void scores_forward(int /*layer*/, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                      T /*scale*/, T* scores) override {
    if (g.n_heads != H_)
      throw std::invalid_argument("alibi: geometry does not match the shape it was built for");
    const int B = g.batch, L = g.q_len, K = g.k_len, Hc = g.heads();
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * Hc; ++bh) {  // block bh of scores [B, Hc, L, K]
      const T m = slopes_[g.head_begin + bh % Hc];  // of head h = h0 + bh % Hc
      for (int i = 0; i < L; ++i) {
        const int lo = g.first_visible(i), hi = g.last_visible(i);
        T* s = scores + (long(bh) * L + i) * K;
        for (int j = lo; j <= hi; ++j) s[j] -= m * T(g.q_pos[i] - g.k_pos[j]);
      }
    }
  }
  // Backward: the bias is a constant; dS flows to q and k through the content term only.

 private:
  int H_;
  std::vector<T> slopes_;  // [H]
};

}  // namespace

EncodingInfo alibi_encoding_info() {
  return {"alibi",
          EncodingFamily::relative,
          "ALiBi: fixed linear penalty -m_h (i - j) on the logits, geometric head slopes "
          "2^(-8h/H), no parameters",
          "Press et al. 2022",
          {},
          factory_float<Alibi>(),
          factory_double<Alibi>()};
}

}  // namespace poslab
