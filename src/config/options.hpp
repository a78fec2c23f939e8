// Typed options with defaults and ranges, declared by whoever owns them (an encoding declares
// its own, e.g. Shaw's `clip_k`). The config loader validates a TOML table against a list of
// OptionSpec, and `poslab encodings` prints them.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace poslab {

using OptionValue = std::variant<bool, std::int64_t, double, std::string>;

struct OptionSpec {
  std::string key;
  OptionValue default_value;
  std::string help;
  // Inclusive range for numeric options.
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  // Allowed values for string options (empty = any).
  std::vector<std::string> choices = {};
};

std::string option_to_string(const OptionValue& v);
std::string option_type_name(const OptionValue& v);

// A resolved set of option values: every declared key is present (defaults filled in).
class Options {
 public:
  Options() = default;
  explicit Options(std::map<std::string, OptionValue> values) : values_(std::move(values)) {}

  // Defaults of every spec.
  static Options defaults(const std::vector<OptionSpec>& specs) {
    std::map<std::string, OptionValue> v;
    for (const auto& s : specs) v[s.key] = s.default_value;
    return Options(std::move(v));
  }

  bool get_bool(const std::string& key) const { return std::get<bool>(at(key)); }
  std::int64_t get_int(const std::string& key) const { return std::get<std::int64_t>(at(key)); }
  double get_double(const std::string& key) const {
    const auto& v = at(key);
    if (auto i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
    return std::get<double>(v);
  }
  const std::string& get_string(const std::string& key) const {
    return std::get<std::string>(at(key));
  }
  void set(const std::string& key, OptionValue v) { values_[key] = std::move(v); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  const OptionValue& at(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) throw std::logic_error("option not declared: " + key);
    return it->second;
  }
  std::map<std::string, OptionValue> values_;
};

}  // namespace poslab
