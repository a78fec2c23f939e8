// The training loop: contiguous streams, memory carried from batch to batch, AdamW, progress.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/batch_source.hpp"
#include "model/transformer.hpp"
#include "train/run_dir.hpp"

namespace poslab {

struct TrainReport {
  int steps = 0;
  double seconds = 0;
  double tokens_per_second = 0;  // training tokens (B * L per step) per wall-clock second
  double final_train_loss = 0;   // mean over the last log interval
  std::vector<double> losses;    // every step's training loss (the loss curve)
};

// Training that can be stopped and continued (train/training_state.hpp, train/stop_request.hpp).
struct Resumable {
  std::filesystem::path run_dir;  // the state goes to run_dir/resume/
  int save_every = 0;             // steps between saves (and after the last); 0 = only when stopped
  bool from_saved_state = false;  // continue from run_dir/resume/ instead of step 0
  int threads = 0;                // recorded with the state
};

// Where the optimizer starts: fresh, or a fine-tuned run continuing its parent's Adam moments
// (train/init_from.hpp), whose bias correction counts the parent's steps.
struct OptimizerStart {
  int moment_steps_before = 0;
};

// Trains an initialised model for cfg.train.steps steps on batches from `train`. Every
// log_every steps prints a progress line to `out` (step, loss, lr, tokens/s, ETA) and appends a
// row to `metrics` (if not null); every eval_every steps (if > 0) also evaluates on `valid`
// and calls `read_during_training(steps_done)` (if set; also after the last step), for reads
// such as the passkey curve (train/passkey_curve.hpp) that must not change the training.
//
// With `resumable`, the training state is saved every save_every steps, and a stop request
// (SIGTERM, SIGINT; stop_request.hpp) ends the step in progress, saves the state and throws
// TrainingInterrupted. A run continued from its saved state ends bit-identical to one that was
// never stopped (same thread count).
TrainReport train_model(TransformerLM<float>& model, const Config& cfg, BatchSource& train,
                        BatchSource* valid, MetricsLog* metrics, std::ostream& out,
                        const Resumable* resumable = nullptr, OptimizerStart optimizer = {},
                        const std::function<void(int)>& read_during_training = {});

// The same on a token stream (a corpus split), cut into cfg.train.batch_size rows.
TrainReport train_model(TransformerLM<float>& model, const Config& cfg,
                        const std::vector<std::int32_t>& train_tokens,
                        const std::vector<std::int32_t>& valid_tokens, MetricsLog* metrics,
                        std::ostream& out);

// Column names of the metrics.csv rows train_model appends.
std::vector<std::string> training_metrics_columns();

// Sets the OpenMP threads (OpenBLAS stays single-threaded). `threads` > 0 is taken as given;
// 0 follows the allocation: SLURM_CPUS_PER_TASK, then OMP_NUM_THREADS, then every processor.
// Never more than the processors. Returns what chose the number, for the run's provenance.
std::string set_threads(int threads);

}  // namespace poslab
