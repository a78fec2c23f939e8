// Reading a Config from TOML, and writing it back.
//
// A config file names only what it changes; everything else keeps the defaults of config.hpp:
//
//   out_dir = "runs/shaw-k8"
//   [model]
//   d_model = 256
//   [encoding]
//   type = "shaw"      # a name from `poslab encodings`
//   clip_k = 8         # that encoding's own options, checked against its OptionSpec list
//   [task]
//   name = "copy"      # a name from `poslab tasks` (default "lm": the text corpus of [data])
//   alphabet = 8       # that task's own options, checked the same way
//   [eval]
//   length_factors = [2, 4]   # lists of numbers are TOML arrays
//
// Command-line overrides (`--set model.d_model=256`, `--set encoding.type=shaw`) are applied
// after the file. Every mistake is reported as one ConfigError line that says WHERE
// (`quick.toml:3:` or `--set model.d_modle=256:`) and WHAT (`unknown key 'model.d_modle' (did you
// mean 'model.d_model'?)`), before anything has been run or written.
//
// Layering. config/ is a low layer: it includes nothing from encodings/, tasks/ or any other
// library of poslab, only the standard library and toml++. What `encoding.type` and `task.name`
// may name comes in as a parameter, a ConfigChoices (config/choices.hpp): each entry's name, its
// options and its rule between keys, written by the encoding or task that owns them. The layer
// above that knows the registries builds it (train/registered_choices.hpp: registered_choices());
// the command line, studies and tests pass it in. So the arrows point one way:
//
//   cli, study  ->  train/registered_choices  ->  encodings, tasks  ->  config
//
// and the loader still checks everything before a run is built: every option and every rule
// fails as one located ConfigError line.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/config.hpp"

namespace poslab {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the TOML file at `path`, applies `overrides` ("section.key=value"), validates, and fills
// in the defaults of the chosen encoding's and task's options.
//
// `choices` is what `encoding.type` and `task.name` are looked up in: registered_choices()
// (train/registered_choices.hpp) for every registered encoding and task; tests pass a hand-made
// catalogue to exercise option validation.
Config load_config(const std::string& path, const ConfigChoices& choices,
                   const std::vector<std::string>& overrides = {});

// The same, from TOML text; `source_name` is what error messages call it (a file name).
Config config_from_string(const std::string& toml_text, const std::string& source_name,
                          const ConfigChoices& choices,
                          const std::vector<std::string>& overrides = {});

// The fully resolved config, every key included (encoding and task option defaults too), as TOML
// that config_from_string loads back to an equal Config. Runs save it as their config.toml.
std::string config_to_toml(const Config& config);

// "" if `made` and `planned` describe the same experiment (their config_to_toml equal, except
// for out_dir and train.threads, which may differ between two runs of it); else the first
// difference: "in [model]: the run has d_model = 32, the study gives d_model = 64".
std::string experiment_difference(const Config& made, const Config& planned);

// Throws a ConfigError "WHERE: ..." if `path` is empty or holds a control character (a NUL
// would cut it short, a line break would reach a Slurm script): for paths given as arguments.
void check_path_argument(const std::string& where, const std::string& path);

}  // namespace poslab
