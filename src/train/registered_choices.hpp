// The bridge between the registries and the config loader: every registered encoding and task,
// described as a ConfigChoices (config/choices.hpp) for load_config and config_from_string.
//
// It lives here, above encodings/ and tasks/, so that config/ need not know either: the
// command line and studies load a config with
//
//   load_config(path, registered_choices(), overrides)
#pragma once

#include "config/choices.hpp"

namespace poslab {

// Built once from registered_encodings() and registered_tasks(): names, options and rules.
const ConfigChoices& registered_choices();

}  // namespace poslab
