#include "config/toml_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace poslab {

std::string number_text(double x) {
  char buffer[64];
  std::string text(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
  // to_chars writes exponents as e-04 and e+300; drop the '+' and the leading zeros.
  if (const auto e = text.find('e'); e != std::string::npos) {
    const bool negative = text[e + 1] == '-';
    const std::string digits = text.substr(e + 2);
    const auto first_nonzero = std::min(digits.find_first_not_of('0'), digits.size() - 1);
    text = text.substr(0, e) + (negative ? "e-" : "e") + digits.substr(first_nonzero);
  }
  return text;
}

std::string toml_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::string text = number_text(x);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char code[8];
          std::snprintf(code, sizeof code, "\\u%04x", c);
          out += code;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string toml_key(const std::string& key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
  return bare ? key : toml_string(key);
}

}  // namespace poslab
