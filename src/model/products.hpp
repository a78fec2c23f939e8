// The matrix products of one training step, listed by shape: what `poslab bench` times alone to
// find the ceiling a model of this size can reach here, and what model/flops.hpp counts.
//
// A product C[m, n] = A[m, k] B[k, n] costs 2 m n k FLOPs (a multiply and an add per term). Its
// backward is two products of the same cost: dA = dC B^T [m, k] and dB = A^T dC [k, n]. So a
// training step is the forward list below plus, for each entry, its two backward products
// (the embedding lookup and the gradient of the memory rows, which are stop-gradient in
// Transformer-XL, are not products; the inputs' gradient of the first layer is still computed
// and counted, as poslab does).
//
// For a segment of L queries with M memory rows (K = M + L keys), batch B, per layer:
//   q projection     [B L, d] x [d, d]                 once
//   k, v projections [B K, d] x [d, d]                 twice (memory rows are projected again)
//   scores q_h k_h^T [L, d_h] x [d_h, K]               B H times (one per batch row and head)
//   P_h v_h          [L, K] x [K, d_h]                 B H times
//   out projection   [B L, d] x [d, d]                 once
//   feed-forward     [B L, d] x [d, d_inner], [B L, d_inner] x [d_inner, d]
// and once per step the output layer [B L, d] x [d, V].
//
// "Best batched form": a product that runs once per step is one sgemm over all its rows; the
// per-head products are independent, so they are spread over the threads (one sgemm each) the
// way a batched sgemm would. Which is why the ceiling is a property of the shapes, not of
// poslab's code: the model can only get closer to it by spending less time outside products.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace poslab {

struct MatrixProduct {
  std::string name;
  int m, n, k;   // C[m, n] = A[m, k] B[k, n]
  long count;    // how many times a training step runs it
  bool per_head; // small and independent: spread over the threads, one sgemm each

  double flops() const { return 2.0 * m * n * k * count; }
};

// The forward products of one training step and, after them, their backward products.
inline std::vector<MatrixProduct> training_products(const ModelConfig& model, int batch,
                                                    int seq_len, int mem_len) {
  const int B = batch, L = seq_len, K = mem_len + seq_len, d = model.d_model;
  const int H = model.n_heads, dh = model.d_model / model.n_heads, N = model.n_layers;
  const std::vector<MatrixProduct> forward = {
      {"q projection", B * L, d, d, N, false},
      {"k, v projections", B * K, d, d, 2L * N, false},
      {"scores q_h k_h^T", L, K, dh, long(N) * B * H, true},
      {"P_h v_h", L, dh, K, long(N) * B * H, true},
      {"out projection", B * L, d, d, N, false},
      {"feed-forward in", B * L, model.d_inner, d, N, false},
      {"feed-forward out", B * L, d, model.d_inner, N, false},
      {"output layer", B * L, model.vocab_size, d, 1, false},
  };
  std::vector<MatrixProduct> all = forward;
  for (const MatrixProduct& p : forward) {
    all.push_back({p.name + " dA", p.m, p.k, p.n, p.count, p.per_head});  // dC B^T
    all.push_back({p.name + " dB", p.k, p.n, p.m, p.count, p.per_head});  // A^T dC
  }
  return all;
}

}  // namespace poslab
