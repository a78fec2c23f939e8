// Saving and restoring a model's parameters, in a form numpy reads directly:
//
//   RUN/checkpoint/manifest.json          {"format": "poslab-checkpoint-1", "dtype": "float32",
//                                          "total": 51712, "parameters": [{"name", "shape", "file"}]}
//   RUN/checkpoint/layer0.attn.W_q.npy    one float32 array per parameter, shaped as declared
//
//   >>> W_q = np.load("RUN/checkpoint/layer0.attn.W_q.npy")     # shape (d_model, d_model)
//
// Only the parameter values are saved here (not gradients or Adam's moments). A finished run
// also keeps Adam's moments in the same format, for fine-tuning with train.init_optimizer
// (train/init_from.hpp):
//
//   RUN/optimizer/adam_m/   manifest.json and one .npy per parameter: Adam's first moments
//   RUN/optimizer/adam_v/   ... and its second moments, after the run's last step
//
// The checkpoint appears
// all at once: files are written into `checkpoint.partial/`, the manifest last, and the directory
// is then renamed to `checkpoint/`. A checkpoint is therefore complete whenever it exists.
#pragma once

#include <filesystem>
#include <stdexcept>

#include "core/arena.hpp"

namespace poslab {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes run_dir/checkpoint/ (replacing an older one). The arena must be allocated.
void save_checkpoint(const std::filesystem::path& run_dir, const ParameterArena<float>& arena);

// Reads run_dir/checkpoint/ into the arena's values. The checkpoint must hold exactly the
// parameters the arena declares (same names, same shapes, float32); otherwise a CheckpointError
// names the first parameter that differs and nothing is changed.
void load_checkpoint(const std::filesystem::path& run_dir, ParameterArena<float>& arena);

bool has_checkpoint(const std::filesystem::path& run_dir);

// For the commands that read a trained run (attention, sinks, explore): throws
// std::runtime_error "SHOWN has no checkpoint/ (is the run finished? ...)" when run_dir has none.
void require_checkpoint(const std::filesystem::path& run_dir, const std::string& shown);

// Writes run_dir/optimizer/adam_m/ and adam_v/ from the arena's moments.
void save_optimizer_state(const std::filesystem::path& run_dir, const ParameterArena<float>& arena);
bool has_optimizer_state(const std::filesystem::path& run_dir);
// Reads them into the arena's moments, with the checks of load_checkpoint; on any error the
// arena is unchanged.
void load_optimizer_state(const std::filesystem::path& run_dir, ParameterArena<float>& arena);

// SHA-256 of run_dir/checkpoint/: manifest.json, then every file it lists, in its order, as if
// concatenated. By hand: cd RUN/checkpoint && cat manifest.json $(python3 -c 'import json;
// print(*(p["file"] for p in json.load(open("manifest.json"))["parameters"]))') | sha256sum
std::string checkpoint_sha256(const std::filesystem::path& run_dir);

}  // namespace poslab
