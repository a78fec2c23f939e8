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
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "encodings/registry.hpp"
#include "tasks/task.hpp"

namespace poslab {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the TOML file at `path`, applies `overrides` ("section.key=value"), validates, and fills
// in the defaults of the chosen encoding's and task's options.
//
// `encodings` is the catalogue `encoding.type` is looked up in, `tasks` the one `task.name` is;
// the defaults are every registered encoding and task. Tests pass a hand-made catalogue to
// exercise option validation.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const std::vector<EncodingInfo>& encodings = registered_encodings(),
                   const std::vector<TaskInfo>& tasks = registered_tasks());

// The same, from TOML text; `source_name` is what error messages call it (a file name).
Config config_from_string(const std::string& toml_text, const std::string& source_name,
                          const std::vector<std::string>& overrides = {},
                          const std::vector<EncodingInfo>& encodings = registered_encodings(),
                          const std::vector<TaskInfo>& tasks = registered_tasks());

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
