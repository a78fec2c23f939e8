// Stopping a training cleanly. Slurm sends SIGTERM before a job's time limit (`#SBATCH
// --signal=B:TERM@120`), `poslab run` forwards SIGTERM/SIGINT to its trainers, and Ctrl-C sends
// SIGINT. With the handler installed, such a signal only raises a flag: the training loop
// finishes the step it is in, saves its state (train/training_state.hpp) and stops with
// TrainingInterrupted, so that `poslab train --resume` continues where it stopped.
#pragma once

#include <stdexcept>
#include <string>

namespace poslab {

// Installs the handler for SIGTERM and SIGINT (idempotent). A second signal while the first is
// being handled ends the process at once (the default action), for a user who insists.
void install_stop_handler();

// The signal that asked to stop (SIGTERM, SIGINT), or 0.
int stop_requested();

// For tests: asks to stop as a signal would (0 withdraws the request).
void request_stop(int signal);

struct TrainingInterrupted : std::runtime_error {
  TrainingInterrupted(int signal, int steps_done, const std::string& message)
      : std::runtime_error(message), signal(signal), steps_done(steps_done) {}
  int signal;
  int steps_done;
};

}  // namespace poslab
