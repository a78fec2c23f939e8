// Context extension of a trained RoPE model: the per-pair frequencies of the scaling methods
// that models are loaded with today (Hugging Face transformers' modeling_rope_utils.py and the
// official YaRN code; docs/conventions.md, "RoPE scalings", and docs/05-beyond.md).
//
// Notation: d = the rotated dimensions of a head (d_h x fraction), pairs i = 0 .. d/2 - 1, base b,
// theta_i = b^(-2i/d), wavelength lambda_i = 2 pi / theta_i, L = original_len (the length the model
// was trained at), s = factor, K = the number of key positions the call covers (memory + segment).
//
//   none         theta'_i = theta_i
//   linear (PI)  theta'_i = theta_i / s                               (Chen et al. 2023)
//   ntk          theta'_i = (b s^(d / (d - 2)))^(-2i/d)              (bloc97 2023)
//   dynamic_ntk  ntk with s replaced by s K / L - (s - 1) when K > L, plain theta_i when K <= L
//   yarn         theta'_i = theta_i / s * g_i + theta_i * (1 - g_i)     (Peng et al. 2023)
//                g_i = clamp((i - low) / (high - low), 0, 1), the interpolation weight, with
//                low  = max(0,     floor(d ln(L / (beta_fast 2 pi)) / (2 ln b)))
//                high = min(d - 1, ceil (d ln(L / (beta_slow 2 pi)) / (2 ln b)))  (+0.001 if equal)
//                and the attention factor a = 0.1 ln s + 1 (s > 1; else 1) on q and on k
//   longrope     theta'_i = 1 / (lambda_i b^(2i/d))                    (Ding et al. 2024; Phi-3)
//                lambda = long_factor if K > L (strict '>', Hugging Face's
//                longrope_frequency_update), else short_factor; option longrope_factors = short
//                or long fixes one list instead (llama.cpp chooses statically). Attention factor
//                a = sqrt(1 + ln s / ln L) (s > 1; else 1), the same for both lists. Positions
//                0 <= p < start_tokens (n_hat, the paper's start-token retention) turn by the
//                plain theta_i with amplitude 1 (the released MixedLongRoPEScaledRotaryEmbedding
//                overwrites their cos and sin with the unscaled table)
//   self_extend, rerope, leaky_rerope   theta'_i = theta_i; these change the POSITIONS of far
//                (query, key) pairs instead, with two score passes merged by distance
//                (two_map_scores.hpp, rope_position_maps.hpp):
//     self_extend  (Jin et al. 2024) distance r < W = neighbor_window: plain; else the grouped
//                  positions floor(t_i / G) + W - W / G and floor(t_j / G), G = group_size
//     rerope       (Su 2023) r < w = rerope_window: plain; else the distance is w
//     leaky_rerope (Su 2023) r < w: plain; else w + (r - w) / k, k = leaky_factor
//   llama3       g_i = 0 where lambda_i < L / high_freq_factor (kept), 1 where lambda_i >
//                L / low_freq_factor (divided by s), else 1 - (L / lambda_i - low_freq_factor) /
//                (high_freq_factor - low_freq_factor); theta'_i as for yarn
//
// The interpolation weight g_i says how much of pair i is interpolated (divided by s): exactly
// the mixing weight for yarn and llama3, 1 for linear, 0 for none; for ntk and dynamic_ntk,
// which change the base instead of mixing, it is the equivalent weight
// g_i = (1 - theta'_i / theta_i) / (1 - 1 / s_eff) (s_eff = s, or dynamic's s K / L - (s - 1);
// 0 when s_eff = 1; longrope likewise, with s). With d = 2 (a single pair, theta_0 = 1 whatever the base) ntk has nothing
// to change: s^(d/(d-2)) is not defined there and the base is left as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/options.hpp"

namespace poslab {

enum class RopeScalingMethod {
  none, linear, ntk, dynamic_ntk, yarn, llama3, longrope, self_extend, rerope, leaky_rerope
};

// "none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope", "self_extend", "rerope",
// "leaky_rerope": the values of option `scaling`.
const std::vector<std::string>& rope_scaling_names();

struct RopeScaling {
  RopeScalingMethod method = RopeScalingMethod::none;
  double factor = 1;              // s
  std::int64_t original_len = 0;  // L (0: not set; dynamic_ntk, yarn and llama3 need it)
  double beta_fast = 32;          // yarn: pairs with more rotations over L are kept
  double beta_slow = 1;           // yarn: pairs with fewer rotations over L are interpolated
  double low_freq_factor = 1;     // llama3
  double high_freq_factor = 4;    // llama3
  double attention_factor_option = 0;  // 0: the method's default (attention_factor())
  // longrope: lambda_i per pair [d/2], Hugging Face's layout (pair i has theta_i = b^(-2i/d))
  std::vector<double> short_factor, long_factor;
  enum class Factors { by_length, short_only, long_only };  // option longrope_factors
  Factors longrope_factors = Factors::by_length;
  std::int64_t start_tokens = 0;  // longrope: n_hat
  std::int64_t group_size = 8;         // self_extend: G
  std::int64_t neighbor_window = 1024; // self_extend: W
  std::int64_t rerope_window = 512;    // rerope, leaky_rerope: w
  double leaky_factor = 16;            // leaky_rerope: k (slope 1 / k beyond w)

  // Whether the method merges two score passes (self_extend, rerope, leaky_rerope).
  bool uses_two_maps() const;

  // longrope: whether a call covering `key_len` keys uses long_factor (K > L, or fixed).
  bool uses_long_factors(std::int64_t key_len) const;
  // Whether the frequencies depend on the key count of the call (dynamic_ntk; longrope's switch).
  bool depends_on_key_count() const;

  // The factor q and k are each multiplied by (the logits by its square): the option if set,
  // else 0.1 ln s + 1 for yarn with s > 1 (Hugging Face's get_mscale), sqrt(1 + ln s / ln L)
  // for longrope with s > 1 (Hugging Face's _compute_longrope_parameters), else 1.
  double attention_factor() const;
  // The scale dynamic NTK uses for a call covering `key_len` keys: s K / L - (s - 1) if K > L,
  // else 1 (the trained base).
  double dynamic_factor(std::int64_t key_len) const;
};

// The options `scaling`, `factor`, `original_len`, `beta_fast`, `beta_slow`, `attention_factor`,
// `low_freq_factor`, `high_freq_factor`, `short_factor`, `long_factor`, `longrope_factors`,
// `start_tokens`, `group_size`, `neighbor_window`, `rerope_window`, `leaky_factor` with their
// defaults (none: plain RoPE).
std::vector<OptionSpec> rope_scaling_options();

// Reads them back (the option keys above must be declared); throws std::invalid_argument on a
// combination rope_scaling_problem reports.
RopeScaling rope_scaling_from_options(const Options& o);

// What is wrong with the scaling options of an encoding section, with the keys to blame (the
// config loader's rule between keys): a factor <= 0, original_len missing where the method needs
// it, a factor set with scaling = none, beta or frequency factors out of order.
std::optional<ConfigProblem> rope_scaling_problem(const Options& o);

// Whether option `key` of rope_scaling_options() has an effect under scaling `scaling` (one of
// rope_scaling_names()): a method's own options (beta_fast for yarn, group_size for self_extend,
// ...) only under it; factor not under none or a two-map method, attention_factor not under a
// two-map method;
// original_len only where the method reads it. `poslab explore` lists, among the settings in
// which runs differ, only those that matter for each run's scaling.
bool rope_scaling_option_matters(const std::string& scaling, const std::string& key);

// longrope's lists against the head: each must hold d_rot / 2 = `pairs` numbers.
std::optional<ConfigProblem> longrope_length_problem(const Options& o, int pairs);

// A factor list as written in a string option: numbers separated by commas and/or spaces,
// optionally in brackets (Hugging Face's JSON list pastes as is): "1, 1.25, 2" or "[1,1.25,2]".
// Throws std::invalid_argument naming the entry that is not a number.
std::vector<double> parse_factor_list(const std::string& text);

// One rotation pair: its plain inverse frequency, the scaled one and its interpolation weight.
struct RotaryPair {
  double theta;          // theta_i = b^(-2i/d)
  double theta_scaled;   // theta'_i
  double interpolation;  // g_i
};

// out[i] for i = 0 .. pairs - 1 (d = 2 pairs), for a call covering key_len keys (only
// dynamic_ntk reads it). Allocates nothing.
void scaled_frequencies(const RopeScaling& s, double base, int pairs, std::int64_t key_len,
                        RotaryPair* out);

}  // namespace poslab
