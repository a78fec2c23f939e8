// What sets configs apart: the settings in which runs differ, for `poslab explore`'s column
// headers (a YaRN s = 8 run beside its unscaled parent is "encoding.factor = 8.0,
// encoding.scaling = "yarn"", not only "(rope)"). Implemented in load.cpp, beside
// experiment_difference, with which it shares what is no part of an experiment.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace poslab {

// Per config, the settings in which not all `configs` agree, as "section.key = value"
// (config_to_toml's TOML value; "(not set)" for a key another encoding has), in file order,
// without what experiment_difference ignores (out_dir, train.threads, train.save_state_every).
// Nothing for a single config.
std::vector<std::vector<std::string>> differing_settings(const std::vector<Config>& configs);

}  // namespace poslab
