// Work buffers of an evaluation-only (inference) attention pass, shared by every layer.
//
// Training keeps, in every layer, what backward needs: q, k, v, the context and the attention
// weights P [B, H, L, K]. At a long context P dominates: with B = 1, H = 4, L = 512 and
// K = 16,384 keys it is 128 MiB per layer. Evaluation needs none of it after a layer is done,
// so all layers write into one set of buffers, and the scores are made a chunk of batch rows
// at a time:
//
//   per chunk of R rows (rows b0 .. b0 + R - 1):
//     S [R, H, L, K] = scale * q_h k_h^T + (c) encoding score terms
//     P = softmax(S) over visible keys;   z_h = P_h v_h + (d) encoding value terms
//
// The encodings see a geometry with batch = R and pointers offset to row b0, so every (b, h)
// cell gets exactly the inputs it gets in the whole-batch pass. R = B (one chunk: the very calls
// of the training forward, so results are bit-identical by construction) while one layer's
// [B, H, L, K] scores fit in kInferenceScoreBudgetBytes; above that R = 1, and peak memory no
// longer grows with B or with the number of layers (it still grows with H L K).
#pragma once

#include <cstddef>

#include <xtensor/xtensor.hpp>

namespace poslab {

// Above this many bytes of scores per layer ([B, H, L, K] values), evaluation goes row by row.
inline constexpr double kInferenceScoreBudgetBytes = 256.0 * (1 << 20);

// Batch rows per chunk of an inference pass: all B rows, or 1 when B H L K values of
// `value_bytes` bytes each would exceed the budget.
inline int inference_chunk_rows(int batch, int n_heads, int q_len, int k_len,
                                std::size_t value_bytes,
                                double budget_bytes = kInferenceScoreBudgetBytes) {
  const double bytes = double(batch) * n_heads * q_len * k_len * double(value_bytes);
  return bytes > budget_bytes ? 1 : batch;
}

template <class T>
struct InferenceScratch {
  double score_budget_bytes = kInferenceScoreBudgetBytes;  // tests set 0 to force row chunks
  xt::xtensor<T, 3> q, k, v, ctx;  // [B, L, d], [B, K, d], [B, K, d], [B, L, d]
  xt::xtensor<T, 4> scores;        // [R, H, L, K]: scores, then probabilities, of one chunk
};

}  // namespace poslab
