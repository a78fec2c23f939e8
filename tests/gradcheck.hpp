// Finite-difference gradient checking, in double precision.
//
// For every entry theta_i of a flat vector, the central difference
//   g_i ~= (f(theta + h e_i) - f(theta - h e_i)) / (2h),  h = 1e-5
// has truncation error O(h^2 f''') ~ 1e-10 and round-off ~ 1e-16 |f| / h ~ 1e-11 here, so a
// relative tolerance of 1e-6 is tight enough that any real mistake in a backward pass fails.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/rng.hpp"

namespace poslab::testing {

struct GradCheckResult {
  double worst_rel_error = 0;
  std::size_t worst_index = 0;
  double analytic = 0, numeric = 0;
  std::size_t checked = 0;
};

// Which entries get a finite difference: every one, unless the environment variable
// POSLAB_GRADCHECK_STRIDE = s > 1 asks for every s-th (0, s, 2s, ...). scripts/test-sanitize.sh
// sets it: under the sanitizers each check still runs the whole forward and backward pass (the
// memory the sanitizers watch), and only the number of repeated forward passes shrinks; the
// release build (ctest, scripts/test.sh) checks every entry.
inline std::size_t gradcheck_stride() {
  static const std::size_t stride = [] {
    const char* s = std::getenv("POSLAB_GRADCHECK_STRIDE");
    const long v = s ? std::atol(s) : 1;
    return std::size_t(v > 1 ? v : 1);
  }();
  return stride;
}

// theta: the n values to perturb (in place, restored afterwards); analytic: the gradient to
// check; loss: recomputes the scalar from the current theta.
inline GradCheckResult finite_difference_check(double* theta, const double* analytic,
                                               std::size_t n,
                                               const std::function<double()>& loss,
                                               double h = 1e-5, double floor = 1e-3) {
  GradCheckResult r;
  for (std::size_t i = 0; i < n; i += gradcheck_stride()) {
    const double saved = theta[i];
    theta[i] = saved + h;
    const double up = loss();
    theta[i] = saved - h;
    const double down = loss();
    theta[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double rel = std::abs(numeric - analytic[i]) /
                       std::max({std::abs(numeric), std::abs(analytic[i]), floor});
    ++r.checked;
    if (rel > r.worst_rel_error) r = {rel, i, analytic[i], numeric, r.checked};
  }
  return r;
}

// Names flat index i of a parameter arena: "t5.bias[3, 1] of shape [32, 2]", so that a failing
// gradient check says which parameter and which coordinates are wrong.
template <class Arena>
std::string locate(const Arena& arena, std::size_t i) {
  for (const auto& slot : arena.slots()) {
    if (i < slot.offset || i >= slot.offset + slot.size) continue;
    std::size_t rest = i - slot.offset;
    std::vector<std::size_t> coords(slot.shape.size());
    for (std::size_t k = slot.shape.size(); k-- > 0;) {  // row-major: last index fastest
      coords[k] = rest % slot.shape[k];
      rest /= slot.shape[k];
    }
    std::ostringstream out;
    out << slot.name << "[";
    for (std::size_t k = 0; k < coords.size(); ++k) out << (k ? ", " : "") << coords[k];
    out << "] of shape [";
    for (std::size_t k = 0; k < slot.shape.size(); ++k) out << (k ? ", " : "") << slot.shape[k];
    out << "]";
    return out.str();
  }
  return "index " + std::to_string(i) + " (outside every parameter)";
}

// REQUIREs the check to pass and prints the worst entry if it does not; `where` names a flat
// index (e.g. [&](std::size_t i) { return locate(arena, i); }).
inline void require_gradient(const std::string& what, double* theta, const double* analytic,
                             std::size_t n, const std::function<double()>& loss,
                             double tolerance = 1e-6,
                             const std::function<std::string(std::size_t)>& where = nullptr) {
  const auto r = finite_difference_check(theta, analytic, n, loss);
  INFO(what << ": worst relative error " << r.worst_rel_error << " at "
            << (where ? where(r.worst_index) : "index " + std::to_string(r.worst_index))
            << " (analytic " << r.analytic << ", numeric " << r.numeric << ") over "
            << r.checked << " of " << n << " entries");
  REQUIRE(n > 0);
  REQUIRE(r.worst_rel_error < tolerance);
}

inline std::vector<double> random_vector(std::size_t n, Rng& rng, double std = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = rng.normal(0.0, std);
  return v;
}

}  // namespace poslab::testing
