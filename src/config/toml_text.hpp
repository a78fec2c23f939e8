// Values as TOML text: what the config writer (config_to_toml, load.cpp) and the study reader
// (study.cpp, which hands values to the config loader as `key = value` text) both produce. Each
// reads back, through toml++, as exactly the value it was made from.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace poslab {

// The shortest text that reads back as exactly `x`: 0.001, 3e-4, 1e300 (not always a float to
// TOML: 2 stays "2").
std::string number_text(double x);

// A TOML float: number_text, with ".0" added where it would read back as an integer (2.0);
// nan, inf, -inf as TOML spells them.
std::string toml_float(double x);

// A basic string, quoted and escaped: "a \"b\"\n".
std::string toml_string(const std::string& s);

// A key as TOML writes it: bare if it can be (letters, digits, '_' and '-'), quoted otherwise
// ("train.seed" keeps its quotes, so that it stays one key).
std::string toml_key(const std::string& key);

}  // namespace poslab

namespace poslab {

// What toml++ cannot be given safely. It limits nested arrays and inline tables itself (256),
// but not the parts of a dotted key: `a.a.a...` of some 50,000 parts makes it recurse until the
// stack overflows (SIGSEGV, measured with toml++ 3.3). A config or study file is small, so:
constexpr std::size_t kMaxTomlBytes = 1 << 20;  // 1 MiB
constexpr std::size_t kMaxTomlKeyDots = 256;    // dots of keys on one line (so at most 257 parts)

// Why `text` must not be parsed ("" if it may be), and the 1-based line at fault (0: the whole
// text). Dots are counted outside strings and comments; the one dot of a number (1.5, 2.5e-3) or
// of a time (07:32:00.999) is not a key's.
struct TomlLimitProblem {
  std::size_t line = 0;
  std::string what;
};
TomlLimitProblem toml_limit_problem(const std::string& text);

// The text of a config or study file, read with at most kMaxTomlBytes + 1 bytes (so that a file
// that is too long, even /dev/zero, is refused by toml_limit_problem, not read forever); an
// empty file is valid (every key at its default). Nothing if the file cannot be read.
std::optional<std::string> read_toml_file(const std::string& path);

}  // namespace poslab
