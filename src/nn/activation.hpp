// Point-wise non-linearities of the feed-forward block, forward and backward.
//   ReLU(u) = max(0, u)                                  (Vaswani et al., Transformer-XL)
//   GELU(u) = u/2 (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))  (tanh approximation, GPT-2)
#pragma once

#include <cmath>
#include <string>

namespace poslab {

enum class Activation { relu, gelu };

inline Activation activation_from_name(const std::string& name) {
  return name == "gelu" ? Activation::gelu : Activation::relu;
}

template <class T>
void activation_forward(Activation act, const T* u, T* out, long n) {
  if (act == Activation::relu) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) out[i] = u[i] > T(0) ? u[i] : T(0);
    return;
  }
  const T c = std::sqrt(T(2) / T(M_PI));
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    const T x = u[i];
    out[i] = T(0.5) * x * (T(1) + std::tanh(c * (x + T(0.044715) * x * x * x)));
  }
}

// du = dout * act'(u)  (written, not accumulated: du is the feed-forward block's own buffer)
template <class T>
void activation_backward(Activation act, const T* u, const T* dout, T* du, long n) {
  if (act == Activation::relu) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; ++i) du[i] = u[i] > T(0) ? dout[i] : T(0);
    return;
  }
  const T c = std::sqrt(T(2) / T(M_PI));
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    const T x = u[i];
    const T t = std::tanh(c * (x + T(0.044715) * x * x * x));
    const T dt = (T(1) - t * t) * c * (T(1) + T(3) * T(0.044715) * x * x);
    du[i] = dout[i] * (T(0.5) * (T(1) + t) + T(0.5) * x * dt);
  }
}

}  // namespace poslab
