// What loading a config says: the error message of config_from_string on a TOML text (as file
// "t.toml", with every registered encoding and task), or "no error". For tests of bad input,
// which check that a message names the key, the file and the line.
#pragma once

#include <exception>
#include <string>

#include "config/load.hpp"
#include "train/registered_choices.hpp"

namespace poslab::testing {

inline std::string config_error(const std::string& toml) {
  try {
    config_from_string(toml, "t.toml", registered_choices());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace poslab::testing
