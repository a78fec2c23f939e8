// Work buffers of an evaluation-only (inference) attention pass, shared by every layer.
//
// Training keeps, in every layer, what backward needs: q, k, v, the context and the attention
// weights P [B, H, L, K]. At a long context P dominates: with B = 1, H = 4, L = 512 and
// K = 16,384 keys it is 128 MiB per layer. Evaluation needs none of it after a layer is done,
// so all layers write into one set of buffers, and the scores are made a chunk of (batch rows,
// heads) at a time:
//
//   per chunk of R rows b0 .. b0 + R - 1 and Hc heads h0 .. h0 + Hc - 1:
//     S [R, Hc, L, K] = scale * q_h k_h^T + (c) encoding score terms
//     P = softmax(S) over visible keys;   z_h = P_h v_h + (d) encoding value terms
//
// The encodings see a geometry with batch = R, head_begin = h0, head_count = Hc and pointers
// offset to row b0 (q, k, ctx keep all their heads as columns; the scores are the chunk's), so
// every (b, h) cell gets exactly the inputs it gets in the whole-batch pass.
//
// The chunk (inference_chunk): while one layer's [B, H, L, K] scores fit in the budget,
// kInferenceScoreBudgetBytes, R = B and Hc = H: one chunk, the very calls of the training forward,
// so results are bit-identical by construction (every study in experiments/). Above it, R = 1 and
// Hc = the most heads whose [1, Hc, L, K] fit (at least 1). The score buffer then never exceeds
// the budget (unless one head's [L, K] alone does), whatever B, H and the number of layers;
// only q, k, v, the memory and the encodings' per-key tables still grow with the context K.
//
// Peak resident memory of evaluation, Transformer-XL, d_model 64, 2 layers, 4 heads, batch 1,
// segment 512, random weights, MB (bench/eval_memory.sh > results/bench/eval_memory.csv, which
// runs `poslab bench --eval-memory M --eval-memory-path training|inference
// --eval-memory-budget MB`; docs/09-speed.md):
//   context                          512   1,024   2,048   4,096   8,192  16,384
//   training forward                32.9    46.5    74.9   131.9   245.0   471.6
//   evaluation, budget 256 MiB      28.2    37.7    57.9    98.3   175.4   336.1   (4 heads)
//   evaluation, budget 32 MiB       28.1    37.7    57.9    98.1   180.2   187.4   (2, 1 head)
// At the default budget one row's scores at 16,384 (128 MiB) still fit: one chunk. With 32 MiB
// the chunk is 2 heads at 8,192 and 1 head at 16,384, and the peak stops following the scores;
// what still grows is linear in K (q, k, v, layer inputs, Transformer-XL's tables).
#pragma once

#include <algorithm>
#include <cstddef>

#include <xtensor/xtensor.hpp>

namespace poslab {

// Above this many bytes of scores per layer ([B, H, L, K] values), evaluation goes one batch row
// and as many heads as fit at a time.
inline constexpr double kInferenceScoreBudgetBytes = 256.0 * (1 << 20);

// The size of one chunk of an inference pass: R batch rows and Hc heads.
struct InferenceChunk {
  int rows = 0;   // R: all B, or 1
  int heads = 0;  // Hc: all H when R = B, else the most whose [1, Hc, L, K] fit (at least 1)
};

// The chunk for scores of B H L K values of `value_bytes` bytes each:
//   bytes(R, Hc) = R Hc L K value_bytes
//   (B, H) if bytes(B, H) <= budget; else (1, max{Hc in 1..H : bytes(1, Hc) <= budget} or 1).
inline InferenceChunk inference_chunk(int batch, int n_heads, int q_len, int k_len,
                                      std::size_t value_bytes,
                                      double budget_bytes = kInferenceScoreBudgetBytes) {
  const auto bytes = [&](int rows, int heads) {
    return double(rows) * heads * q_len * double(k_len) * double(value_bytes);
  };
  if (bytes(batch, n_heads) <= budget_bytes) return {batch, n_heads};
  int heads = n_heads;
  while (heads > 1 && bytes(1, heads) > budget_bytes) --heads;
  return {1, heads};
}

template <class T>
struct InferenceScratch {
  double score_budget_bytes = kInferenceScoreBudgetBytes;  // tests lower it to force chunks
  xt::xtensor<T, 3> q, k, v, ctx;  // [B, L, d], [B, K, d], [B, K, d], [B, L, d]
  xt::xtensor<T, 4> scores;        // [R, Hc, L, K]: scores, then probabilities, of one chunk
};

}  // namespace poslab
