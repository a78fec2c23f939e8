// Token embedding: x[n] = scale * E[token[n]],  E [V, d].
// scale = sqrt(d) as in Vaswani et al. and Transformer-XL, so that embeddings initialised with a
// small std are not drowned by an absolute positional encoding of unit amplitude.
// Backward scatters: dE[token[n]] += scale * dx[n] (serial: tokens may repeat).
#pragma once

#include <cstdint>

namespace poslab {

template <class T>
void embedding_forward(const std::int32_t* tokens, const T* E, T* x, int N, int d, T scale) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* e = E + static_cast<long>(tokens[n]) * d;
    T* xr = x + static_cast<long>(n) * d;
    for (int i = 0; i < d; ++i) xr[i] = scale * e[i];
  }
}

template <class T>
void embedding_backward(const std::int32_t* tokens, const T* dx, T* dE, int N, int d, T scale) {
  for (int n = 0; n < N; ++n) {
    T* de = dE + static_cast<long>(tokens[n]) * d;
    const T* dxr = dx + static_cast<long>(n) * d;
    for (int i = 0; i < d; ++i) de[i] += scale * dxr[i];
  }
}

}  // namespace poslab
