// The scaling methods of RoPE: formulas in rope_scaling.hpp, each computed below beside its line.
#include "encodings/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "config/toml_text.hpp"

namespace poslab {

namespace {

RopeScalingMethod method_of(const std::string& name) {
  const auto& names = rope_scaling_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return RopeScalingMethod(i);
  throw std::invalid_argument("rope: unknown scaling '" + name + "'");
}

bool needs_original_len(RopeScalingMethod m) {
  return m == RopeScalingMethod::dynamic_ntk || m == RopeScalingMethod::yarn ||
         m == RopeScalingMethod::llama3 || m == RopeScalingMethod::longrope ||
         m == RopeScalingMethod::self_extend || m == RopeScalingMethod::rerope ||
         m == RopeScalingMethod::leaky_rerope;
}

bool two_maps(RopeScalingMethod m) {
  return m == RopeScalingMethod::self_extend || m == RopeScalingMethod::rerope ||
         m == RopeScalingMethod::leaky_rerope;
}

// Whether option `key` is at its default value.
bool at_default(const Options& o, const char* key) {
  return o.values().at(key) == Options::defaults(rope_scaling_options()).values().at(key);
}

const std::vector<std::string>& longrope_factors_names() {
  static const std::vector<std::string> names = {"switch", "short", "long"};
  return names;
}

// What is wrong with one of longrope's lists (key = "short_factor" or "long_factor"): not numbers,
// a factor below 1 or not finite, or a decrease (the paper's search space: 1 <= lambda_i <=
// lambda_(i+1)).
std::optional<ConfigProblem> factor_list_problem(const Options& o, const std::string& key) {
  const std::string name = "encoding." + key;
  std::vector<double> lambda;
  try {
    lambda = parse_factor_list(o.get_string(key));
  } catch (const std::invalid_argument& e) {
    return ConfigProblem{{name}, name + ": " + e.what()};
  }
  if (lambda.empty())
    return ConfigProblem{{name, "encoding.scaling"},
                         name + " must be set with encoding.scaling = longrope: one factor per "
                         "rotated pair, e.g. \"1, 1.5, 2, 4\" for d_rot = 8"};
  for (std::size_t i = 0; i < lambda.size(); ++i) {
    if (!(lambda[i] >= 1) || !std::isfinite(lambda[i]))
      return ConfigProblem{{name}, name + ": entry " + std::to_string(i) + " is " +
                                       number_text(lambda[i]) +
                                       "; LongRoPE's factors are finite and >= 1"};
    if (i > 0 && lambda[i] < lambda[i - 1])
      return ConfigProblem{{name}, name + " must not decrease (LongRoPE: lambda_i <= "
                                   "lambda_(i+1)): entry " + std::to_string(i) + " (" +
                                   number_text(lambda[i]) + ") < entry " + std::to_string(i - 1) +
                                   " (" + number_text(lambda[i - 1]) + ")"};
  }
  return std::nullopt;
}

// theta_i = b^(-2i/d), d = 2 pairs (the expression plain RoPE always used: bit for bit).
double plain_theta(double base, int i, int pairs) { return std::pow(base, -2.0 * i / (2.0 * pairs)); }

// NTK-aware: theta'_i = (b s^(d/(d-2)))^(-2i/d); the equivalent interpolation weight beside it.
void ntk(double base, double s, int pairs, RotaryPair* out) {
  const int d = 2 * pairs;
  // d = 2: one pair, theta_0 = 1 for any base; s^(d/(d-2)) is undefined and not needed.
  const double scaled_base = d > 2 ? base * std::pow(s, double(d) / double(d - 2)) : base;
  for (int i = 0; i < pairs; ++i) {
    out[i].theta = plain_theta(base, i, pairs);
    out[i].theta_scaled = plain_theta(scaled_base, i, pairs);
    out[i].interpolation =
        s == 1 ? 0.0 : (1.0 - out[i].theta_scaled / out[i].theta) / (1.0 - 1.0 / s);
  }
}

// theta'_i = theta_i / s * g_i + theta_i * (1 - g_i), given the g_i in out[i].interpolation.
void mix(double s, int pairs, RotaryPair* out) {
  for (int i = 0; i < pairs; ++i) {
    const double g = out[i].interpolation;
    out[i].theta_scaled = out[i].theta / s * g + out[i].theta * (1.0 - g);
  }
}

}  // namespace

const std::vector<std::string>& rope_scaling_names() {
  static const std::vector<std::string> names = {"none",   "linear",   "ntk",
                                                 "dynamic_ntk", "yarn", "llama3",
                                                 "longrope", "self_extend", "rerope",
                                                 "leaky_rerope"};
  return names;
}

std::vector<double> parse_factor_list(const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',' || c == '[' || c == ']') c = ' ';
  std::istringstream in(spaced);
  std::vector<double> out;
  for (std::string word; in >> word;) {
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) {
      std::string shown;  // a control character (a NUL would end the message) as \xNN
      for (unsigned char c : word) {
        if (c >= 0x20 && c != 0x7f) shown += char(c);
        else {
          static const char* hex = "0123456789abcdef";
          shown += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        }
      }
      throw std::invalid_argument("entry " + std::to_string(out.size()) + " ('" + shown +
                                  "') is not a number");
    }
    out.push_back(x);
  }
  return out;
}

bool RopeScaling::uses_long_factors(std::int64_t key_len) const {
  switch (longrope_factors) {
    case Factors::short_only: return false;
    case Factors::long_only: return true;
    case Factors::by_length: break;
  }
  return key_len > original_len;  // strict, as Hugging Face's longrope_frequency_update
}

bool RopeScaling::depends_on_key_count() const {
  return method == RopeScalingMethod::dynamic_ntk ||
         (method == RopeScalingMethod::longrope && longrope_factors == Factors::by_length);
}

bool RopeScaling::uses_two_maps() const { return two_maps(method); }

double RopeScaling::attention_factor() const {
  if (attention_factor_option > 0) return attention_factor_option;
  if (method == RopeScalingMethod::yarn && factor > 1) return 0.1 * std::log(factor) + 1.0;
  if (method == RopeScalingMethod::longrope && factor > 1)  // sqrt(1 + ln s / ln L)
    return std::sqrt(1.0 + std::log(factor) / std::log(double(original_len)));
  return 1.0;
}

double RopeScaling::dynamic_factor(std::int64_t key_len) const {
  if (key_len <= original_len) return 1.0;  // K <= L: the trained base
  return factor * double(key_len) / double(original_len) - (factor - 1.0);  // s K / L - (s - 1)
}

std::vector<OptionSpec> rope_scaling_options() {
  return {
      {"scaling", std::string("none"),
       "context extension of a model trained at original_len (docs/05, `poslab encodings "
       "--describe rope`): none, linear (PI), ntk, dynamic_ntk, yarn, llama3, longrope, or, "
       "changing the positions of far keys with two score passes, self_extend, rerope, "
       "leaky_rerope",
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
       rope_scaling_names()},
      {"factor", 1.0, "scale s (> 0): the context is extended s times; ignored by none", 0},
      {"original_len", std::int64_t(0),
       "L, the length the model was trained at (dynamic_ntk, yarn, llama3 need it; 0 = not set)",
       0, 1 << 24},
      {"beta_fast", 32.0, "yarn: pairs with more than beta_fast rotations over L are kept", 0},
      {"beta_slow", 1.0, "yarn: pairs with fewer than beta_slow rotations over L are interpolated",
       0},
      {"attention_factor", 0.0,
       "q and k are each multiplied by it (logits by its square); 0 = the method's default, "
       "0.1 ln s + 1 for yarn, sqrt(1 + ln s / ln original_len) for longrope (s > 1), 1 otherwise",
       0, 100},
      {"low_freq_factor", 1.0, "llama3: wavelengths above L / low_freq_factor are divided by s",
       0},
      {"high_freq_factor", 4.0, "llama3: wavelengths below L / high_freq_factor are kept", 0},
      {"short_factor", std::string(""),
       "longrope: lambda_i, one per rotated pair (d_rot / 2 numbers >= 1, not decreasing, "
       "separated by commas; Hugging Face's short_factor), used while a call covers K <= "
       "original_len keys"},
      {"long_factor", std::string(""),
       "longrope: lambda_i as short_factor (Hugging Face's long_factor), used when K > "
       "original_len"},
      {"longrope_factors", std::string("switch"),
       "longrope: switch = long_factor iff the call covers K > original_len keys (Hugging "
       "Face), short or long = always that list (llama.cpp's static choice)",
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
       longrope_factors_names()},
      {"start_tokens", std::int64_t(0),
       "longrope: n_hat, positions 0 .. n_hat - 1 keep the plain frequencies, unscaled (the "
       "paper's start-token retention)",
       0, 1 << 24},
      {"group_size", std::int64_t(8),
       "self_extend: G, keys at distance >= neighbor_window get grouped positions floor(t / G) "
       "(LongLM's group_size_1, default 8; llama.cpp's --grp-attn-n)",
       1, 1 << 24},
      {"neighbor_window", std::int64_t(1024),
       "self_extend: W, keys at distance < W keep plain RoPE; must be a multiple of group_size "
       "and < original_len (LongLM's group_size_2, default 1024)",
       1, 1 << 24},
      {"rerope_window", std::int64_t(512),
       "rerope, leaky_rerope: w, distances >= w are clipped to w (rerope) or continue with "
       "slope 1 / leaky_factor (leaky); < original_len (Su's code: 512)",
       1, 1 << 24},
      {"leaky_factor", 16.0,
       "leaky_rerope: k > 1, beyond rerope_window the distance grows by 1 / k per token "
       "(Su's scaling_factor, 16)",
       0},
  };
}

bool rope_scaling_option_matters(const std::string& scaling, const std::string& key) {
  using M = RopeScalingMethod;
  const M m = method_of(scaling);
  auto among = [&](std::initializer_list<M> methods) {
    return std::find(methods.begin(), methods.end(), m) != methods.end();
  };
  if (key == "factor") return m != M::none && !two_maps(m);  // "ignored by none"
  if (key == "attention_factor") return !two_maps(m);
  if (key == "original_len") return needs_original_len(m);
  if (key == "beta_fast" || key == "beta_slow") return m == M::yarn;
  if (key == "low_freq_factor" || key == "high_freq_factor") return m == M::llama3;
  if (key == "short_factor" || key == "long_factor" || key == "longrope_factors" ||
      key == "start_tokens")
    return m == M::longrope;
  if (key == "group_size" || key == "neighbor_window") return m == M::self_extend;
  if (key == "rerope_window") return among({M::rerope, M::leaky_rerope});
  if (key == "leaky_factor") return m == M::leaky_rerope;
  return true;  // scaling itself, and every option that is not a scaling's
}

std::optional<ConfigProblem> rope_scaling_problem(const Options& o) {
  const RopeScalingMethod m = method_of(o.get_string("scaling"));
  const double s = o.get_double("factor");
  const std::string scaling = "encoding.scaling = " + o.get_string("scaling");
  if (!(s > 0) || !std::isfinite(s))
    return ConfigProblem{{"encoding.factor"},
                         "encoding.factor must be a finite number > 0, got " + number_text(s)};
  if (m != RopeScalingMethod::longrope)
    for (const char* key : {"short_factor", "long_factor", "longrope_factors", "start_tokens"})
      if (o.values().at(key) != Options::defaults(rope_scaling_options()).values().at(key))
        return ConfigProblem{{std::string("encoding.") + key, "encoding.scaling"},
                             std::string("encoding.") + key + " is an option of longrope; it has "
                             "no effect with " + scaling};
  for (const char* key : {"group_size", "neighbor_window"})
    if (m != RopeScalingMethod::self_extend && !at_default(o, key))
      return ConfigProblem{{std::string("encoding.") + key, "encoding.scaling"},
                           std::string("encoding.") + key + " is an option of self_extend; it "
                           "has no effect with " + scaling};
  if (m != RopeScalingMethod::rerope && m != RopeScalingMethod::leaky_rerope &&
      !at_default(o, "rerope_window"))
    return ConfigProblem{{"encoding.rerope_window", "encoding.scaling"},
                         "encoding.rerope_window is an option of rerope and leaky_rerope; it has "
                         "no effect with " + scaling};
  if (m != RopeScalingMethod::leaky_rerope && !at_default(o, "leaky_factor"))
    return ConfigProblem{{"encoding.leaky_factor", "encoding.scaling"},
                         "encoding.leaky_factor is an option of leaky_rerope; it has no effect "
                         "with " + scaling};
  if (two_maps(m)) {
    // These keep every frequency and amplitude; a factor would silently mean nothing.
    if (s != 1 || !at_default(o, "attention_factor"))
      return ConfigProblem{{s != 1 ? "encoding.factor" : "encoding.attention_factor",
                            "encoding.scaling"},
                           std::string(s != 1 ? "encoding.factor" : "encoding.attention_factor") +
                               " has no effect with " + scaling + " (it keeps RoPE's "
                               "frequencies and changes positions; its options are " +
                               (m == RopeScalingMethod::self_extend
                                    ? "group_size and neighbor_window)"
                                    : m == RopeScalingMethod::rerope
                                          ? "rerope_window)"
                                          : "rerope_window and leaky_factor)")};
    const std::int64_t L = o.get_int("original_len");
    if (L < 1)
      return ConfigProblem{{"encoding.original_len", "encoding.scaling"},
                           "encoding.original_len must be set (>= 1, the length the model was "
                           "trained at) with " + scaling};
    if (m == RopeScalingMethod::self_extend) {
      const std::int64_t G = o.get_int("group_size"), W = o.get_int("neighbor_window");
      // G | W: the official Llama.py writes W - W / G in true division, Llama_4_40.py W // G;
      // the two agree only when G divides W (docs/conventions.md, "Self-Extend").
      if (W % G != 0)
        return ConfigProblem{{"encoding.neighbor_window", "encoding.group_size"},
                             "encoding.neighbor_window (" + std::to_string(W) +
                                 ") must be a multiple of encoding.group_size (" +
                                 std::to_string(G) + "): Self-Extend's shift W - W / G is "
                                 "then the same in integer and true division"};
      if (W >= L)
        return ConfigProblem{{"encoding.neighbor_window", "encoding.original_len"},
                             "encoding.neighbor_window (" + std::to_string(W) +
                                 ") must be < encoding.original_len (" + std::to_string(L) +
                                 "): the neighbour distances 0 .. W - 1 must be trained ones"};
    } else {
      const std::int64_t w = o.get_int("rerope_window");
      if (w >= L)
        return ConfigProblem{{"encoding.rerope_window", "encoding.original_len"},
                             "encoding.rerope_window (" + std::to_string(w) +
                                 ") must be < encoding.original_len (" + std::to_string(L) +
                                 "): the clipped distance w must be a trained one"};
      const double k = o.get_double("leaky_factor");
      if (m == RopeScalingMethod::leaky_rerope && (!(k > 1) || !std::isfinite(k)))
        return ConfigProblem{{"encoding.leaky_factor"},
                             "encoding.leaky_factor must be a finite number > 1 (the slope "
                             "beyond rerope_window is 1 / k; k = 1 is plain RoPE), got " +
                                 number_text(k)};
    }
  }
  if (m == RopeScalingMethod::none && s != 1)
    return ConfigProblem{{"encoding.factor", "encoding.scaling"},
                         "encoding.factor (" + number_text(s) +
                             ") has no effect with encoding.scaling = none: choose a scaling "
                             "(linear, ntk, dynamic_ntk, yarn, llama3)"};
  if (needs_original_len(m) && o.get_int("original_len") < 1)
    return ConfigProblem{{"encoding.original_len", "encoding.scaling"},
                         "encoding.original_len must be set (>= 1, the length the model was "
                         "trained at) with " + scaling};
  if (m == RopeScalingMethod::yarn) {
    const double fast = o.get_double("beta_fast"), slow = o.get_double("beta_slow");
    if (!(slow > 0) || !(fast > slow))
      return ConfigProblem{{"encoding.beta_fast", "encoding.beta_slow"},
                           "encoding.beta_fast (" + number_text(fast) +
                               ") must be greater than encoding.beta_slow (" + number_text(slow) +
                               "), and both > 0"};
  }
  if (m == RopeScalingMethod::longrope) {
    if (o.get_int("original_len") < 2)
      return ConfigProblem{{"encoding.original_len"},
                           "encoding.original_len must be >= 2 with " + scaling +
                               " (its attention factor divides by ln original_len)"};
    for (const char* key : {"short_factor", "long_factor"})
      if (auto problem = factor_list_problem(o, key)) return problem;
  }
  if (m == RopeScalingMethod::llama3) {
    const double low = o.get_double("low_freq_factor"), high = o.get_double("high_freq_factor");
    if (!(low > 0) || !(high > low))
      return ConfigProblem{{"encoding.high_freq_factor", "encoding.low_freq_factor"},
                           "encoding.high_freq_factor (" + number_text(high) +
                               ") must be greater than encoding.low_freq_factor (" +
                               number_text(low) + "), and both > 0"};
  }
  return std::nullopt;
}

RopeScaling rope_scaling_from_options(const Options& o) {
  if (auto problem = rope_scaling_problem(o)) throw std::invalid_argument("rope: " + problem->message);
  RopeScaling s;
  s.method = method_of(o.get_string("scaling"));
  s.factor = o.get_double("factor");
  s.original_len = o.get_int("original_len");
  s.beta_fast = o.get_double("beta_fast");
  s.beta_slow = o.get_double("beta_slow");
  s.low_freq_factor = o.get_double("low_freq_factor");
  s.high_freq_factor = o.get_double("high_freq_factor");
  s.attention_factor_option = o.get_double("attention_factor");
  if (s.method == RopeScalingMethod::longrope) {
    s.short_factor = parse_factor_list(o.get_string("short_factor"));
    s.long_factor = parse_factor_list(o.get_string("long_factor"));
    const std::string& which = o.get_string("longrope_factors");
    s.longrope_factors = which == "short"  ? RopeScaling::Factors::short_only
                         : which == "long" ? RopeScaling::Factors::long_only
                                           : RopeScaling::Factors::by_length;
    s.start_tokens = o.get_int("start_tokens");
  }
  s.group_size = o.get_int("group_size");
  s.neighbor_window = o.get_int("neighbor_window");
  s.rerope_window = o.get_int("rerope_window");
  s.leaky_factor = o.get_double("leaky_factor");
  return s;
}

std::optional<ConfigProblem> longrope_length_problem(const Options& o, int pairs) {
  if (o.get_string("scaling") != "longrope") return std::nullopt;
  for (const char* key : {"short_factor", "long_factor"}) {
    const std::size_t n = parse_factor_list(o.get_string(key)).size();
    if (n != std::size_t(pairs))
      return ConfigProblem{{std::string("encoding.") + key},
                           std::string("encoding.") + key + " has " + std::to_string(n) +
                               " factors; it needs one per rotated pair, d_rot / 2 = " +
                               std::to_string(pairs) + " (model.d_model / model.n_heads and "
                               "encoding.fraction set d_rot)"};
  }
  return std::nullopt;
}

void scaled_frequencies(const RopeScaling& sc, double b, int pairs, std::int64_t key_len,
                        RotaryPair* out) {
  const double s = sc.factor, L = double(sc.original_len);
  const int d = 2 * pairs;
  for (int i = 0; i < pairs; ++i) out[i] = {plain_theta(b, i, pairs), 0.0, 0.0};
  switch (sc.method) {
    case RopeScalingMethod::self_extend:  // positions change, not frequencies
    case RopeScalingMethod::rerope:
    case RopeScalingMethod::leaky_rerope:
    case RopeScalingMethod::none:
      for (int i = 0; i < pairs; ++i) out[i].theta_scaled = out[i].theta;
      return;
    case RopeScalingMethod::linear:  // positions m -> m / s
      for (int i = 0; i < pairs; ++i) out[i] = {out[i].theta, out[i].theta / s, 1.0};
      return;
    case RopeScalingMethod::ntk:
      return ntk(b, s, pairs, out);
    case RopeScalingMethod::dynamic_ntk:
      return ntk(b, sc.dynamic_factor(key_len), pairs, out);
    case RopeScalingMethod::yarn: {
      // The official code's dimension bounds: the (fractional) dimension at which a pair makes
      // `rotations` turns over L is d ln(L / (rotations 2 pi)) / (2 ln b).
      auto dimension = [&](double rotations) {
        return d * std::log(L / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(b));
      };
      const double low = std::max(std::floor(dimension(sc.beta_fast)), 0.0);
      double high = std::min(std::ceil(dimension(sc.beta_slow)), double(d - 1));
      if (high == low) high += 0.001;  // avoids a division by zero
      for (int i = 0; i < pairs; ++i)
        out[i].interpolation = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      return mix(s, pairs, out);
    }
    case RopeScalingMethod::llama3: {
      const double lo = sc.low_freq_factor, hi = sc.high_freq_factor;
      for (int i = 0; i < pairs; ++i) {
        const double wavelength = 2.0 * std::numbers::pi / out[i].theta;
        double kept;  // the weight on the unchanged frequency, 1 - g_i
        if (wavelength < L / hi) kept = 1.0;        // high frequencies: kept
        else if (wavelength > L / lo) kept = 0.0;   // low frequencies: divided by s
        else kept = (L / wavelength - lo) / (hi - lo);  // in between: a linear mix
        out[i].interpolation = 1.0 - kept;
      }
      return mix(s, pairs, out);
    }
    case RopeScalingMethod::longrope: {
      const std::vector<double>& lambda =
          sc.uses_long_factors(key_len) ? sc.long_factor : sc.short_factor;
      if (int(lambda.size()) != pairs)
        throw std::invalid_argument("rope: longrope has " + std::to_string(lambda.size()) +
                                    " factors for " + std::to_string(pairs) + " pairs");
      for (int i = 0; i < pairs; ++i) {
        // 1 / (lambda_i b^(2i/d)): Hugging Face's expression, 1.0 / (ext_factors * base**(2i/d))
        out[i].theta_scaled = 1.0 / (lambda[i] * std::pow(b, 2.0 * i / d));
        out[i].interpolation =
            s == 1 ? 0.0 : (1.0 - out[i].theta_scaled / out[i].theta) / (1.0 - 1.0 / s);
      }
      return;
    }
  }
}

}  // namespace poslab
