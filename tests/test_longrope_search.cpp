// LongRoPE's search (eval/longrope_search.hpp), checked against docs/conventions.md
// ("LongRoPE", the search): lambda_i in [1, cap] on a 0.01 grid, non-decreasing;
// cap 1 + s (released dim_mono: evo_list = arange(1.0, 1.0 + scale + step, step)) or 1.25 s
// (paper); population 64, 40 iterations, 16 mutations + 16 crossovers, 32 parents; crossover
// copies a gene from parent 2 with probability 0.3 * 0.5; seeds PI / NTK / YaRN.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "eval/longrope_search.hpp"

using namespace poslab;

namespace {
bool on_grid(double x) { return std::abs((x - 1.0) / 0.01 - std::round((x - 1.0) / 0.01)) < 1e-6; }
}  // namespace

TEST_CASE("LongRoPE search: the seeds are PI, NTK and YaRN's lambda_i on the grid", "[longrope_search]") {
  LongRopeSearchOptions o;  // s = 4
  const int pairs = 8;      // d_h = 16
  // PI: every pair divided by s.
  REQUIRE(longrope_seed("pi", o, pairs, 10000, 64) == std::vector<double>(8, 4.0));
  // NTK: base b s^(d/(d-2)), so theta'_i = theta_i s^(-2i/(d-2)) and lambda_i = s^(2i/14).
  const auto ntk = longrope_seed("ntk", o, pairs, 10000, 64);
  for (int i = 0; i < pairs; ++i)
    REQUIRE(ntk[i] == Approx(std::round((std::pow(4.0, 2.0 * i / 14) - 1) * 100) / 100 + 1));
  REQUIRE(ntk.back() == Approx(4.0));
  // YaRN, beta 32 / 1 at L = 64, b = 10000, d = 16 (REFERENCE: "the YaRN ramp (beta 32/1) spans
  // pairs 0-3 only"): low = floor(16 ln(64 / (32 2pi)) / (2 ln b)) -> max(0, -1) = 0,
  // high = ceil(16 ln(64 / (1 2pi)) / (2 ln b)) = ceil(2.016) = 3; g_i = clamp(i / 3, 0, 1),
  // theta' = theta (g / s + 1 - g): lambda_i = 1 / (g_i / 4 + 1 - g_i).
  const auto yarn = longrope_seed("yarn", o, pairs, 10000, 64);
  for (int i = 0; i < pairs; ++i) {
    const double g = std::clamp(i / 3.0, 0.0, 1.0);
    REQUIRE(yarn[i] == Approx(std::round((1 / (g / 4 + 1 - g) - 1) * 100) / 100 + 1));
  }
  REQUIRE(yarn[0] == 1.0);
  REQUIRE(yarn[3] == Approx(4.0));
  REQUIRE_THROWS_WITH(longrope_seed("llama3", o, pairs, 10000, 64), Catch::Contains("pi, ntk or yarn"));
}

TEST_CASE("LongRoPE search: a mutant is new, non-decreasing, on the grid, within [1, cap]",
          "[longrope_search]") {
  for (const char* cap : {"code", "paper"}) {
    LongRopeSearchOptions o;
    o.cap = cap;
    const double top = std::string(cap) == "code" ? 5.0 : 5.0;  // 1 + 4 and 1.25 x 4 coincide
    REQUIRE(longrope_cap(o) == top);
    Rng rng(1);
    LongRopeOperators ops(o, rng);
    std::vector<std::vector<double>> history = {std::vector<double>(8, 4.0)};
    std::vector<double> parent = history[0];
    double highest = 0, lowest = 10;
    for (int m = 0; m < 2000; ++m) {
      const auto child = ops.mutate(parent, history);
      REQUIRE(std::is_sorted(child.begin(), child.end()));
      for (double x : child) {
        REQUIRE(on_grid(x));
        REQUIRE(x >= 1.0);
        REQUIRE(x <= top + 1e-9);
      }
      REQUIRE(child != parent);
      REQUIRE(history.back() == child);
      highest = std::max(highest, child.back());
      lowest = std::min(lowest, child.front());
      parent = child;
    }
    REQUIRE(history.size() == 2001);
    for (std::size_t i = 0; i < history.size(); ++i)  // all distinct
      for (std::size_t j = i + 1; j < std::min(history.size(), i + 50); ++j)
        REQUIRE(history[i] != history[j]);
    REQUIRE(highest == Approx(top));  // the cap is reached
    REQUIRE(lowest == Approx(1.0));   // and the floor
  }
  LongRopeSearchOptions paper;
  paper.cap = "paper";
  paper.factor = 8;
  REQUIRE(longrope_cap(paper) == 10.0);  // 1.25 s, not 1 + s = 9
}

TEST_CASE("LongRoPE search: crossover takes each changed gene from parent 2 (p = 0.3 x 0.5)",
          "[longrope_search]") {
  LongRopeSearchOptions o;
  Rng rng(3);
  LongRopeOperators ops(o, rng);
  // Any single gene of parent 2 keeps the vector non-decreasing, so the first gene taken from
  // parent 2 makes a new vector, which is returned at once. Genes are visited 0, 1, ..., each
  // taken with probability q = 0.3 x 0.5 = 0.15 (passes repeat until one is): gene i is the one
  // with probability q (1 - q)^i / (1 - (1 - q)^8), 0.206 for gene 0.
  const std::vector<double> p1 = {1, 2, 3, 4, 5, 6, 7, 8}, p2 = {1.5, 2.5, 3.5, 4.5, 5.5, 6.5,
                                                                 7.5, 8.5};
  std::map<int, int> taken;
  const int n = 4000;
  for (int trial = 0; trial < n; ++trial) {
    std::vector<std::vector<double>> history = {p1, p2};
    std::vector<double> child;
    REQUIRE(ops.crossover(p1, p2, history, child));
    REQUIRE(history.back() == child);
    int from2 = 0, gene = -1;
    for (int i = 0; i < 8; ++i) {
      REQUIRE((child[i] == p1[i] || child[i] == p2[i]));
      if (child[i] == p2[i]) ++from2, gene = i;
    }
    REQUIRE(from2 == 1);
    ++taken[gene];
  }
  const double q = 0.15, norm = 1 - std::pow(1 - q, 8);
  for (int i = 0; i < 8; ++i) {
    const double p = q * std::pow(1 - q, i) / norm;
    INFO("gene " << i << ": " << taken[i] << " of " << n << ", expected " << n * p);
    REQUIRE(std::abs(taken[i] - n * p) < 5 * std::sqrt(n * p * (1 - p)));
  }
  // A child that would decrease is not returned: genes from parent 2 only as a suffix here.
  const std::vector<double> low(8, 1.0), high = {2, 2, 2, 2, 3, 3, 3, 3};
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::vector<double>> history = {low, high};
    std::vector<double> child;
    if (!ops.crossover(low, high, history, child)) continue;
    REQUIRE(std::is_sorted(child.begin(), child.end()));
  }
  std::vector<std::vector<double>> history;
  std::vector<double> child;
  REQUIRE_FALSE(ops.crossover(p1, p1, history, child));  // equal parents: nothing
}

TEST_CASE("LongRoPE search: elitist, seeded, and it finds the minimum of a known fitness",
          "[longrope_search]") {
  // Fitness: squared distance to a known non-decreasing vector on the grid.
  const std::vector<double> target = {1, 1.1, 1.5, 2.2, 3, 3.6, 4.4, 4.9};
  auto fitness = [&](const std::vector<double>& f) {
    double sum = 0;
    for (std::size_t i = 0; i < f.size(); ++i) sum += (f[i] - target[i]) * (f[i] - target[i]);
    return sum;
  };
  LongRopeSearchOptions o;
  o.iterations = 40;
  const std::vector<std::vector<double>> seeds = {longrope_seed("pi", o, 8, 10000, 64),
                                                  longrope_seed("ntk", o, 8, 10000, 64),
                                                  longrope_seed("yarn", o, 8, 10000, 64)};
  std::ostringstream log;
  const auto r = run_longrope_search(seeds, o, fitness, &log);
  REQUIRE(r.curve.size() == 41);
  REQUIRE(r.curve.front().evaluations == 64);                // the starting population
  REQUIRE(r.curve.back().evaluations == 64 + 40 * 32);       // 16 + 16 per iteration
  for (std::size_t t = 1; t < r.curve.size(); ++t)           // the parents survive
    REQUIRE(r.curve[t].best_loss <= r.curve[t - 1].best_loss);
  REQUIRE(r.best.loss == r.curve.back().best_loss);
  REQUIRE(r.best.loss < 0.1 * r.curve.front().best_loss);
  REQUIRE(std::is_sorted(r.best.factors.begin(), r.best.factors.end()));
  REQUIRE(log.str().find("iteration  40/40") != std::string::npos);
  // Seeded: the same run twice.
  const auto again = run_longrope_search(seeds, o, fitness);
  REQUIRE(again.best.factors == r.best.factors);
  o.seed = 2;
  REQUIRE(run_longrope_search(seeds, o, fitness).curve[1].best_factors != r.curve[1].best_factors);
}
