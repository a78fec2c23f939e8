// Absolute sinusoidal encoding (Vaswani et al. 2017, section 3.5), hook (a):
//
//   x_0[b, i] = sqrt(d) E[token] + PE[pos_i],   PE[pos, 2k] = sin(pos / 10000^(2k/d)),
//                                               PE[pos, 2k+1] = cos(pos / 10000^(2k/d))
//
// No parameters, defined for every position, so it can be evaluated beyond the training length;
// whether the model makes sense of unseen positions is what the length-generalization study
// measures. Under segment recurrence every segment restarts at position 0 (the failure case of
// Dai et al. 2019) unless memory.continue_positions is set.
#include <vector>

#include "core/buffer.hpp"
#include "encodings/registry.hpp"
#include "encodings/sinusoid.hpp"

namespace poslab {

namespace {
template <class T>
class Sinusoidal : public Encoding<T> {
 public:
  Sinusoidal(const Options&, const EncodingShape& s, ParameterArena<T>&) : d_(s.d_model) {}

  void embed_forward(const AttentionGeometry& g, T* x) override {
    const int L = g.q_len;
    ensure_shape(table_, {std::size_t(L), std::size_t(d_)});
    sinusoid_table<T>(g.q_pos, L, d_, table_.data());  // PE [L, d]
    for (int b = 0; b < g.batch; ++b)
      for (long n = 0; n < long(L) * d_; ++n) x[long(b) * L * d_ + n] += table_.data()[n];
  }
  // PE has no parameters and is added: nothing to do backwards.

 private:
  int d_;
  xt::xtensor<T, 2> table_;
};
}  // namespace

EncodingInfo sinusoidal_encoding_info() {
  return {"sinusoidal", EncodingFamily::absolute,
          "absolute sinusoid table added to the token embeddings (no parameters)",
          "Vaswani et al. 2017", {},
          factory_float<Sinusoidal>(), factory_double<Sinusoidal>()};
}

}  // namespace poslab
