// AdamW (Loshchilov & Hutter 2019) over the whole parameter arena, with the learning-rate
// schedule and global-norm gradient clipping used to train transformers.
//
//   lr_t   = lr * t / warmup                                    during warm-up (t = 1..warmup)
//          = lr * (r + (1 - r) (1 + cos(pi * p)) / 2)           after, p = progress in [0, 1]
//   g     <- g * min(1, clip / ||g||)                           global norm over every parameter
//   m     <- b1 m + (1 - b1) g,      v <- b2 v + (1 - b2) g^2
//   theta <- theta - lr_t (m_hat / (sqrt(v_hat) + eps) + wd theta)   m_hat = m / (1 - b1^t), ...
//
// Weight decay applies to matrices only (ParamSlot::weight_decay), not to biases, layer-norm
// gains or positional tables. Everything runs over flat arrays: no allocation.
#pragma once

#include <cmath>

#include "config/config.hpp"
#include "core/arena.hpp"

namespace poslab {

inline double learning_rate(const TrainConfig& c, int step /* 0-based */) {
  const int t = step + 1;
  if (t <= c.warmup_steps) return c.lr * t / c.warmup_steps;
  const int decay_steps = std::max(1, c.steps - c.warmup_steps);
  const double progress = std::min(1.0, double(t - c.warmup_steps) / decay_steps);
  const double r = c.min_lr_ratio;
  return c.lr * (r + (1 - r) * 0.5 * (1 + std::cos(M_PI * progress)));
}

// Scales the gradients so that their global L2 norm is at most max_norm (0 = no clipping).
// Returns the norm before clipping.
template <class T>
double clip_gradients(ParameterArena<T>& arena, double max_norm) {
  double sq = 0;
  const T* g = arena.grads();
  for (std::size_t i = 0; i < arena.count(); ++i) sq += double(g[i]) * g[i];
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    const T s = T(max_norm / norm);
    T* gm = arena.grads();
    for (std::size_t i = 0; i < arena.count(); ++i) gm[i] *= s;
  }
  return norm;
}

// `moment_steps_before`: steps already in Adam's moments when this training started (a
// fine-tuned run that continues its parent's moments, train.init_optimizer): the bias
// correction counts them, the learning-rate schedule does not.
template <class T>
void adamw_step(ParameterArena<T>& arena, const TrainConfig& c, int step, double lr,
                int moment_steps_before = 0) {
  const int t = step + 1 + moment_steps_before;
  const double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
  const T b1 = T(c.beta1), b2 = T(c.beta2), eps = T(c.eps);
  T* p = arena.values();
  const T* g = arena.grads();
  T* m = arena.adam_m();
  T* v = arena.adam_v();
  // Element by element, so the threads (one region, each slot's elements split among them)
  // give exactly the serial results.
#pragma omp parallel
  for (const ParamSlot& slot : arena.slots()) {
    const T decay = slot.weight_decay ? T(c.weight_decay) : T(0);
    const T step_size = T(lr / bc1);
    const T inv_bc2 = T(1.0 / bc2);
    const std::size_t end = slot.offset + slot.size;
#pragma omp for simd schedule(static) nowait
    for (std::size_t i = slot.offset; i < end; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= step_size * m[i] / (std::sqrt(v[i] * inv_bc2) + eps) + T(lr) * decay * p[i];
    }
  }
}

}  // namespace poslab
