// Position-wise feed-forward block (Vaswani et al. 2017, eq. 2):
//
//   FFN(x) = act(x W_1 + b_1) W_2 + b_2      x [N, d]   W_1 [d, d_inner]   W_2 [d_inner, d]
//
// Forward caches the pre-activation u = x W_1 + b_1 and a = act(u), both [N, d_inner].
#pragma once

#include <string>

#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "core/rng.hpp"
#include "nn/activation.hpp"
#include "nn/linear.hpp"

namespace poslab {

template <class T>
class FeedForward {
 public:
  FeedForward(ParameterArena<T>& arena, const std::string& prefix, int d_model, int d_inner,
              Activation act)
      : arena_(arena), d_(d_model), di_(d_inner), act_(act) {
    W_1 = arena.add(prefix + "W_1", {std::size_t(d_model), std::size_t(d_inner)});
    b_1 = arena.add(prefix + "b_1", {std::size_t(d_inner)}, false);
    W_2 = arena.add(prefix + "W_2", {std::size_t(d_inner), std::size_t(d_model)});
    b_2 = arena.add(prefix + "b_2", {std::size_t(d_model)}, false);
  }

  void init(Rng& rng, double std) {
    for (Param p : {W_1, W_2}) {
      T* w = arena_.value(p);
      for (std::size_t i = 0; i < p.size; ++i) w[i] = T(rng.normal(0.0, std));
    }
  }

  // x [N, d] -> out [N, d]
  void forward(const T* x, T* out, int N) {
    ensure_shape(u_, {std::size_t(N), std::size_t(di_)});
    ensure_shape(a_, {std::size_t(N), std::size_t(di_)});
    linear_forward<T>(x, arena_.value(W_1), arena_.value(b_1), u_.data(), N, d_, di_);
    activation_forward<T>(act_, u_.data(), a_.data(), long(N) * di_);
    linear_forward<T>(a_.data(), arena_.value(W_2), arena_.value(b_2), out, N, di_, d_);
  }

  // Accumulates dx [N, d] and the parameter gradients.
  void backward(const T* dout, const T* x, T* dx, int N) {
    ensure_shape(da_, {std::size_t(N), std::size_t(di_)});
    ensure_shape(du_, {std::size_t(N), std::size_t(di_)});
    // da = dout W_2^T and du = da act'(u) are written, not accumulated: no zeroing pass.
    linear_backward<T>(dout, a_.data(), arena_.value(W_2), da_.data(), arena_.grad(W_2),
                       arena_.grad(b_2), N, di_, d_, /*dx_beta=*/T(0));
    activation_backward<T>(act_, u_.data(), da_.data(), du_.data(), long(N) * di_);
    linear_backward<T>(du_.data(), x, arena_.value(W_1), dx, arena_.grad(W_1), arena_.grad(b_1),
                       N, d_, di_);
  }

  Param W_1, b_1, W_2, b_2;

 private:
  ParameterArena<T>& arena_;
  int d_, di_;
  Activation act_;
  xt::xtensor<T, 2> u_, a_, du_, da_;
};

}  // namespace poslab
