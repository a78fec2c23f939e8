// Training speed (`poslab bench`): tokens per second of real training steps on random tokens,
// the FLOPs those steps perform (counted in every sgemm call), and the ceiling: the model's own
// matrix products (model/products.hpp) timed alone, each in its batched form. The command prints
// and compares these (cli/bench.cpp); this file only measures.
#pragma once

#include "config/config.hpp"

namespace poslab {

// Repeated measurements, summarized: the machine is shared and single figures move by 10%.
struct Spread {
  double min = 0, median = 0, max = 0;
};

struct BenchResult {
  Spread tokens_per_second;           // over the repetitions
  double flops_per_token = 0;         // counted: every sgemm of a step with full memory
  double model_flops_per_token = 0;   // the model's own products (model/flops.hpp)
  Spread gflops;                      // tokens/s x counted FLOPs
};

// Times `repetitions` runs of `steps` training steps (after a warm-up) on random tokens.
BenchResult bench_training(const Config& cfg, int steps, int repetitions);

// GFLOP/s of the model's matrix products alone (model/products.hpp), each in its batched form,
// over `repetitions` timed runs of one training step's worth.
Spread measure_ceiling(const Config& cfg, int repetitions);

}  // namespace poslab
