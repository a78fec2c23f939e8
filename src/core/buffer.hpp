// Work buffers that keep their memory between steps: `ensure_shape` reallocates only when a
// shape changes (a new sequence length at evaluation), so a training step, whose shapes never
// change, allocates nothing after the first one.
#pragma once

#include <array>
#include <cstddef>

#include <xtensor/xtensor.hpp>

#include "core/parallel_loops.hpp"

namespace poslab {

template <class T, std::size_t N>
void ensure_shape(xt::xtensor<T, N>& t, const std::array<std::size_t, N>& shape) {
  if (!std::equal(shape.begin(), shape.end(), t.shape().begin())) t.resize(shape);
}

template <class T, std::size_t N>
void ensure_zeros(xt::xtensor<T, N>& t, const std::array<std::size_t, N>& shape) {
  ensure_shape(t, shape);
  parallel_fill(t.data(), long(t.size()), T(0));
}

}  // namespace poslab
