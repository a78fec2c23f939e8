// LongRoPE's evolutionary search: the algorithm in longrope_search.hpp, computed below.
#include "eval/longrope_search.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "encodings/rope_scaling.hpp"
#include "eval/chunked.hpp"

namespace poslab {

namespace {

// The released code's Individual.__eq__: np.allclose (the grid makes equal vectors equal).
bool same_factors(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-8 + 1e-5 * std::abs(b[i])) return false;
  return true;
}

bool met_before(const std::vector<double>& v, const std::vector<std::vector<double>>& history) {
  return std::any_of(history.begin(), history.end(),
                     [&](const std::vector<double>& h) { return same_factors(v, h); });
}

bool non_decreasing(const std::vector<double>& v) {
  return std::is_sorted(v.begin(), v.end());
}

}  // namespace

double longrope_cap(const LongRopeSearchOptions& o) {
  if (o.cap == "code") return 1.0 + o.factor;     // evo_list = arange(1, 1 + s + step, step)
  if (o.cap == "paper") return 1.25 * o.factor;   // lambda_i in [1.0, 1.25 s] (§4.1)
  throw std::invalid_argument("longrope search: cap must be \"code\" or \"paper\", got \"" +
                              o.cap + "\"");
}

std::vector<double> longrope_seed(const std::string& method, const LongRopeSearchOptions& o,
                                  int pairs, double base, std::int64_t original_len) {
  RopeScaling s;
  if (method == "pi") s.method = RopeScalingMethod::linear;
  else if (method == "ntk") s.method = RopeScalingMethod::ntk;
  else if (method == "yarn") s.method = RopeScalingMethod::yarn;
  else throw std::invalid_argument("longrope search: unknown seed '" + method +
                                   "' (pi, ntk or yarn)");
  s.factor = o.factor;
  s.original_len = original_len;
  std::vector<RotaryPair> table(static_cast<std::size_t>(pairs));
  scaled_frequencies(s, base, pairs, original_len, table.data());
  const long cap_steps = std::lround((longrope_cap(o) - 1.0) / o.step);
  std::vector<double> factors(static_cast<std::size_t>(pairs));
  long previous = 0;
  for (int i = 0; i < pairs; ++i) {
    const double lambda = table[i].theta / table[i].theta_scaled;  // theta'_i = theta_i / lambda_i
    long k = std::clamp(std::lround((lambda - 1.0) / o.step), 0L, cap_steps);  // on the grid
    k = std::max(k, previous);  // non-decreasing (rounding can break a tie the wrong way)
    previous = k;
    factors[i] = 1.0 + double(k) * o.step;
  }
  return factors;
}

LongRopeOperators::LongRopeOperators(const LongRopeSearchOptions& options, Rng& rng)
    : options_(options),
      rng_(rng),
      cap_steps_(std::lround((longrope_cap(options) - 1.0) / options.step)) {}

std::vector<double> LongRopeOperators::mutate(const std::vector<double>& parent,
                                              std::vector<std::vector<double>>& history) {
  const int n = int(parent.size());
  const double step = options_.step;
  std::vector<long> k(n);  // genes as grid steps above 1
  for (int i = 0; i < n; ++i) k[i] = std::lround((parent[i] - 1.0) / step);
  auto draw = [&](long lo, long hi) {  // uniform on {lo, ..., hi}
    return lo + long(rng_.below(std::uint64_t(hi - lo + 1)));
  };
  std::vector<double> child = parent;
  for (long attempt = 0; met_before(child, history) || !non_decreasing(child); ++attempt) {
    if (attempt > 1000000)
      throw std::runtime_error("longrope search: no new non-decreasing factors near a parent "
                               "after a million tries (the grid is exhausted: a finer step or "
                               "a larger cap)");
    if (!(rng_.uniform() < 0.3)) continue;  // the released code's gate, around the whole sweep
    for (int i = 0; i < n; ++i) {
      long lo, hi;
      if (n == 1) lo = 0, hi = cap_steps_;
      else if (i == 0) lo = 0, hi = k[1] - 1;            // arange(1.0, lambda_1): below lambda_1
      else if (i == n - 1) lo = k[n - 2], hi = cap_steps_;  // up to the cap, included
      else lo = k[i - 1], hi = k[i + 1];                 // between the neighbours, included
      if (hi >= lo) k[i] = draw(lo, hi);
    }
    for (int i = 0; i < n; ++i) child[i] = 1.0 + double(k[i]) * step;
  }
  history.push_back(child);
  return child;
}

bool LongRopeOperators::crossover(const std::vector<double>& parent1,
                                  const std::vector<double>& parent2,
                                  std::vector<std::vector<double>>& history,
                                  std::vector<double>& child) {
  if (same_factors(parent1, parent2)) return false;
  std::vector<double> mixed = parent1;
  for (int attempt = 0; attempt < options_.max_crossover_try; ++attempt)
    for (std::size_t i = 0; i < mixed.size(); ++i) {
      if (!(rng_.uniform() < 0.3)) continue;
      if (rng_.uniform() < 0.5) mixed[i] = parent2[i];
      if (met_before(mixed, history) || !non_decreasing(mixed)) continue;
      history.push_back(mixed);
      child = mixed;
      return true;
    }
  return false;
}

void check_longrope_options(const LongRopeSearchOptions& o) {
  if (o.population < 2 || o.parents < 2 || o.parents > o.population || o.iterations < 0 ||
      o.mutations < 0 || o.crossovers < 0 || !(o.step > 0) || !(o.factor > 1))
    throw std::invalid_argument(
        "longrope search: needs population >= parents >= 2, iterations, mutations and "
        "crossovers >= 0, step > 0 and factor > 1");
}

LongRopeSearchResult run_longrope_search(const std::vector<std::vector<double>>& seeds,
                                         const LongRopeSearchOptions& o,
                                         const LongRopeFitness& fitness, std::ostream* progress,
                                         const LongRopeIterationDone& iteration_done) {
  if (seeds.empty()) throw std::invalid_argument("longrope search: no seed");
  check_longrope_options(o);
  Rng rng(o.seed);
  LongRopeOperators operators(o, rng);
  std::vector<std::vector<double>> history;
  std::vector<LongRopeCandidate> population;
  int evaluations = 0;
  auto evaluate = [&](const std::vector<double>& factors) {
    ++evaluations;
    return LongRopeCandidate{factors, fitness(factors)};
  };

  // The starting population: the seeds (each once), then mutants of them in turn.
  std::vector<std::vector<double>> distinct;
  for (const auto& s : seeds)
    if (!met_before(s, distinct)) distinct.push_back(s);
  for (const auto& s : distinct) {
    history.push_back(s);
    population.push_back(evaluate(s));
  }
  for (std::size_t i = 0; int(population.size()) < o.population; ++i)
    population.push_back(evaluate(operators.mutate(distinct[i % distinct.size()], history)));

  LongRopeSearchResult result;
  auto by_loss = [](const LongRopeCandidate& a, const LongRopeCandidate& b) {
    return a.loss < b.loss;
  };
  auto record = [&](int iteration) {
    std::stable_sort(population.begin(), population.end(), by_loss);
    const int P = std::min<int>(o.parents, int(population.size()));
    double sum = 0;
    for (int i = 0; i < P; ++i) sum += population[i].loss;
    result.curve.push_back({iteration, evaluations, population[0].loss, sum / P,
                            population[0].factors});
    if (progress) {
      *progress << "iteration " << std::setw(3) << iteration << "/" << o.iterations
                << " | evaluations " << std::setw(5) << evaluations << " | best loss "
                << std::fixed << std::setprecision(4) << population[0].loss
                << " | parents' mean " << sum / P << " | best factors";
      for (double f : population[0].factors) *progress << " " << std::setprecision(2) << f;
      *progress << std::endl;
    }
    if (iteration_done) iteration_done(result.curve);
  };
  record(0);
  for (int iteration = 1; iteration <= o.iterations; ++iteration) {
    // The parents: the best `parents` so far (population is sorted by record).
    std::vector<LongRopeCandidate> parents(population.begin(),
                                           population.begin() + std::min<std::size_t>(
                                                                    o.parents, population.size()));
    const std::uint64_t P = parents.size();
    population = parents;
    for (int j = 0; j < o.mutations; ++j) {
      const auto& parent = parents[rng.below(P)];
      population.push_back(evaluate(operators.mutate(parent.factors, history)));
    }
    for (int j = 0; j < o.crossovers; ++j) {
      std::uint64_t a = rng.below(P), b = rng.below(P - 1);  // two distinct parents
      if (b >= a) ++b;
      if (b < a) std::swap(a, b);  // the better one first
      std::vector<double> child;
      if (!operators.crossover(parents[a].factors, parents[b].factors, history, child))
        child = operators.mutate(parents[a].factors, history);  // the released code's fallback
      population.push_back(evaluate(child));
    }
    record(iteration);
  }
  result.best = population.front();
  return result;
}

std::string longrope_factor_list(const std::vector<double>& factors) {
  std::ostringstream out;
  for (std::size_t i = 0; i < factors.size(); ++i)
    out << (i ? ", " : "") << std::setprecision(6) << factors[i];
  return out.str();
}

double longrope_loss(const Config& cfg, const ParameterArena<float>& weights,
                     const std::vector<double>& factors, BatchSource& source, int batches) {
  Config candidate = cfg;
  candidate.encoding.options.set("long_factor", longrope_factor_list(factors));
  TransformerLM<float> model(candidate.model, candidate.encoding, candidate.memory);
  std::copy(weights.values(), weights.values() + weights.count(), model.arena().values());
  return evaluate(model, source, batches, 0).loss;
}

}  // namespace poslab
