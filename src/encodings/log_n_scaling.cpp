// Log-n attention scaling: the formula in log_n_scaling.hpp, computed below.
#include "encodings/log_n_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace poslab {

double LogNScaling::factor(std::int64_t n) const {
  return std::max(1.0, std::log(double(n)) / std::log(double(len)));  // max(1, ln n / ln L)
}

const std::vector<std::string>& log_n_names() {
  static const std::vector<std::string> names = {"off", "eval", "always"};
  return names;
}

std::vector<OptionSpec> log_n_options() {
  return {
      {"log_n", std::string("off"),
       "log-n scaling, any encoding: the logits of a query attending to n keys are multiplied "
       "by max(1, ln n / ln log_n_len); off, eval (evaluation passes only, Qwen's "
       "use_logn_attn) or always (training too)",
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
       log_n_names()},
      {"log_n_len", std::int64_t(0),
       "L of log-n scaling, the length the model was trained at (>= 2; 0 = not set)", 0,
       1 << 24},
  };
}

namespace {
LogNScaling::Mode mode_of(const std::string& name) {
  const auto& names = log_n_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return LogNScaling::Mode(i);
  throw std::invalid_argument("log_n: unknown mode '" + name + "'");
}
}  // namespace

std::optional<ConfigProblem> log_n_problem(const Options& o) {
  if (!o.has("log_n")) return std::nullopt;
  const std::string& mode = o.get_string("log_n");
  const std::int64_t len = o.get_int("log_n_len");
  if (mode == "off" && len != 0)
    return ConfigProblem{{"encoding.log_n_len", "encoding.log_n"},
                         "encoding.log_n_len (" + std::to_string(len) +
                             ") has no effect with encoding.log_n = off: set log_n = eval or "
                             "always"};
  if (mode != "off" && len < 2)
    return ConfigProblem{{"encoding.log_n_len", "encoding.log_n"},
                         "encoding.log_n_len must be >= 2 (the length the model was trained at; "
                         "f = ln n / ln log_n_len) with encoding.log_n = " + mode + ", got " +
                             std::to_string(len)};
  return std::nullopt;
}

LogNScaling log_n_from_options(const Options& o) {
  if (!o.has("log_n")) return {};
  if (auto problem = log_n_problem(o)) throw std::invalid_argument(problem->message);
  return {mode_of(o.get_string("log_n")), o.get_int("log_n_len")};
}

}  // namespace poslab
