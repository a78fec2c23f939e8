// Filling a parameter with draws from N(0, std^2): how poslab initialises its weights.
//
// One draw per element, in storage order, from the run's generator (core/rng.hpp). That order
// is part of what a seed means: the same config and seed give the same initial weights, bit for
// bit, only as long as every parameter is filled this way, in the same order.
#pragma once

#include <cstddef>

#include "core/arena.hpp"
#include "core/rng.hpp"

namespace poslab {

// p's values ~ N(0, std^2), element i from the i-th draw.
template <class T>
void fill_normal(ParameterArena<T>& arena, Param p, Rng& rng, double std) {
  T* w = arena.value(p);
  for (std::size_t i = 0; i < p.size; ++i) w[i] = T(rng.normal(0.0, std));
}

}  // namespace poslab
