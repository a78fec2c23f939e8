// The subcommands of the `poslab` executable. main.cpp parses the command line and calls these;
// each returns the process exit code. Errors are thrown (ConfigError, std::runtime_error) and
// reported by main.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace poslab {

// Trains as configured and writes the run directory cfg.out_dir (config.toml, metrics.csv,
// checkpoint/, eval.json last).
int run_train(const Config& cfg);

// Evaluates the checkpoint of a finished run; seq_len 0 / mem_len -1 mean "as trained".
int run_eval(const std::string& run_dir, const std::vector<std::string>& overrides, int seq_len,
             int mem_len);

// Training throughput at cfg's model size, against the machine's sgemm GFLOP/s.
int run_bench(const Config& cfg, int steps);

struct BenchResult {
  double tokens_per_second = 0;
  double flops_per_token = 0;
  double gflops = 0;
};
// Times `steps` training steps (after a warm-up) on random tokens.
BenchResult bench_training(const Config& cfg, int steps);

}  // namespace poslab
