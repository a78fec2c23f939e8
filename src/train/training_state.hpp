// Resumable training: what a run saves so that, stopped and started again, it continues to the
// bit-identical result of a run that was never stopped.
//
//   RUN/resume/state.json    {"format": "poslab-training-state-1", "steps_done": 1200, ...}
//   RUN/resume/arena.f32     [3, P] float32: the parameters, Adam's first and second moments
//   RUN/resume/memory.f32    [n_layers, B, rows, d] float32: every layer's memory (XL recurrence)
//
// Both .f32 files are raw little-endian float32, row-major:
//   >>> np.fromfile("RUN/resume/arena.f32", dtype="<f4").reshape(3, -1)
//
// What a step depends on, and where the resumed run gets it:
//   parameters, m, v              arena.f32
//   the step number t             steps_done (the learning rate and Adam's bias correction
//                                 are functions of t)
//   memory carried across steps   memory.f32
//   randomized positions' draws   state.json "position_rng" (the generator's whole state)
//   the data position             replayed: the batch source is a pure function of the config,
//                                 so the resumed run draws and discards steps_done batches
//   the loss of the open log      state.json "interval_loss" (its exact bits) and
//   interval                      "interval_steps", so metrics.csv gets the same rows
// The directory appears all at once (begin_directory / publish_directory in run_dir.hpp), and
// it is written at the end of a step, so it never mixes two steps.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "model/transformer.hpp"

namespace poslab {

struct TrainingStateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a training stands, besides the model's numbers.
struct TrainingProgress {
  int steps_done = 0;
  double interval_loss = 0;  // sum of the losses since the last logged row
  int interval_steps = 0;
  double logged_loss = 0;    // the last logged row's mean loss (the run's final train loss)
  double elapsed_seconds = 0;
  int threads = 0;           // of the training that saved it (results depend on it, slightly)
};

// Writes run_dir/resume/ (replacing an older one): the arena's values and moments, the model's
// carried state (memory, position generator) and `progress`.
void save_training_state(const std::filesystem::path& run_dir, const TransformerLM<float>& model,
                         const TrainingProgress& progress);

// Whether run_dir holds a complete saved state.
bool has_training_state(const std::filesystem::path& run_dir);

// Reads run_dir/resume/ into the model (values, moments, carried state) and returns the
// progress. The state must fit the model exactly; otherwise a TrainingStateError says what
// differs, and the model is unchanged.
TrainingProgress load_training_state(const std::filesystem::path& run_dir,
                                     TransformerLM<float>& model);

// The steps_done of run_dir's saved state (without loading it into a model).
int saved_steps_done(const std::filesystem::path& run_dir);

// Deletes run_dir/resume/ (a finished run does not need it: checkpoint/ has the parameters).
void remove_training_state(const std::filesystem::path& run_dir);

// metrics.csv without the rows logged after `steps_done` (the resumed run logs them again).
void drop_metrics_after(const std::filesystem::path& metrics_csv, int steps_done);

}  // namespace poslab
