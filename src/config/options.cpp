#include "config/options.hpp"

#include <sstream>

#include "config/toml_text.hpp"

namespace poslab {

std::string option_to_string(const OptionValue& v) {
  std::ostringstream out;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, bool>)
          out << (x ? "true" : "false");
        else if constexpr (std::is_same_v<X, std::string>)
          out << '"' << x << '"';
        else if constexpr (std::is_same_v<X, double>)
          out << number_text(x);  // exactly: -2147483649, not -2.14748e+09
        else
          out << x;
      },
      v);
  return out.str();
}

std::string option_type_name(const OptionValue& v) {
  switch (v.index()) {
    case 0: return "boolean";
    case 1: return "integer";
    case 2: return "float";
    default: return "string";
  }
}

}  // namespace poslab
