// Training speed (training_speed.hpp): real training steps on random tokens, timed; their FLOPs
// counted in the sgemm calls; and the ceiling, the model's own products timed alone.
//
//   tokens/s  = B L steps / seconds of `steps` training steps (median, min, max of repetitions)
//   FLOPs     = the FLOPs of one step with its memory full: those of two steps minus those of
//               the first (a training starts without memory), per token (/ B L)
//   GFLOP/s   = tokens/s x FLOPs per token / 1e9
//   ceiling   = FLOPs of the model's products (model/products.hpp) / seconds of running them
#include "bench/training_speed.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <vector>

#include "core/blas.hpp"
#include "core/rng.hpp"
#include "data/pose_batcher.hpp"
#include "model/flops.hpp"
#include "model/products.hpp"
#include "model/transformer.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

// min, median and max of repeated measurements.
Spread spread_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {values.front(), values[values.size() / 2], values.back()};
}

// Random tokens for `steps` training steps of batch B and segment L (speed does not depend on
// the text).
std::vector<std::int32_t> random_tokens(const Config& cfg, int steps) {
  Rng rng(cfg.train.seed);
  std::vector<std::int32_t> tokens(std::size_t(cfg.train.batch_size) *
                                   (std::size_t(cfg.train.seq_len) * (steps + 4) + 1));
  for (auto& t : tokens) t = std::int32_t(rng.below(cfg.model.vocab_size));
  return tokens;
}

// Trains `model` for `steps` steps (memory reset at the start, as every training starts).
// With train.pose_target_len, on PoSE's rows (data/pose_batcher.hpp) cut from the same tokens,
// so that PoSE's cost (the draws, the copies, positions that skip) is measured too.
TrainReport train_steps(TransformerLM<float>& model, Config cfg, int steps,
                        const std::vector<std::int32_t>& tokens) {
  std::ostringstream quiet;
  cfg.train.log_every = 0;
  cfg.train.eval_every = 0;
  cfg.train.steps = steps;
  if (cfg.train.pose_target_len > 0) {
    PoseBatcher rows(std::make_shared<const std::vector<std::int32_t>>(tokens),
                     cfg.train.batch_size, cfg.train.seq_len, cfg.train.pose_target_len,
                     pose_variant_from_name(cfg.train.pose_variant), cfg.train.seed);
    return train_model(model, cfg, rows, nullptr, nullptr, quiet);
  }
  return train_model(model, cfg, tokens, {}, nullptr, quiet);
}

}  // namespace

BenchResult bench_training(const Config& cfg, int steps, int repetitions) {
  const int B = cfg.train.batch_size, L = cfg.train.seq_len;
  const std::vector<std::int32_t> tokens = random_tokens(cfg, steps);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  train_steps(model, cfg, 3, tokens);  // warm-up: buffers are allocated on the first steps

  // The FLOPs of one step with its memory full: two steps counted, minus one (a training
  // starts without memory).
  count_gemm_flops(true);
  train_steps(model, cfg, 2, tokens);
  const std::uint64_t two_steps = counted_gemm_flops();
  count_gemm_flops(true);
  train_steps(model, cfg, 1, tokens);
  const std::uint64_t first_step = counted_gemm_flops();
  count_gemm_flops(false);

  BenchResult out;
  out.flops_per_token = double(two_steps - first_step) / (double(B) * L);
  out.model_flops_per_token = training_flops_per_token(cfg.model, L, cfg.memory.mem_len);
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r)
    rates.push_back(train_steps(model, cfg, steps, tokens).tokens_per_second);
  out.tokens_per_second = spread_of(rates);
  out.gflops = {out.tokens_per_second.min * out.flops_per_token / 1e9,
                out.tokens_per_second.median * out.flops_per_token / 1e9,
                out.tokens_per_second.max * out.flops_per_token / 1e9};
  return out;
}

Spread measure_ceiling(const Config& cfg, int repetitions) {
  const std::vector<MatrixProduct> products = training_products(
      cfg.model, cfg.train.batch_size, cfg.train.seq_len, cfg.memory.mem_len);
  const int threads = omp_get_max_threads();
  // Operands of each product, filled with small values (speed does not depend on them); the
  // per-head products get one output per thread.
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<Operands> operands;
  double flops = 0;
  for (const MatrixProduct& p : products) {
    const std::size_t outputs = p.per_head ? threads : 1;
    operands.push_back({std::vector<float>(std::size_t(p.m) * p.k, 0.01f),
                        std::vector<float>(std::size_t(p.k) * p.n, 0.01f),
                        std::vector<float>(std::size_t(p.m) * p.n * outputs, 0.0f)});
    flops += p.flops();
  }
  auto run_all = [&] {
    for (std::size_t i = 0; i < products.size(); ++i) {
      const MatrixProduct& p = products[i];
      Operands& o = operands[i];
      // C [m, n] = A [m, k] B [k, n]
      const auto A = matrix(o.a.data(), p.m, p.k), B = matrix(o.b.data(), p.k, p.n);
      if (p.per_head) {
#pragma omp parallel for schedule(static)
        for (long r = 0; r < p.count; ++r)
          multiply(matrix(o.c.data() + std::size_t(omp_get_thread_num()) * p.m * p.n, p.m, p.n),
                   A, B);
      } else {
        for (long r = 0; r < p.count; ++r) parallel_multiply(matrix(o.c.data(), p.m, p.n), A, B);
      }
    }
  };
  run_all();  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run_all();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(flops / s / 1e9);
  }
  return spread_of(rates);
}

}  // namespace poslab
