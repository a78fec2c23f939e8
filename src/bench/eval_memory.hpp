// Peak resident memory of evaluation (`poslab bench --eval-memory`): what evaluating one batch
// row with a memory of M tokens (segment L = train.seq_len) takes, through the evaluation-only
// forward ("inference": the scores made in chunks of (rows, heads) of at most a budget,
// nn/inference_scratch.hpp) or through the training forward that keeps every layer's attention
// weights (what evaluation did before).
//
// The model is freshly initialized (memory use does not depend on the weights); ceil(M / L) + 1
// segments of random tokens fill the memory, so the last one attends over K = M + L keys. The
// peak includes the process's baseline, measured just before; one process per measurement gives
// clean peaks (glibc may keep freed memory). Beside it, the estimate poslab's memory check uses
// (eval/memory_estimate.hpp) and the chunk of heads the budget allows.
#pragma once

#include "config/config.hpp"

namespace poslab {

struct EvalMemoryPeak {
  double baseline_mb = 0;  // resident before the model was made, MiB
  double peak_mb = 0;      // peak resident while it evaluated, MiB
  double estimate_mb = 0;  // eval/memory_estimate.hpp's estimate, MiB
  int chunk_heads = 0;     // heads per score chunk (the inference path; all heads otherwise)
};

// One measurement at memory length mem_len; `inference` chooses the forward, budget_bytes the
// inference path's score budget.
EvalMemoryPeak measure_eval_memory(const Config& cfg, int mem_len, bool inference,
                                   double budget_bytes);

}  // namespace poslab
