// Parameters, their gradients and Adam's two moments, all in one arena (as in llm.c).
//
// Building a model has two phases: every layer first *declares* its parameters (`add`), which
// only records a name, a shape and an offset; then `allocate` makes one buffer of 4 * N scalars
// laid out as [values | grads | adam_m | adam_v]. Layers keep the returned `Param` handle and ask
// the arena for pointers when they run. Nothing is allocated after that, and the optimizer,
// gradient clipping and checkpointing each see the whole model as one flat vector.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>

#include "core/parallel_loops.hpp"

namespace poslab {

// A handle to one parameter tensor inside the arena.
struct Param {
  std::size_t offset = 0;
  std::size_t size = 0;
  std::size_t index = 0;  // position in ParameterArena::slots()
};

struct ParamSlot {
  std::string name;                // e.g. "layer0.attn.W_q"
  std::vector<std::size_t> shape;  // e.g. {d_model, d_model}
  std::size_t offset = 0;
  std::size_t size = 0;
  bool weight_decay = true;  // AdamW decays matrices, not biases, gains or positional tables
};

template <class T>
class ParameterArena {
 public:
  Param add(std::string name, std::vector<std::size_t> shape, bool weight_decay = true) {
    if (!storage_.empty()) throw std::logic_error("ParameterArena::add after allocate: " + name);
    std::size_t size = 1;
    for (auto s : shape) size *= s;
    Param p{count_, size, slots_.size()};
    slots_.push_back(ParamSlot{std::move(name), std::move(shape), count_, size, weight_decay});
    count_ += size;
    return p;
  }

  // One buffer for values, gradients and both Adam moments, zero-filled.
  void allocate() { storage_.assign(4 * count_, T(0)); }

  std::size_t count() const { return count_; }
  const std::vector<ParamSlot>& slots() const { return slots_; }

  T* value(Param p) { return storage_.data() + p.offset; }
  const T* value(Param p) const { return storage_.data() + p.offset; }
  T* grad(Param p) { return storage_.data() + count_ + p.offset; }
  const T* grad(Param p) const { return storage_.data() + count_ + p.offset; }

  // The whole model as flat vectors, [count()] each.
  T* values() { return storage_.data(); }
  const T* values() const { return storage_.data(); }
  T* grads() { return storage_.data() + count_; }
  const T* grads() const { return storage_.data() + count_; }
  T* adam_m() { return storage_.data() + 2 * count_; }
  T* adam_v() { return storage_.data() + 3 * count_; }
  const T* adam_m() const { return storage_.data() + 2 * count_; }
  const T* adam_v() const { return storage_.data() + 3 * count_; }

  void zero_grads() { parallel_fill(grads(), long(count_), T(0)); }

  // An xtensor view (no copy) of a parameter, shaped as declared.
  auto view(Param p) {
    return xt::adapt(value(p), p.size, xt::no_ownership(), slots_[p.index].shape);
  }

 private:
  std::vector<ParamSlot> slots_;
  std::size_t count_ = 0;
  std::vector<T> storage_;
};

}  // namespace poslab
