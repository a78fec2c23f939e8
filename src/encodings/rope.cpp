// RoPE, rotary position embedding: Su, Lu, Pan, Murtadha, Wen & Liu (2021), "RoFormer: Enhanced
// Transformer with Rotary Position Embedding", section 3.2.
//
// Instead of adding anything, rotate. Split each head's query and key into pairs
// (x_{2p}, x_{2p+1}), p = 0..d_rot/2 - 1, and turn pair p of the vector at position m by the angle
// m * theta_p:
//
//   [x'_{2p}  ]   [cos m theta_p   -sin m theta_p] [x_{2p}  ]      theta_p = base^(-2p / d_rot)
//   [x'_{2p+1}] = [sin m theta_p    cos m theta_p] [x_{2p+1}]
//
// A rotation by m theta followed by the transpose of one by n theta is one by (n - m) theta, so
//
//   q'_m . k'_n = sum_p  cos((n - m) theta_p) (q_{2p} k_{2p} + q_{2p+1} k_{2p+1})
//                      + sin((n - m) theta_p) (q_{2p+1} k_{2p} - q_{2p} k_{2p+1})
//
// depends on the positions through m - n only: a relative encoding built from absolute
// rotations, with nothing added to the values. Queries turn by q_pos, keys by k_pos, memory keys
// included (a key keeps the rotation of its own position; poslab recomputes k from the cached
// layer input, so this is automatic).
//
// Layout choices (the paper leaves them open): pairs are adjacent dimensions (2p, 2p+1) of each
// head, as in the paper's equation (15) and the RoFormer code; GPT-NeoX / LLaMA-HF instead pair
// dimension p with p + d_rot/2, which is the same model up to a permutation of W_q and W_k's
// columns. Option `fraction` rotates only the first d_rot = 2 round(fraction * d_h / 2)
// dimensions of each head (GPT-NeoX's rotary_pct), the rest pass through unchanged; theta uses
// d_rot, as there.
//
// Scaling (option `scaling`, rope_scaling.hpp; docs/05-beyond.md, "Extending the context of a
// RoPE model"): a model trained at original_len L is run at longer lengths with its frequencies
// theta_p replaced by theta'_p (linear, ntk, dynamic_ntk, yarn, llama3), and q and k each
// multiplied by an attention factor a (YaRN's 0.1 ln s + 1; 1 for the others unless set):
//
//   q'_m = a R(m theta') q_m,   k'_n = a R(n theta') k_n,   so   q'_m . k'_n = a^2 q^T R((n - m) theta') k
//
// still a function of m - n. With `fraction` < 1 every method acts on the d_rot rotated
// dimensions (d = d_rot in its formulas); the rest pass through, unscaled.
//
// longrope (Ding et al. 2024; Hugging Face's "longrope", Phi-3) divides each pair by its own
// lambda_i, from short_factor while the call covers K <= original_len keys and long_factor
// beyond (as dynamic_ntk, the key count of the call decides; Hugging Face reads
// max(position_ids) + 1, the same count for a pass from position 0). With start_tokens = n_hat
// the rows at positions 0 .. n_hat - 1 (text positions: with memory, only when
// memory.continue_positions gives the stream's positions) keep the plain theta_i and amplitude 1,
// so q'.k' is no longer a function of m - n alone there.
//
// dynamic_ntk computes its base from the number of keys the call covers, K = M + L (memory +
// segment): s' = s K / L - (s - 1) when K > L, the trained base otherwise (Hugging Face
// recomputes it from the current sequence length). This is consistent under poslab's memory:
// poslab caches each layer's *input* (hidden states), not rotated keys, and recomputes and
// re-rotates every key, memory keys included, in every call; so all keys and queries of one call
// share one base, and q'.k' stays a function of m - n inside the call. (A KV cache, which keeps
// keys rotated with the base of the step that produced them, mixes bases; poslab never does.)
// What does not hold, by design: processing a sequence segment by segment with memory is not the
// same as one pass, because the segments' calls cover fewer keys than the single pass and so use
// other bases (the conformance kit states this and tests what holds: each call equals ntk at s').
//
// self_extend, rerope and leaky_rerope (rope_position_maps.hpp) keep theta and change the
// positions of far (query, key) pairs: two score passes merged by distance before the softmax.
// They do not use hook (b); the rope turns its content term off and adds the whole merged score
// as hook (c), from the unrotated q and k (two_map_scores.hpp; docs/07, "Scores from two
// position maps"). Option `naive = true` computes those scores in the reference double loop
// (the conformance kit compares both); the other methods have one path and ignore it.
// Inference-time methods in the papers; training with them runs (the gradients are exact and
// checked), but then the model learns the merged map itself, which is not what they study.
//
// Hook (b), in place on q [B, L, H d_h] and k [B, K, H d_h]. Backward: the Jacobian of the
// scaled rotation a R is a R, so the gradient is a R^T dy (rotary.hpp), in place on dq and dk.
// No parameters. The tables [rows, d_rot/2] (a cos, a sin, in double from the positions,
// rotary.hpp) are rebuilt only when the positions change (or, for dynamic_ntk, the key count):
// every layer of a step shares them, and a step allocates nothing once they have their size.
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "encodings/registry.hpp"
#include "encodings/rope_position_maps.hpp"
#include "encodings/rope_scaling.hpp"
#include "encodings/rotary.hpp"
#include "encodings/two_map_scores.hpp"

namespace poslab {

namespace {

template <class T>
class Rope : public Encoding<T> {
 public:
  Rope(const Options& o, const EncodingShape& s, ParameterArena<T>&)
      : H_(s.n_heads), dh_(s.d_head), base_(o.get_double("base")),
        scaling_(rope_scaling_from_options(o)), amplitude_(scaling_.attention_factor()) {
    const double fraction = o.get_double("fraction");
    if (!(fraction >= 0 && fraction <= 1))
      throw std::invalid_argument("rope: fraction must be in [0, 1]");
    if (!(base_ > 1)) throw std::invalid_argument("rope: base must be > 1");
    pairs_ = rotated_pairs(fraction, dh_);  // d_rot / 2
    if (auto problem = longrope_length_problem(o, pairs_))
      throw std::invalid_argument("rope: " + problem->message);
    frequencies_.resize(pairs_);
    theta_.resize(pairs_);
    plain_theta_.resize(pairs_);
    set_frequencies(0);
    naive_ = o.get_bool("naive");
    if (scaling_.uses_two_maps())
      two_maps_ = std::make_unique<TwoMapScores<T>>(rope_two_map_rule(scaling_), theta_, H_, dh_);
  }

  bool has_qk_transform() const override { return pairs_ > 0 && !two_maps_; }
  bool has_content_term() const override { return !two_maps_; }
  bool has_score_terms() const override { return bool(two_maps_); }

  // self_extend, rerope, leaky_rerope: scores [R, Hc, L, K] += the merged two-map scores.
  void scores_forward(int /*layer*/, const AttentionGeometry& g, const T* q, const T* k, T scale,
                      T* scores) override {
    if (naive_)
      two_map_scores_naive(two_maps_->rule(), theta_, dh_, g, q, k, scale, scores);
    else
      two_maps_->forward(g, q, k, scale, scores);
  }
  void scores_backward(int /*layer*/, const AttentionGeometry& g, const T* q, const T* k, T scale,
                       const T* dscores, T* dq, T* dk) override {
    if (naive_)
      two_map_scores_naive_backward(two_maps_->rule(), theta_, dh_, g, q, k, scale, dscores, dq,
                                    dk);
    else
      two_maps_->backward(g, q, k, scale, dscores, dq, dk);
  }

  void qk_forward(int /*layer*/, const AttentionGeometry& g, T* q, T* k) override {
    prepare(g);
    rotate_pairs(q, g.batch, g.q_len, H_, dh_, pairs_, q_table_, false);
    rotate_pairs(k, g.batch, g.k_len, H_, dh_, pairs_, k_table_, false);
  }

  void qk_backward(int /*layer*/, const AttentionGeometry& g, T* dq, T* dk) override {
    prepare(g);
    rotate_pairs(dq, g.batch, g.q_len, H_, dh_, pairs_, q_table_, true);
    rotate_pairs(dk, g.batch, g.k_len, H_, dh_, pairs_, k_table_, true);
  }

  int rotated_dims() const { return 2 * pairs_; }

 private:
  bool dynamic() const { return scaling_.depends_on_key_count(); }

  // theta'[pairs] for a call covering key_len keys (only dynamic_ntk depends on it).
  void set_frequencies(std::int64_t key_len) {
    scaled_frequencies(scaling_, base_, pairs_, key_len, frequencies_.data());
    for (int p = 0; p < pairs_; ++p) {
      theta_[p] = frequencies_[p].theta_scaled;
      plain_theta_[p] = frequencies_[p].theta;
    }
    theta_key_len_ = key_len;
  }

  // Brings the tables of q and k up to date with this call's positions (and, for dynamic_ntk,
  // its key count K, the tag of both tables).
  void prepare(const AttentionGeometry& g) {
    if (g.n_heads != H_ || g.d_head != dh_)
      throw std::invalid_argument("rope: geometry does not match the shape it was built for");
    const std::int64_t tag = dynamic() ? g.k_len : 0;
    if (q_table_.holds(g.q_pos, g.q_len, tag) && k_table_.holds(g.k_pos, g.k_len, tag)) return;
    if (dynamic() && theta_key_len_ != g.k_len) set_frequencies(g.k_len);
    const double a = amplitude_;  // q and k each scaled by a: the logits by a^2
    const std::int64_t n_hat = scaling_.start_tokens;  // longrope: 0 <= p < n_hat kept plain
    auto amplitude_of = [a, n_hat](const std::int64_t* pos) {
      return [a, n_hat, pos](int r, int) { return pos[r] >= 0 && pos[r] < n_hat ? 1.0 : a; };
    };
    if (!q_table_.holds(g.q_pos, g.q_len, tag))
      q_table_.build(g.q_pos, g.q_len, tag, theta_.data(), pairs_, amplitude_of(g.q_pos),
                     plain_theta_.data(), n_hat);
    if (!k_table_.holds(g.k_pos, g.k_len, tag))
      k_table_.build(g.k_pos, g.k_len, tag, theta_.data(), pairs_, amplitude_of(g.k_pos),
                     plain_theta_.data(), n_hat);
  }

  int H_, dh_;
  double base_;
  RopeScaling scaling_;
  double amplitude_;                     // a, the attention factor
  int pairs_;                            // d_rot / 2
  std::vector<RotaryPair> frequencies_;  // [pairs]: theta, theta', interpolation weight
  std::vector<double> theta_;            // [pairs]: theta', the frequencies the tables use
  std::vector<double> plain_theta_;      // [pairs]: theta, for longrope's start tokens
  std::int64_t theta_key_len_ = 0;       // the key count theta_ was computed for (dynamic_ntk)
  RotaryTable<T> q_table_, k_table_;
  bool naive_ = false;
  std::unique_ptr<TwoMapScores<T>> two_maps_;  // self_extend, rerope, leaky_rerope
};

std::optional<ConfigProblem> rope_rule(const Config& config) {
  const Options& o = config.encoding.options;
  if (!o.has("scaling")) return std::nullopt;
  if (auto problem = rope_scaling_problem(o)) return problem;
  if (config.model.n_heads < 1) return std::nullopt;  // the model's own check says why
  return longrope_length_problem(
      o, rotated_pairs(o.get_double("fraction"), config.model.d_model / config.model.n_heads));
}

}  // namespace

EncodingInfo rope_encoding_info() {
  std::vector<OptionSpec> options = {
      {"base", 10000.0, "theta_p = base^(-2p/d_rot): the wavelengths run from 2 pi to "
       "2 pi base", 1.000001},
      {"fraction", 1.0,
       "rotate the first 2 round(fraction d_h / 2) dims of each head, leave the rest "
       "unchanged (GPT-NeoX rotary_pct)",
       0, 1},
      {"naive", false,
       "self_extend, rerope, leaky_rerope: compute the merged scores in the reference double "
       "loop over (i, j) (tests; slow); the other methods ignore it"},
  };
  for (OptionSpec& o : rope_scaling_options()) options.push_back(std::move(o));
  return {"rope",
          EncodingFamily::relative,
          "RoPE: rotate each (2p, 2p+1) pair of q and k by position * base^(-2p/d_rot), so "
          "q.k depends on i - j only; no parameters; optional context-extension scaling "
          "(linear, ntk, dynamic_ntk, yarn, llama3, longrope; self_extend, rerope, leaky_rerope)",
          "Su et al. 2021",
          std::move(options),
          factory_float<Rope>(),
          factory_double<Rope>(),
          rope_rule};
}

}  // namespace poslab
