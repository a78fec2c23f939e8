// Saving and restoring a model's parameters, in a form numpy reads directly:
//
//   RUN/checkpoint/manifest.json          {"format": "poslab-checkpoint-1", "dtype": "float32",
//                                          "total": 51712, "parameters": [{"name", "shape", "file"}]}
//   RUN/checkpoint/layer0.attn.W_q.npy    one float32 array per parameter, shaped as declared
//
//   >>> W_q = np.load("RUN/checkpoint/layer0.attn.W_q.npy")     # shape (d_model, d_model)
//
// Only the parameter values are saved (not gradients or Adam's moments). The checkpoint appears
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

}  // namespace poslab
