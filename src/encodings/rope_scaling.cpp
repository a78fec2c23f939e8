// The scaling methods of RoPE: formulas in rope_scaling.hpp, each computed below beside its line.
#include "encodings/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
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
         m == RopeScalingMethod::llama3;
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
  static const std::vector<std::string> names = {"none", "linear", "ntk", "dynamic_ntk", "yarn",
                                                 "llama3"};
  return names;
}

double RopeScaling::attention_factor() const {
  if (attention_factor_option > 0) return attention_factor_option;
  if (method == RopeScalingMethod::yarn && factor > 1) return 0.1 * std::log(factor) + 1.0;
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
       "--describe rope`): none, linear (PI), ntk, dynamic_ntk, yarn or llama3",
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
       "0.1 ln s + 1 for yarn (s > 1), 1 otherwise",
       0, 100},
      {"low_freq_factor", 1.0, "llama3: wavelengths above L / low_freq_factor are divided by s",
       0},
      {"high_freq_factor", 4.0, "llama3: wavelengths below L / high_freq_factor are kept", 0},
  };
}

std::optional<ConfigProblem> rope_scaling_problem(const Options& o) {
  const RopeScalingMethod m = method_of(o.get_string("scaling"));
  const double s = o.get_double("factor");
  const std::string scaling = "encoding.scaling = " + o.get_string("scaling");
  if (!(s > 0) || !std::isfinite(s))
    return ConfigProblem{{"encoding.factor"},
                         "encoding.factor must be a finite number > 0, got " + number_text(s)};
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
  return s;
}

void scaled_frequencies(const RopeScaling& sc, double b, int pairs, std::int64_t key_len,
                        RotaryPair* out) {
  const double s = sc.factor, L = double(sc.original_len);
  const int d = 2 * pairs;
  for (int i = 0; i < pairs; ++i) out[i] = {plain_theta(b, i, pairs), 0.0, 0.0};
  switch (sc.method) {
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
  }
}

}  // namespace poslab
