// Softmax cross-entropy with a weight per token.
//
//   p_t = softmax(logits_t)     loss = sum_t w_t * (-log p_t[y_t]) / sum_t w_t
//
// The weights let a task score only its answer tokens (w = 0 elsewhere) and implement
// Transformer-XL's "half loss" (w = 0 on the first half of each segment). The backward pass is
//   dlogits_t = w_t / sum(w) * (p_t - onehot(y_t)),
// computed in the same sweep, written over `probs` so no extra buffer is needed.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/ordered_sums.hpp"
#include "core/row_max.hpp"
#include "core/vector_exp.hpp"

namespace poslab {

// logits [N, V]; targets, weights [N] (weights == nullptr: all 1).
// Writes dlogits [N, V] (the gradient of the returned mean loss) and the per-token losses
// token_loss [N]. Returns the weighted mean loss, summed in token order so that it does not
// depend on the number of threads (a bit-identical loss curve for the same seed).
template <class T>
double cross_entropy_forward_backward(const T* logits, const std::int32_t* targets,
                                      const T* weights, T* dlogits, T* token_loss, int N, int V) {
  double weight_sum = 0;
  for (int n = 0; n < N; ++n) weight_sum += weights ? double(weights[n]) : 1.0;
  if (weight_sum <= 0) weight_sum = 1;  // nothing scored: loss 0 and zero gradient
  // Eight rows at a time: their sums of exp advance side by side, each in its serial order
  // (core/ordered_sums.hpp), so the loss is the plain loop's, bit for bit, without one long chain
  // of dependent adds per row.
  constexpr int R = 8;
#pragma omp parallel for schedule(static)
  for (int n0 = 0; n0 < N; n0 += R) {
    const int rows = N - n0 < R ? N - n0 : R;
    const T* e[R];  // exp(z - zmax) of each row, in dlogits
    int begin[R], end[R];
    T zmax[R], sum[R];
    for (int r = 0; r < R; ++r) {
      const long n = n0 + (r < rows ? r : rows - 1);
      const T* z = logits + n * V;
      T* dz = dlogits + n * V;
      e[r] = dz;
      begin[r] = 0;
      end[r] = r < rows ? V : 0;  // rows past N: empty
      if (r >= rows) continue;
      zmax[r] = row_max(z, 0, V);
      exp_shifted(z, zmax[r], dz, V);  // dz[v] = exp(z[v] - zmax), std::exp's bits (core/vector_exp.hpp)
    }
    ordered_row_sums(e, begin, end, sum);
    for (int r = 0; r < rows; ++r) {
      const int n = n0 + r;
      const T* z = logits + static_cast<long>(n) * V;
      T* dz = dlogits + static_cast<long>(n) * V;
      const T w = weights ? weights[n] : T(1);
      const T nll = std::log(sum[r]) - (z[targets[n]] - zmax[r]);
      token_loss[n] = nll;
      const T scale = w / T(weight_sum);
      for (int v = 0; v < V; ++v) dz[v] = dz[v] / sum[r] * scale;
      dz[targets[n]] -= scale;
    }
  }
  double total = 0;
  for (int n = 0; n < N; ++n) total += (weights ? double(weights[n]) : 1.0) * token_loss[n];
  return total / weight_sum;
}

}  // namespace poslab
