// Finite-difference gradient checking, in double precision.
//
// For every entry theta_i of a flat vector, the central difference
//   g_i ~= (f(theta + h e_i) - f(theta - h e_i)) / (2h),  h = 1e-5
// has truncation error O(h^2 f''') ~ 1e-10 and round-off ~ 1e-16 |f| / h ~ 1e-11 here, so a
// relative tolerance of 1e-6 is tight enough that any real mistake in a backward pass fails.
#pragma once

#include <algorithm>
#include <cmath>
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

// theta: the n values to perturb (in place, restored afterwards); analytic: the gradient to
// check; loss: recomputes the scalar from the current theta.
inline GradCheckResult finite_difference_check(double* theta, const double* analytic,
                                               std::size_t n,
                                               const std::function<double()>& loss,
                                               double h = 1e-5, double floor = 1e-3) {
  GradCheckResult r;
  for (std::size_t i = 0; i < n; ++i) {
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

// REQUIREs the check to pass and prints the worst entry if it does not.
inline void require_gradient(const std::string& what, double* theta, const double* analytic,
                             std::size_t n, const std::function<double()>& loss,
                             double tolerance = 1e-6) {
  const auto r = finite_difference_check(theta, analytic, n, loss);
  INFO(what << ": worst relative error " << r.worst_rel_error << " at index " << r.worst_index
            << " (analytic " << r.analytic << ", numeric " << r.numeric << ") over " << n
            << " entries");
  REQUIRE(n > 0);
  REQUIRE(r.worst_rel_error < tolerance);
}

inline std::vector<double> random_vector(std::size_t n, Rng& rng, double std = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = rng.normal(0.0, std);
  return v;
}

}  // namespace poslab::testing
