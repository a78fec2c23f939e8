// A label for one byte that any JSON reader, plot or web page can show: printable ASCII as it
// is, a few control characters as C escapes, everything else as \xNN. Used by `poslab attention`
// (tokens.json) and `poslab explore` (the explorer's text).
#pragma once

#include <string>

namespace poslab {

inline std::string byte_label(unsigned char c) {
  switch (c) {
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    default: break;
  }
  if (c >= 32 && c < 127) return std::string(1, char(c));
  static const char* hex = "0123456789abcdef";
  return std::string("\\x") + hex[c >> 4] + hex[c & 15];
}

}  // namespace poslab
