#include "train/train.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/blas.hpp"
#include "data/corpus.hpp"
#include "eval/chunked.hpp"
#include "train/optimizer.hpp"
#include "train/stop_request.hpp"
#include "train/training_state.hpp"

namespace poslab {

namespace {
std::string format_elapsed(double seconds) {
  const long s = std::lround(seconds);
  std::ostringstream o;
  if (s >= 3600) o << s / 3600 << "h" << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << "m";
  else if (s >= 60) o << s / 60 << "m" << std::setw(2) << std::setfill('0') << s % 60 << "s";
  else o << s << "s";
  return o.str();
}
}  // namespace

std::vector<std::string> training_metrics_columns() {
  return {"step", "lr", "train_loss", "grad_norm", "tokens_per_second", "elapsed_s",
          "valid_loss"};
}

std::string set_threads(int threads) {
  const int processors = omp_get_num_procs();
  std::string chosen_by = "train.threads";
  // 0 = follow the allocation: a Slurm task's CPUs, then OpenMP's variable, then every processor.
  auto from_environment = [](const char* name) {
    const char* text = std::getenv(name);
    return text ? std::atoi(text) : 0;
  };
  if (threads <= 0) {
    if ((threads = from_environment("SLURM_CPUS_PER_TASK")) > 0) chosen_by = "SLURM_CPUS_PER_TASK";
    else if ((threads = from_environment("OMP_NUM_THREADS")) > 0) chosen_by = "OMP_NUM_THREADS";
    else threads = processors, chosen_by = "all processors";
  }
  if (threads > processors) {  // more threads than processors only slows a run down
    threads = processors;
    chosen_by += " (capped at the " + std::to_string(processors) + " processors)";
  }
  omp_set_num_threads(threads);
  set_blas_threads(1);  // all threading is OpenMP's (see parallel_multiply in core/blas.hpp)
  return chosen_by;
}

TrainReport train_model(TransformerLM<float>& model, const Config& cfg,
                        const std::vector<std::int32_t>& train_tokens,
                        const std::vector<std::int32_t>& valid_tokens, MetricsLog* metrics,
                        std::ostream& out) {
  StreamBatcher train(train_tokens, cfg.train.batch_size, cfg.train.seq_len);
  if (valid_tokens.empty()) return train_model(model, cfg, train, nullptr, metrics, out);
  StreamBatcher valid(valid_tokens, cfg.train.batch_size, cfg.train.seq_len);
  return train_model(model, cfg, train, &valid, metrics, out);
}

TrainReport train_model(TransformerLM<float>& model, const Config& cfg, BatchSource& train,
                        BatchSource* valid, MetricsLog* metrics, std::ostream& out,
                        const Resumable* resumable, OptimizerStart optimizer,
                        const std::function<void(int)>& read_during_training) {
  const TrainConfig& tc = cfg.train;
  const int B = train.batch(), L = train.len();
  Batch batch;

  // The weight of each target: the batch's own (a task scores its answers), times
  // Transformer-XL's "half loss" mask (score only the second half of every segment).
  std::vector<float> weights(std::size_t(B) * L, 1.0f);

  if (tc.randomized_positions)
    model.enable_randomized_positions(tc.seed ^ 0x5EEDULL, tc.max_position);

  TrainReport report;
  report.losses.reserve(std::min(tc.steps, 1 << 20));  // not 2^31 doubles up front
  model.reset_memory();
  TrainingProgress resumed;  // step 0, or where a saved state left off
  if (resumable && resumable->from_saved_state) {
    resumed = load_training_state(resumable->run_dir, model);  // values, moments, memory, rng
    for (int step = 0; step < resumed.steps_done; ++step) train.next(batch);  // data position
    out << "resumed after step " << resumed.steps_done << " of " << tc.steps << " from "
        << (resumable->run_dir / "resume").string() << std::endl;
    if (resumed.threads != resumable->threads)
      out << "warning: the saved state was computed with " << resumed.threads
          << " threads, this run has " << resumable->threads
          << ": the result can differ from an uninterrupted run's in the last digits" << std::endl;
  }
  using clock = std::chrono::steady_clock;
  const auto start = clock::now() - std::chrono::duration_cast<clock::duration>(
                                        std::chrono::duration<double>(resumed.elapsed_seconds));
  auto seconds_since_start = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  double interval_loss = resumed.interval_loss;
  int interval_steps = resumed.interval_steps;
  report.final_train_loss = resumed.logged_loss;

  for (int step = resumed.steps_done; step < tc.steps; ++step) {
    train.next(batch);
    if (batch.first_of_pass) model.reset_memory();  // no left context to remember
    const std::int64_t offset = cfg.memory.continue_positions ? batch.start : 0;
    const float* w = nullptr;
    if (!batch.weights.empty() || cfg.memory.half_loss) {
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < L; ++i) {
          const std::size_t n = std::size_t(b) * L + i;
          const float scored = batch.weights.empty() ? 1.0f : batch.weights[n];
          weights[n] = (cfg.memory.half_loss && i < L / 2) ? 0.0f : scored;
        }
      w = weights.data();
    }

    model.arena().zero_grads();
    const double loss =
        model.forward(batch.inputs.data(), batch.targets.data(), w, B, L, offset, true,
                      batch.positions.empty() ? nullptr : batch.positions.data());
    model.backward();
    const double grad_norm = clip_gradients(model.arena(), tc.grad_clip);
    const double lr = learning_rate(tc, step);
    adamw_step(model.arena(), tc, step, lr, optimizer.moment_steps_before);

    if (!std::isfinite(loss))
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss) +
                               " at step " + std::to_string(step + 1) +
                               " (try a lower train.lr or train.grad_clip)");
    report.losses.push_back(loss);
    interval_loss += loss;
    ++interval_steps;

    const bool last = step + 1 == tc.steps;
    const bool log_now = last || (tc.log_every > 0 && (step + 1) % tc.log_every == 0);
    const bool eval_now = tc.eval_every > 0 && (step + 1) % tc.eval_every == 0 && !last;
    if (log_now || eval_now) {
      const double elapsed = seconds_since_start();
      const double tok_s = double(step + 1 - resumed.steps_done) * B * L /
                           (elapsed - resumed.elapsed_seconds);  // of this process
      const double eta = (elapsed - resumed.elapsed_seconds) / (step + 1 - resumed.steps_done) *
                         (tc.steps - step - 1);
      double valid_loss = std::nan("");
      if (eval_now && valid) {
        valid_loss = evaluate(model, *valid, tc.eval_batches, cfg.memory.mem_len,
                              cfg.memory.continue_positions)
                         .loss;
        model.reset_memory();  // evaluation used the memory; restart the training stream's
      }
      const double mean_loss = interval_loss / interval_steps;
      report.final_train_loss = mean_loss;
      out << "step " << std::setw(6) << step + 1 << "/" << tc.steps << " | loss " << std::fixed
          << std::setprecision(4) << mean_loss << " | lr " << std::scientific
          << std::setprecision(2) << lr << std::fixed << " | " << std::setprecision(0) << tok_s
          << " tok/s | " << format_elapsed(elapsed) << " elapsed, ETA " << format_elapsed(eta);
      if (eval_now) out << " | valid " << std::setprecision(4) << valid_loss;
      out << std::endl;
      if (metrics)
        metrics->append({step + 1, lr, mean_loss, grad_norm, tok_s, elapsed, valid_loss});
      interval_loss = 0;
      interval_steps = 0;
    }
    // Reads that leave the model as they found it (the passkey curve keeps the memory aside).
    if (read_during_training && tc.eval_every > 0 && (eval_now || last))
      read_during_training(step + 1);

    // Resumable training: save at the end of a step, so the state never mixes two steps.
    if (!resumable) continue;
    const int stop_signal = stop_requested();
    const bool save_now = stop_signal != 0 ||
                          (resumable->save_every > 0 &&
                           ((step + 1) % resumable->save_every == 0 || last));
    if (!save_now) continue;
    save_training_state(resumable->run_dir, model,
                        TrainingProgress{.steps_done = step + 1,
                                         .interval_loss = interval_loss,
                                         .interval_steps = interval_steps,
                                         .logged_loss = report.final_train_loss,
                                         .elapsed_seconds = seconds_since_start(),
                                         .threads = resumable->threads});
    if (stop_signal)
      throw TrainingInterrupted(stop_signal, step + 1,
                                std::string(strsignal(stop_signal)) + " after step " +
                                    std::to_string(step + 1) + " of " + std::to_string(tc.steps) +
                                    "; the training state is saved in " +
                                    (resumable->run_dir / "resume").string());
  }
  // The loss above is computed before each update: the last update can still break the model
  // (train.lr = 2^31 trained two steps "fine" and evaluated to a NaN loss).
  const float* values = model.arena().values();
  for (std::size_t i = 0; i < model.arena().count(); ++i)
    if (!std::isfinite(values[i]))
      throw std::runtime_error("training diverged: a parameter is " + std::to_string(values[i]) +
                               " after step " + std::to_string(tc.steps) +
                               " (try a lower train.lr or train.grad_clip)");
  report.steps = tc.steps;
  report.seconds = seconds_since_start();
  report.tokens_per_second = double(tc.steps) * B * L / report.seconds;
  return report;
}

}  // namespace poslab
