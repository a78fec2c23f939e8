// `poslab longrope-search`: LongRoPE's evolutionary search (train/longrope_search.hpp) on a
// finished rope run. The fitness of a vector of factors lambda is the model's validation loss
// at the target length L' with rope scaling = longrope, factor s = L' / L, original_len L (the
// run's train.seq_len), long_factor = lambda, used for every call (longrope_factors = long), and
// the default attention factor sqrt(1 + ln s / ln L), as the released search evaluates.
//
// Writes into --out (created; refused if it already holds files):
//   longrope_factors.toml  the best factors as a config snippet for [encoding]
//   fitness.csv            iteration, evaluations, best_loss, mean_parent_loss, best_factors
//   fitness.png            the curve (notebooks/longrope_fitness.py)
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli/commands.hpp"
#include "config/load.hpp"
#include "model/transformer.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/memory_estimate.hpp"
#include "train/longrope_search.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

std::string factor_list(const std::vector<double>& factors) {
  std::ostringstream out;
  for (std::size_t i = 0; i < factors.size(); ++i)
    out << (i ? ", " : "") << std::setprecision(6) << factors[i];
  return out.str();
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

}  // namespace

int run_longrope_search_command(const LongRopeSearchCommand& c, std::ostream& out) {
  namespace fs = std::filesystem;
  RunDirectory run = RunDirectory::open(c.run_dir);
  const std::string config_path = run.file("config.toml").string();
  const Config trained = load_config(config_path, registered_choices(), c.overrides);
  // Everything is checked before anything is written.
  if (trained.encoding.type != "rope")
    throw std::invalid_argument("longrope-search --run " + c.run_dir + ": its encoding is '" +
                                trained.encoding.type + "'; the search rescales rope's pairs");
  const int L = trained.train.seq_len;
  if (c.target_len <= L)
    throw std::invalid_argument("longrope-search --target " + std::to_string(c.target_len) +
                                ": must be above the run's train.seq_len (" + std::to_string(L) +
                                ")");
  if (trained.memory.mem_len > 0)
    throw std::invalid_argument("longrope-search --run " + c.run_dir +
                                ": a run with memory (memory.mem_len = " +
                                std::to_string(trained.memory.mem_len) +
                                "); the search reads segments of --target without memory");
  LongRopeSearchOptions o = c.options;
  o.factor = double(c.target_len) / L;  // s
  longrope_cap(o);                      // a valid cap name
  const int d_head = trained.model.d_model / trained.model.n_heads;
  const int pairs = int(d_head * trained.encoding.options.get_double("fraction")) / 2;
  const double base = trained.encoding.options.get_double("base");
  std::vector<std::vector<double>> seeds;
  for (const std::string& name : split_names(c.seeds))
    seeds.push_back(longrope_seed(name, o, pairs, base, L));
  if (seeds.empty()) throw std::invalid_argument("longrope-search --seeds: name at least one");
  // The config of every candidate: the run's, with longrope scaling for s (checked once here).
  std::vector<std::string> overrides = c.overrides;
  const std::string ones = "\"" + factor_list(std::vector<double>(std::size_t(pairs), 1.0)) + "\"";
  for (const std::string& o_set :
       {std::string("encoding.scaling=longrope"), "encoding.factor=" + std::to_string(o.factor),
        "encoding.original_len=" + std::to_string(L), std::string("encoding.longrope_factors=long"),
        "encoding.short_factor=" + ones, "encoding.long_factor=" + ones})
    overrides.push_back(o_set);
  Config cfg = load_config(config_path, registered_choices(), overrides);
  cfg.train.batch_size = c.eval_rows;
  const fs::path out_dir = c.out_dir.empty()
                               ? run.path() / ("longrope_search_L" + std::to_string(c.target_len))
                               : fs::path(c.out_dir);
  if (fs::exists(out_dir) && !fs::is_empty(out_dir))
    throw std::runtime_error("longrope-search --out " + out_dir.string() +
                             " already holds files; choose another directory");
  check_memory(cfg, c.eval_rows, c.target_len, 0, /*training=*/false,
               "longrope-search (segment " + std::to_string(c.target_len) + ")");
  set_threads(cfg.train.threads);
  auto source = make_batch_source(cfg, SourceSpec{.split = Split::valid, .len = c.target_len});
  TransformerLM<float> trained_model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), trained_model.arena());
  const ParameterArena<float>& weights = trained_model.arena();

  out << "longrope-search: " << c.run_dir << " (rope, L = " << L << ", " << pairs
      << " pairs), target L' = " << c.target_len << ", s = " << o.factor << ", cap "
      << longrope_cap(o) << " (" << o.cap << "), population " << o.population << ", "
      << o.iterations << " iterations of " << o.mutations << " mutations + " << o.crossovers
      << " crossovers, " << o.parents << " parents; fitness: validation loss at " << c.target_len
      << " over " << c.eval_batches << " batches of " << c.eval_rows << " rows\n";
  for (std::size_t i = 0; i < seeds.size(); ++i)
    out << "seed " << split_names(c.seeds)[i] << ": " << factor_list(seeds[i]) << "\n";
  const auto start = std::chrono::steady_clock::now();
  auto fitness = [&](const std::vector<double>& factors) {
    Config candidate = cfg;
    candidate.encoding.options.set("long_factor", factor_list(factors));
    TransformerLM<float> model(candidate.model, candidate.encoding, candidate.memory);
    std::copy(weights.values(), weights.values() + weights.count(), model.arena().values());
    return evaluate(model, *source, c.eval_batches, 0).loss;
  };
  const LongRopeSearchResult result = run_longrope_search(seeds, o, fitness, &out);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fs::create_directories(out_dir);
  std::ostringstream csv;
  csv << "iteration,evaluations,best_loss,mean_parent_loss,best_factors\n";
  for (const LongRopeProgress& p : result.curve)
    csv << p.iteration << "," << p.evaluations << "," << std::setprecision(8) << p.best_loss
        << "," << p.mean_parent_loss << ",\"" << factor_list(p.best_factors) << "\"\n";
  write_file_atomically(out_dir / "fitness.csv", csv.str());
  std::ostringstream snippet;
  snippet << "# poslab longrope-search --run " << c.run_dir << " --target " << c.target_len
          << ": validation loss " << std::setprecision(6) << result.best.loss << " at "
          << c.target_len << " (seeds " << c.seeds << ", cap " << o.cap << ", seed " << o.seed
          << ")\n[encoding]\ntype = \"rope\"\nscaling = \"longrope\"\nfactor = " << o.factor
          << "\noriginal_len = " << L << "\nshort_factor = \""
          << factor_list(std::vector<double>(std::size_t(pairs), 1.0)) << "\"\nlong_factor = \""
          << factor_list(result.best.factors) << "\"\n";
  write_file_atomically(out_dir / "longrope_factors.toml", snippet.str());
  out << "best: " << factor_list(result.best.factors) << " | loss " << std::fixed
      << std::setprecision(4) << result.best.loss << " (start " << result.curve.front().best_loss
      << ") | " << result.curve.back().evaluations << " evaluations in " << std::setprecision(0)
      << seconds << " s\nwrote " << (out_dir / "longrope_factors.toml").string() << ", "
      << (out_dir / "fitness.csv").string() << std::endl;
  return run_python_script("longrope_fitness.py", {(out_dir / "fitness.csv").string(),
                                                   (out_dir / "fitness.png").string()});
}

}  // namespace poslab
