// Peak resident memory of evaluation (eval_memory.hpp): one model, M + L tokens of context
// through ceil(M / L) + 1 segments, and the process's peak resident memory around it.
#include "bench/eval_memory.hpp"

#include <cstdint>
#include <vector>

#include "core/memory_usage.hpp"
#include "core/rng.hpp"
#include "eval/memory_estimate.hpp"
#include "model/transformer.hpp"
#include "nn/inference_scratch.hpp"

namespace poslab {

EvalMemoryPeak measure_eval_memory(const Config& cfg, int M, bool inference,
                                   double budget_bytes) {
  const int L = cfg.train.seq_len;
  const double mb = 1 << 20;
  EvalMemoryPeak result;
  result.baseline_mb = double(current_memory_bytes()) / mb;
  reset_peak_memory();
  {
    MemoryConfig memory = cfg.memory;
    memory.mem_len = M;
    TransformerLM<float> model(cfg.model, cfg.encoding, memory);
    model.init(cfg.train.seed);
    model.set_inference_only(inference);
    model.inference_scratch().score_budget_bytes = budget_bytes;
    Rng rng(cfg.train.seed);
    std::vector<std::int32_t> inputs(L), targets(L);
    const int segments = (M + L - 1) / L + 1;
    for (int s = 0; s < segments; ++s) {
      for (int i = 0; i < L; ++i) {
        inputs[i] = std::int32_t(rng.below(cfg.model.vocab_size));
        targets[i] = std::int32_t(rng.below(cfg.model.vocab_size));
      }
      model.forward(inputs.data(), targets.data(), nullptr, 1, L, 0, true);
    }
  }
  result.peak_mb = double(peak_memory_bytes()) / mb;
  // The training path keeps [B, H, L, K] per layer (its estimate is the evaluation one's,
  // what a budget-respecting pass needs); the inference path's chunk holds Hc heads.
  const double budget = inference ? budget_bytes : kInferenceScoreBudgetBytes;
  const InferenceChunk chunk = inference_chunk(1, cfg.model.n_heads, L, M + L, sizeof(float), budget);
  result.estimate_mb = estimated_bytes(cfg, 1, L, M, /*training=*/false, budget) / mb;
  result.chunk_heads = inference ? chunk.heads : cfg.model.n_heads;
  return result;
}

}  // namespace poslab
