#include "eval/memory_estimate.hpp"

#include "nn/inference_scratch.hpp"
#include "tasks/task.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace poslab {

double estimated_bytes(const Config& cfg, int batch, int seq_len, int mem_len, bool training,
                       double score_budget_bytes) {
  const double B = batch, L = seq_len, M = mem_len, K = M + L;
  const double d = cfg.model.d_model, H = cfg.model.n_heads, di = cfg.model.d_inner;
  const double V = cfg.model.vocab_size, layers = cfg.model.n_layers;
  // Parameters: embedding (and output matrix), 4 d^2 + 2 d d_i per layer; encodings' tables
  // are at most a few rows of d per position and are counted with the per-position terms.
  double parameters = V * d * (cfg.model.tie_embeddings ? 1 : 2) + V +
                      layers * (4 * d * d + 2 * d * di + 2 * di + 6 * d) +
                      (cfg.model.sink_logit ? layers * H : 0);
  if (cfg.encoding.type == "learned" && cfg.encoding.options.has("max_len"))
    parameters += double(cfg.encoding.options.get_int("max_len")) * d;
  const double copies = training ? 2 : 1;  // the gradient of every activation when training
  // Training: every layer keeps its scores and probabilities. Evaluation only: the layers share
  // one chunk of R rows and Hc heads of scores, plus an encoding's work buffer of the same size
  // (Transformer-XL's padded relative shift): (R, Hc) = (B, H), or (1, as many heads as fit the
  // budget) (nn/inference_scratch.hpp).
  // (K in double: memory.mem_len + train.seq_len may not fit an int, and then this estimate is
  // far beyond any machine anyway.)
  const InferenceChunk chunk = inference_chunk(
      batch, cfg.model.n_heads, seq_len, int(std::min(K, double(std::numeric_limits<int>::max()))),
      4, score_budget_bytes);
  const double scores_per_layer = training ? 2 * 2 * B * H * L * K : 0;
  const double scores_shared = training ? 0 : 2 * double(chunk.rows) * chunk.heads * L * K;
  const double per_layer =
      scores_per_layer + copies * (8 * B * K * d + 2 * B * L * di) + B * M * d;
  const double output = copies * 2 * B * L * V;
  const double floats =
      parameters * (training ? 4 : 2) + layers * per_layer + scores_shared + output;
  double bytes = 4 * floats;
  // Training keeps every step's loss (a double); a generated task's evaluation set is made up
  // front: eval.batches x rows of inputs, targets and weights (4 bytes each).
  if (training) bytes += 8.0 * cfg.train.steps;
  if (!training && cfg.task.name != "lm")
    bytes += 12.0 * (cfg.eval.batches > 0 ? cfg.eval.batches : double(kTaskEvalBatches)) * B * L;
  return bytes;
}

double usable_memory_bytes() {
  double bytes = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      double(limit.rlim_cur) < bytes)
    bytes = double(limit.rlim_cur);
  return bytes;
}

void check_memory(const Config& cfg, int batch, int seq_len, int mem_len, bool training,
                  const std::string& what) {
  const double needed = estimated_bytes(cfg, batch, seq_len, mem_len, training);
  const double usable = usable_memory_bytes();
  if (needed <= usable) return;
  auto gib = [](double bytes) {
    char text[64];
    std::snprintf(text, sizeof text, bytes < 1e6 * (1 << 30) ? "%.1f" : "%.3g", bytes / (1 << 30));
    return std::string(text);
  };
  throw std::runtime_error(what + " needs about " + gib(needed) + " GiB of memory (estimated from " +
                           "model.d_model, model.n_layers, model.n_heads, model.d_inner and " +
                           "model.vocab_size), more than the " + gib(usable) +
                           " GiB this process may use");
}

}  // namespace poslab
