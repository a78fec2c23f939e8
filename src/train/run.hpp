// A whole run, as `poslab train` makes it, and as the study runner (through `poslab train`) and
// the tests make it:
//
//   1. checks   everything that can fail on bad input, before anything is written: the memory of
//               training, the data for every length, the evaluation plan (eval/plan.hpp), the
//               passkey curve's filler, the model, the parent of a fine-tuned run (a parameter
//               of another shape is refused with nothing to clean up);
//   2. train    the run directory cfg.out_dir is claimed (train/existing_run.hpp) and locked,
//               config.toml written, the model trained (train/train.hpp), saving its state for
//               --resume;
//   3. evaluate the plan: every evaluation mode the config asks for, in the order of
//               eval/modes.cpp;
//   4. write    checkpoint/, then eval.json, written last: it marks the run as finished.
#pragma once

#include "config/config.hpp"
#include "train/existing_run.hpp"

namespace poslab {

// Trains as configured and writes the run directory cfg.out_dir (config.toml, metrics.csv,
// checkpoint/, eval.json last); prints its progress to stdout. Returns the process exit code:
// 0, or 128 + signal when a stop request (SIGTERM, SIGINT) ended it with its state saved.
// A run being written by another process (it holds the directory's lock) is never touched,
// whatever `existing` says.
// wait_for_trainer_seconds (with ExistingRun::resume; `--wait-for-trainer`, what exported study
// commands use): a run another process is training is waited for, at most that long, and its
// outcome is this call's (0 if it finished with this config, an error otherwise).
int run_train(const Config& cfg, ExistingRun existing = ExistingRun::refuse,
              int wait_for_trainer_seconds = 0);

}  // namespace poslab
