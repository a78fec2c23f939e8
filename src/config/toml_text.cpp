#include "config/toml_text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

namespace {
// A run of characters that may form a bare key, a number, a boolean or a date-time.
bool is_bare_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+' ||
         c == '.' || c == ':';
}

// The dots of one bare run that belong to a dotted key: all of them, unless the run is one
// number or one time with a single fractional dot.
std::size_t key_dots_of(const std::string& run) {
  const std::size_t dots = std::count(run.begin(), run.end(), '.');
  if (dots != 1) return dots;
  const std::size_t dot = run.find('.');
  const bool digit_before = dot > 0 && std::isdigit(static_cast<unsigned char>(run[dot - 1]));
  const bool digit_after =
      dot + 1 < run.size() && std::isdigit(static_cast<unsigned char>(run[dot + 1]));
  return digit_before && digit_after ? 0 : 1;
}
}  // namespace

TomlLimitProblem toml_limit_problem(const std::string& text) {
  if (text.size() > kMaxTomlBytes)
    return {0, "is " + std::to_string(text.size()) + " bytes; a config or study file may have at most " +
                   std::to_string(kMaxTomlBytes)};
  std::size_t line = 1, dots_on_line = 0;
  std::string run;
  auto end_run = [&] {
    dots_on_line += key_dots_of(run);
    run.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_bare_char(c)) {
      run += c;
      continue;
    }
    end_run();
    if (c == '\n') {
      if (dots_on_line > kMaxTomlKeyDots) break;
      ++line, dots_on_line = 0;
    } else if (c == '#') {  // a comment, to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a string, perhaps multi-line ("""...""", '''...''')
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      const std::string close = multi ? std::string(3, c) : std::string(1, c);
      i += close.size();
      while (i < text.size() && text.compare(i, close.size(), close) != 0) {
        if (text[i] == '\n') {
          if (!multi) break;  // an unterminated string: toml++ reports it
          ++line;
        }
        if (c == '"' && text[i] == '\\') ++i;  // an escape: skip the escaped character
        ++i;
      }
      if (multi) {  // """a"""" ends with extra quotes that belong to the string
        i += close.size() - 1;
        while (i + 1 < text.size() && text[i + 1] == c) ++i;
      } else if (i < text.size() && text[i] == '\n') {
        --i;  // let the loop see the line break
      }
    }
  }
  end_run();
  if (dots_on_line > kMaxTomlKeyDots)
    return {line, "a dotted key of more than " + std::to_string(kMaxTomlKeyDots + 1) +
                      " parts on one line (at most " + std::to_string(kMaxTomlKeyDots) +
                      " dots in the keys of a line)"};
  return {};
}

std::optional<std::string> read_toml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec)) return std::nullopt;
  std::string text(kMaxTomlBytes + 1, '\0');  // read without `<<`: an empty file is no failure
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return std::nullopt;
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace poslab
