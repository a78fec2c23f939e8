// LongRoPE's search (Ding et al. 2024, §3.2; microsoft/LongRoPE evolution/, algorithm
// "dim_mono"): an evolutionary search for the per-pair rescale factors lambda_0 .. lambda_(n-1)
// of rope's longrope scaling (encodings/rope_scaling.hpp) that minimise the validation loss at
// the target length L' = s L.
//
// Genes live on a grid: lambda = 1 + k step (step 0.01), 1 <= lambda_0 <= ... <= lambda_(n-1)
// <= cap, where cap = 1 + s (the released code's evo_list = arange(1, 1 + s + step, step)) or
// 1.25 s (the paper's search space, option cap = "paper"). Everything below follows the released
// code (evolution/algorithms/genetic_base.py, dim_mono.py; defaults dim_mono.json):
//
//   start       the seeds (PI, NTK, YaRN, as the paper seeds its population; the released code
//               starts from one vector) and mutations of them, round-robin, until `population`
//   iteration   parents = the `parents` best so far (lowest loss first); the new population is
//               the parents, `mutations` mutants of uniformly chosen parents, and `crossovers`
//               children of two distinct parents (the better one first; a crossover that finds
//               nothing new falls back to a mutant of the better parent)
//   mutate      repeat until the vector is new (not within 1e-8 of any vector met so far) and
//               non-decreasing: with probability 0.3, re-draw EVERY gene in turn, uniformly on
//               the grid between its neighbours (gene 0 from [1, lambda_1), the last from
//               [lambda_(n-2), cap], the others from [lambda_(i-1), lambda_(i+1)])
//   crossover   parents equal: none. Else start from parent 1 and, up to max_crossover_try
//               times, visit every gene: with probability 0.3 it may change (taking parent 2's
//               gene with probability 0.5); after each such visit, the vector so far is returned
//               if it is new and non-decreasing
//   result      the best vector of the last population
//
// The fitness is a callback, so the algorithm is tested on its own; longrope_loss below is the
// one `poslab longrope-search` gives it (train/longrope_search_run.cpp drives the search over
// its --out directory).
//
// Why in eval/: the search trains no parameter. Every step of it is an evaluation of the
// trained model (its validation loss at L' with the candidate factors), and what it finds is an
// encoding setting for later runs (a fine-tune from the run, or a zero-shot read), not a model.
// It evaluates, then searches over what it evaluated; no gradient, no optimizer state, no run
// directory of its own in this layer.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/rng.hpp"
#include "data/batch_source.hpp"
#include "model/transformer.hpp"

namespace poslab {

struct LongRopeSearchOptions {
  double factor = 4;           // s = L' / L
  double step = 0.01;          // grid of the genes
  std::string cap = "code";    // "code": lambda <= 1 + s; "paper": lambda <= 1.25 s
  int population = 64;
  int iterations = 40;
  int mutations = 16;
  int crossovers = 16;
  int parents = 32;
  int max_crossover_try = 16;
  std::uint64_t seed = 1;
};

// One evaluated vector of factors.
struct LongRopeCandidate {
  std::vector<double> factors;  // lambda_i, one per rotated pair
  double loss = 0;              // the fitness (lower is better)
};

// One line of the fitness curve: after iteration `iteration` (0 = the starting population).
struct LongRopeProgress {
  int iteration = 0;
  int evaluations = 0;          // fitness calls so far
  double best_loss = 0;         // of the parents
  double mean_parent_loss = 0;
  std::vector<double> best_factors;
};

struct LongRopeSearchResult {
  LongRopeCandidate best;
  std::vector<LongRopeProgress> curve;  // iterations 0 .. options.iterations
};

using LongRopeFitness = std::function<double(const std::vector<double>& factors)>;

// The largest factor a gene may take: 1 + s (code) or 1.25 s (paper); throws
// std::invalid_argument for another cap name.
double longrope_cap(const LongRopeSearchOptions& options);

// The seeds, as factors lambda_i = theta_i / theta'_i of each method at s (encodings/
// rope_scaling.hpp) for `pairs` pairs of a head with base `base` trained at `original_len`,
// rounded to the grid and clamped to [1, cap]: "pi" (all s), "ntk" (s^(2i/(d-2))), "yarn"
// (beta_fast 32, beta_slow 1). Throws std::invalid_argument for another name.
std::vector<double> longrope_seed(const std::string& method, const LongRopeSearchOptions& options,
                                  int pairs, double base, std::int64_t original_len);

// Throws std::invalid_argument unless population >= parents >= 2, iterations, mutations and
// crossovers >= 0, step > 0 and factor > 1.
void check_longrope_options(const LongRopeSearchOptions& options);

// Called with the curve so far after every iteration (the CLI rewrites fitness.csv with it, so
// that a search stopped midway keeps its curve).
using LongRopeIterationDone = std::function<void(const std::vector<LongRopeProgress>& curve)>;

// The evolution. `seeds` (each with one factor per pair, non-decreasing, on the grid) start the
// population; `progress` (if not null) receives a line per iteration. Given the same seeds,
// options and fitness values, it asks for the same vectors in the same order (every random draw
// comes from options.seed): a search stopped midway is resumed by replaying it with the losses
// already computed (the CLI keeps them in evaluations.csv).
LongRopeSearchResult run_longrope_search(const std::vector<std::vector<double>>& seeds,
                                         const LongRopeSearchOptions& options,
                                         const LongRopeFitness& fitness,
                                         std::ostream* progress = nullptr,
                                         const LongRopeIterationDone& iteration_done = {});

// The two operators, exposed for tests. `history` is every vector met so far; a new vector is
// appended to it. crossover returns false when it finds nothing new.
class LongRopeOperators {
 public:
  LongRopeOperators(const LongRopeSearchOptions& options, Rng& rng);
  std::vector<double> mutate(const std::vector<double>& parent,
                             std::vector<std::vector<double>>& history);
  bool crossover(const std::vector<double>& parent1, const std::vector<double>& parent2,
                 std::vector<std::vector<double>>& history, std::vector<double>& child);

 private:
  const LongRopeSearchOptions& options_;
  Rng& rng_;
  long cap_steps_;  // cap as a number of grid steps above 1
};

// "1, 1.05, 1.2": factors as rope's long_factor option reads them (6 significant digits).
std::string longrope_factor_list(const std::vector<double>& factors);

// The fitness of `poslab longrope-search`: the mean validation loss over `batches` batches of
// `source` (eval/chunked.hpp's evaluate, no memory) of the trained `weights` read with rope's
// long_factor = factors. cfg: the run's config with scaling = longrope for s, original_len L,
// longrope_factors = long (every call uses the long factors, as the released search does).
double longrope_loss(const Config& cfg, const ParameterArena<float>& weights,
                     const std::vector<double>& factors, BatchSource& source, int batches);

}  // namespace poslab
