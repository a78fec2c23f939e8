// Values as TOML text: what the config writer (config_to_toml, load.cpp) and the study reader
// (study.cpp, which hands values to the config loader as `key = value` text) both produce. Each
// reads back, through toml++, as exactly the value it was made from.
#pragma once

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
