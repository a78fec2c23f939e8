// What `poslab train` does with a run directory that already holds a run (ExistingRun): refuse,
// move it aside (--force), or finish the same experiment (--resume), never writing over a run
// another process is training (its lock, its claim). train/run.hpp calls these before it writes
// anything and again once it holds the directory's lock.
#pragma once

#include "config/config.hpp"

namespace poslab {

// What `poslab train` does when cfg.out_dir already holds a run (any file a run writes).
enum class ExistingRun {
  refuse,  // the default: an error, nothing is touched
  force,   // move the old run aside to OUT.replaced-<time>, then train
  resume,  // the same experiment (config): finished -> nothing to do; unfinished -> train it
           // again from step 0 in the same directory. Another experiment: refused.
};

// A directory that already holds a run (any of the files `poslab train` writes) is never written
// over silently: that would mix two runs' metrics.csv or replace a finished run's results.
// What happens instead is `existing` (ExistingRun). Called twice: before the directory is locked
// (to fail early) and with `locked` once this process holds its lock (DirectoryLock), when an
// unfinished run of the same experiment is cleared for --resume. Returns true if the run is
// already finished with this very config (--resume: nothing to do).
// wait_for_trainer_seconds (--wait-for-trainer, with --resume): another process that took the
// run since any earlier look is waited for, and its outcome is this call's.
bool claim_run_directory(const Config& cfg, ExistingRun existing, bool locked = false,
                         int wait_for_trainer_seconds = 0);

// After waiting for another process that was training this very run (--wait-for-trainer):
// its outcome is this call's. Finished with this config: 0; otherwise an error (thrown), and
// this call does not train it (a Slurm dependency then sees that the run is not done).
int outcome_of_other_trainer(const Config& cfg);

}  // namespace poslab
