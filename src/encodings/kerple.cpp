// KERPLE, kernelized relative positional embedding (logarithmic variant): Chi, Fan, Ramadge &
// Rudnicky (2022), "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation",
// NeurIPS, section 4 (eq. "KERPLE (log)").
//
// The bias is a conditionally positive definite kernel of the distance, shifted into the logits:
//
//   S_ij = q_i . k_j / sqrt(d_h)  -  r1_h * log(1 + r2_h * |i - j|)        r1_h, r2_h > 0
//
// (i = q_pos[i], j = k_pos[j]; not scaled). Two learned scalars per head: r1 sets how strongly
// distance is penalised, r2 where the logarithm bends (r2 |i-j| << 1: linear like ALiBi with
// slope r1 r2; >> 1: logarithmic, which decays far more slowly and is what lets it extrapolate).
//
// Choices where the paper leaves freedom (documented defaults):
//   - Positivity. The paper's code stores r1, r2 directly and clamps them to >= 1e-2 after each
//     update. Here they are stored raw and mapped through softplus, r = log(1 + e^raw): smooth,
//     never zero, with a gradient everywhere (a clamp has none below its floor, and editing
//     parameters inside a forward hook would break the finite-difference checks). The arena
//     holds raw = softplus^{-1}(r).
//   - Initialisation as the paper's code: r1 ~ U(0, r1_init) with r1_init = 2, r2 ~ U(0, r2_init)
//     with r2_init = 1, each floored at the paper's 1e-2.
//   - One pair per layer (the paper's GPT-NeoX code builds one module per attention layer):
//     layer{n}.kerple.r1 / .r2 [H]. Option `shared` uses one pair kerple.r1 / .r2 for every
//     layer instead (T5-style). No weight decay.
//
// Computation: the bias depends on the distance only, so per call (distance_bias.hpp)
//   tab[h, d - dmin] = -r1_h log(1 + r2_h |d|)     [H, D], D distinct distances on visible cells
//   scores[b, h, i, j] += tab[h, dist_ij - dmin]
// Backward: dtab[h, d] = sum_{b,i,j : dist = d} dS, then per head
//   dr1 = -sum_d dtab log(1 + r2 |d|),  dr2 = -sum_d dtab r1 |d| / (1 + r2 |d|),
//   draw = dr * sigmoid(raw)       (softplus' = sigmoid)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "encodings/distance_bias.hpp"
#include "encodings/registry.hpp"
#include "encodings/softplus.hpp"

namespace poslab {

namespace {

template <class T>
class Kerple : public Encoding<T> {
 public:
  Kerple(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        H_(s.n_heads),
        n_layers_(s.n_layers),
        shared_(o.get_bool("shared")),
        r1_init_(o.get_double("r1_init")),
        r2_init_(o.get_double("r2_init")) {
    if (H_ <= 0) throw std::invalid_argument("kerple: needs n_heads > 0");
    if (!(r1_init_ > 0) || !(r2_init_ > 0))
      throw std::invalid_argument("kerple: r1_init and r2_init must be > 0");
    const int tables = shared_ ? 1 : s.n_layers;
    for (int n = 0; n < tables; ++n) {
      const std::string prefix = shared_ ? "kerple." : "layer" + std::to_string(n) + ".kerple.";
      r1_.push_back(arena.add(prefix + "r1", {std::size_t(H_)}, false));
      r2_.push_back(arena.add(prefix + "r2", {std::size_t(H_)}, false));
    }
  }

  // r ~ U(0, r_init), floored at 1e-2, stored as softplus^{-1}(r).
  void init(ParameterArena<T>& arena, Rng& rng) override {
    for (std::size_t n = 0; n < r1_.size(); ++n)
      for (auto [p, top] : {std::pair{r1_[n], r1_init_}, std::pair{r2_[n], r2_init_}}) {
        T* raw = arena.value(p);
        for (int h = 0; h < H_; ++h)
          raw[h] = T(softplus_inverse(std::max(1e-2, rng.uniform() * top)));
      }
  }

  bool has_score_terms() const override { return true; }

  // scores[b, h, i, j] += -r1_h log(1 + r2_h |q_pos[i] - k_pos[j]|)     (scale not applied)
  void scores_forward(int layer, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                      T /*scale*/, T* scores) override {
    const int t = check(layer, g);
    const int D = dist_.index_distances(g, "kerple");
    const int H = H_;
    auto& tab = dist_.table(H, D);  // [H, D]
    const T* raw1 = arena_.value(r1_[t]);
    const T* raw2 = arena_.value(r2_[t]);
    for (int h = 0; h < H; ++h) {
      const double r1 = softplus(raw1[h]), r2 = softplus(raw2[h]);
      for (int d = 0; d < D; ++d)
        tab(h, d) = T(-r1 * std::log1p(r2 * double(std::abs(dist_.distance(d)))));
    }
    dist_.gather(g, scores);
  }

  void scores_backward(int layer, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    const int t = check(layer, g);
    const int D = dist_.index_distances(g, "kerple");
    const int H = H_;
    const auto& dtab = dist_.scatter(g, dscores, D);  // [H, D]
    const T* raw1 = arena_.value(r1_[t]);
    const T* raw2 = arena_.value(r2_[t]);
    T* draw1 = arena_.grad(r1_[t]);
    T* draw2 = arena_.grad(r2_[t]);
    for (int h = 0; h < H; ++h) {
      const double r1 = softplus(raw1[h]), r2 = softplus(raw2[h]);
      double dr1 = 0, dr2 = 0;
      for (int d = 0; d < D; ++d) {
        const double n = double(std::abs(dist_.distance(d))), dt = double(dtab(h, d));
        dr1 -= dt * std::log1p(r2 * n);
        dr2 -= dt * r1 * n / (1 + r2 * n);
      }
      draw1[h] += T(dr1 * sigmoid(raw1[h]));
      draw2[h] += T(dr2 * sigmoid(raw2[h]));
    }
  }

 private:
  int table_of(int layer) const { return shared_ ? 0 : layer; }

  int check(int layer, const AttentionGeometry& g) const {
    if (g.n_heads != H_)
      throw std::invalid_argument("kerple: geometry does not match the shape it was built for");
    if (layer < 0 || layer >= n_layers_) throw std::out_of_range("kerple: no such layer");
    return table_of(layer);
  }

  ParameterArena<T>& arena_;
  int H_, n_layers_;
  bool shared_;
  double r1_init_, r2_init_;
  std::vector<Param> r1_, r2_;  // raw, [H] each; one pair per layer (or one if shared)

  DistanceBias<T> dist_;  // distance index, table [H, D] and work buffers (distance_bias.hpp)
};

}  // namespace

EncodingInfo kerple_encoding_info() {
  return {"kerple",
          EncodingFamily::relative,
          "KERPLE (log): learned kernel bias -r1_h log(1 + r2_h |i - j|) on the logits, r1, r2 > 0 "
          "per head (softplus), per layer",
          "Chi et al. 2022",
          {
              {"shared", false,
               "one (r1, r2) pair per head shared by all layers (default: one per layer, as the "
               "paper's code)"},
              {"r1_init", 2.0, "r1 starts uniform in (0, r1_init] (floored at 1e-2; paper: 2)",
               1e-2},
              {"r2_init", 1.0, "r2 starts uniform in (0, r2_init] (floored at 1e-2; paper: 1)",
               1e-2},
          },
          factory_float<Kerple>(),
          factory_double<Kerple>()};
}

}  // namespace poslab
