// `poslab longrope-search`: LongRoPE's evolutionary search (eval/longrope_search.hpp) on a
// finished rope run (longrope_search_run.hpp says why this part is in train/). The fitness of a vector of factors lambda is the model's validation loss
// at the target length L' with rope scaling = longrope, factor s = L' / L, original_len L (the
// run's train.seq_len), long_factor = lambda, used for every call (longrope_factors = long), and
// the default attention factor sqrt(1 + ln s / ln L), as the released search evaluates.
//
// --out is the search's own directory, held for the whole search as `poslab train` holds a run
// directory (an flock and claim.json, train/run_claim.hpp). It is checked before any work: a
// file, a path under a file or a device is refused, naming --out. Into it go
//   search.json            the settings of the search (written first)
//   evaluations.csv        every fitness evaluated: evaluation, loss, factors (a flushed line each)
//   fitness.csv            iteration, evaluations, best_loss, mean_parent_loss, best_factors
//                          (rewritten after every iteration: the curve so far)
//   longrope_factors.toml  the best factors as a config snippet for [encoding] (written last)
//   fitness.png            the curve (notebooks/longrope_fitness.py)
// every file atomically (run_dir.hpp) but evaluations.csv, which is appended to.
//
// Stopping and resuming. SIGINT or SIGTERM (Ctrl-C, Slurm's time limit) stops the search after
// the evaluation in progress, keeping evaluations.csv and fitness.csv. The search is
// deterministic given its settings and the losses (eval/longrope_search.hpp), so the same
// command run again replays it, taking the losses already in evaluations.csv instead of
// evaluating them, and ends with the factors an uninterrupted search finds. An --out holding a
// search of other settings, or files that are not a search's, is refused.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "config/toml_text.hpp"
#include "model/transformer.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "eval/chunked.hpp"
#include "eval/memory_estimate.hpp"
#include "eval/longrope_search.hpp"
#include "train/registered_choices.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"
#include "train/longrope_search_run.hpp"
#include "train/stop_request.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

namespace fs = std::filesystem;

// "1, 1.05, 1.2": the factors as rope's long_factor option reads them (eval/longrope_search.hpp).
std::string factor_list(const std::vector<double>& factors) { return longrope_factor_list(factors); }

// The shortest text that reads back as x (evaluations.csv keeps losses and factors exactly, so
// that a replay takes the same decisions). Not describe.cpp's exact(): the sanitizer build
// compiles the library as one unit, where two file-local functions of one name collide.
std::string round_trip_text(double x) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, x).ptr);
}

// The key of a vector in evaluations.csv: its factors, exactly, separated by spaces.
std::string exact_list(const std::vector<double>& factors) {
  std::string text;
  for (std::size_t i = 0; i < factors.size(); ++i)
    text += (i ? " " : "") + round_trip_text(factors[i]);
  return text;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

// A stop request (SIGINT, SIGTERM) seen between two evaluations.
struct SearchStopped : std::runtime_error {
  explicit SearchStopped(int signal)
      : std::runtime_error(strsignal(signal)), signal(signal) {}
  int signal;
};

// The settings a search is defined by: a rerun with equal ones resumes it.
nlohmann::json search_settings(const LongRopeSearchCommand& c, const fs::path& run_path) {
  const LongRopeSearchOptions& o = c.options;
  std::error_code ec;
  const fs::path run = fs::weakly_canonical(run_path, ec);
  return {{"run", (ec ? run_path : run).string()},
          {"target", c.target_len},
          {"seeds", c.seeds},
          {"cap", o.cap},
          {"step", o.step},
          {"population", o.population},
          {"iterations", o.iterations},
          {"mutations", o.mutations},
          {"crossovers", o.crossovers},
          {"parents", o.parents},
          {"max_crossover_try", o.max_crossover_try},
          {"seed", o.seed},
          {"eval_batches", c.eval_batches},
          {"eval_rows", c.eval_rows},
          {"set", c.overrides}};
}

// Creates --out (or finds it) and takes it for this search; refuses, naming --out, a path that
// is not a directory, a directory another process is writing, and a directory holding anything
// but a search of the same settings. Returns the lock, held until the search ends.
DirectoryLock claim_out_dir(const fs::path& out_dir, const nlohmann::json& settings) {
  const std::string where = "longrope-search --out " + out_dir.string();
  check_path_argument("longrope-search --out", out_dir.string());
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(out_dir, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw std::runtime_error(where + ": " +
                             (fs::is_regular_file(status) ? "is a file"
                              : fs::is_symlink(status)    ? "is a symbolic link"
                                                          : "is a device or special file") +
                             ", not a directory; give a directory for the search's files "
                             "(nothing was searched)");
  if (!fs::exists(status)) {
    fs::create_directories(out_dir, ec);
    if (ec)
      throw std::runtime_error(where + ": cannot create the directory (" + ec.message() +
                               "); give a directory for the search's files (nothing was "
                               "searched)");
  }
  std::optional<DirectoryLock> lock = DirectoryLock::try_lock(out_dir);
  const std::optional<ClaimInfo> claim = read_claim(out_dir);
  if (!lock || (claim && claim_is_live(*claim) && claim->pid != ::getpid()))
    throw std::runtime_error(where + ": another search is writing into it (" +
                             (claim ? claim->describe() : std::string("a process holds its lock")) +
                             "); choose another --out, or wait for it to end");
  const fs::path settings_file = out_dir / "search.json";
  if (fs::exists(settings_file)) {
    nlohmann::json earlier;
    try {
      earlier = nlohmann::json::parse(std::ifstream(settings_file));
    } catch (const std::exception& e) {
      throw std::runtime_error(settings_file.string() + ": not the settings of a search (" +
                               e.what() + "); choose another --out");
    }
    for (const auto& [key, value] : settings.items())
      if (!earlier.contains(key) || earlier[key] != value)
        throw std::runtime_error(
            where + " holds a search of other settings (" + key + ": " +
            (earlier.contains(key) ? earlier[key].dump() : std::string("absent")) +
            " there, " + value.dump() + " here); rerun that search's command to resume it, or "
            "choose another --out (nothing was searched)");
    return std::move(*lock);
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(out_dir))
    if (entry.path().filename() != "claim.json")  // a stale claim: its search was killed
      throw std::runtime_error(where + " already holds files that are not a search's (" +
                               entry.path().filename().string() +
                               "); choose another directory (nothing was searched)");
  write_file_atomically(settings_file, settings.dump(2) + "\n");
  return std::move(*lock);
}

// The losses evaluations.csv holds, by exact_list of their factors.
std::map<std::string, double> read_evaluations(const fs::path& file) {
  std::map<std::string, double> losses;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const std::size_t a = line.find(','), b = line.find(',', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;  // not a whole line
    const std::string loss_text = line.substr(a + 1, b - a - 1);
    double loss = 0;
    const auto [end, error] =
        std::from_chars(loss_text.data(), loss_text.data() + loss_text.size(), loss);
    if (error != std::errc() || end != loss_text.data() + loss_text.size()) continue;
    losses[line.substr(b + 1)] = loss;
  }
  return losses;
}

void write_curve(const fs::path& file, const std::vector<LongRopeProgress>& curve) {
  std::ostringstream csv;
  csv << "iteration,evaluations,best_loss,mean_parent_loss,best_factors\n";
  for (const LongRopeProgress& p : curve)
    csv << p.iteration << "," << p.evaluations << "," << std::setprecision(8) << p.best_loss
        << "," << p.mean_parent_loss << ",\"" << factor_list(p.best_factors) << "\"\n";
  write_file_atomically(file, csv.str());
}

}  // namespace

int run_longrope_search_command(const LongRopeSearchCommand& c, std::ostream& out) {
  // The options that need no run, first.
  if (c.options.parents > c.options.population)
    throw std::invalid_argument("longrope-search --parents " + std::to_string(c.options.parents) +
                                ": more than --population (" +
                                std::to_string(c.options.population) +
                                "); the parents are the best of the population");
  check_path_argument("longrope-search --out", c.out_dir);
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
  check_longrope_options(o);
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
  check_memory(cfg, c.eval_rows, c.target_len, 0, /*training=*/false,
               "longrope-search (segment " + std::to_string(c.target_len) + ")");

  // --out, taken for the whole search (before any work).
  const fs::path out_dir(c.out_dir);
  const DirectoryLock lock = claim_out_dir(out_dir, search_settings(c, run.path()));
  const RunClaim claim(out_dir);
  const fs::path evaluations_file = out_dir / "evaluations.csv";
  const std::map<std::string, double> earlier = read_evaluations(evaluations_file);
  MetricsLog evaluations_log(evaluations_file, {"evaluation", "loss", "factors"});
  install_stop_handler();

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
  if (earlier.empty())
    out << "a new search into " << out_dir.string() << "\n";
  else
    out << "resuming the search in " << out_dir.string() << ": " << earlier.size()
        << " evaluations kept in " << evaluations_file.string()
        << " are replayed, not recomputed\n";
  out << std::flush;  // seen at once even when the output goes to a file

  const auto start = std::chrono::steady_clock::now();
  auto last_line = start;
  int evaluated = 0, replayed = 0, iterations_done = 0;
  double best_loss = std::numeric_limits<double>::infinity();
  std::vector<double> best_factors;
  auto fitness = [&](const std::vector<double>& factors) {
    const std::string key = exact_list(factors);
    double loss;
    if (const auto found = earlier.find(key); found != earlier.end()) {
      loss = found->second;
      ++replayed;
    } else {
      if (const int signal = stop_requested()) throw SearchStopped(signal);
      loss = longrope_loss(cfg, weights, factors, *source, c.eval_batches);
      ++evaluated;
      evaluations_log.append({int(earlier.size()) + evaluated, round_trip_text(loss), key});
    }
    if (loss < best_loss) best_loss = loss, best_factors = factors;
    // Between the iteration lines (an iteration is `mutations + crossovers` evaluations, the
    // start `population`), a line every 10 s.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_line > std::chrono::seconds(10)) {
      out << "  iteration " << iterations_done << ": " << replayed + evaluated
          << " evaluations, best loss so far " << std::fixed << std::setprecision(4) << best_loss
          << std::endl;
      last_line = now;
    }
    return loss;
  };
  auto iteration_done = [&](const std::vector<LongRopeProgress>& curve) {
    write_curve(out_dir / "fitness.csv", curve);
    iterations_done = int(curve.size());
    last_line = std::chrono::steady_clock::now();
  };
  LongRopeSearchResult result;
  try {
    result = run_longrope_search(seeds, o, fitness, &out, iteration_done);
  } catch (const SearchStopped& stopped) {
    out << "longrope-search: stopped by " << stopped.what() << " after "
        << replayed + evaluated << " evaluations ("
        << (iterations_done == 0 ? std::string("the starting population unfinished")
                                 : "the curve to iteration " + std::to_string(iterations_done - 1) +
                                       " in " + (out_dir / "fitness.csv").string())
        << ")";
    if (!best_factors.empty())
      out << "; best so far: loss " << std::fixed << std::setprecision(4) << best_loss << " at "
          << factor_list(best_factors);
    out << "\nevery evaluation is kept in " << evaluations_file.string()
        << "; the same command resumes the search" << std::endl;
    return 128 + stopped.signal;  // the shell's code for "ended by this signal"
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ostringstream snippet;  // a comment line: --run and --seeds as TOML strings (one line)
  snippet << "# poslab longrope-search --run " << toml_string(c.run_dir) << " --target "
          << c.target_len << ": validation loss " << std::setprecision(6) << result.best.loss
          << " at " << c.target_len << " (seeds " << toml_string(c.seeds) << ", cap " << o.cap
          << ", seed " << o.seed << ")\n[encoding]\ntype = \"rope\"\nscaling = \"longrope\"\n"
          << "factor = " << o.factor << "\noriginal_len = " << L << "\nshort_factor = \""
          << factor_list(std::vector<double>(std::size_t(pairs), 1.0)) << "\"\nlong_factor = \""
          << factor_list(result.best.factors) << "\"\n";
  write_file_atomically(out_dir / "longrope_factors.toml", snippet.str());
  out << "best: " << factor_list(result.best.factors) << " | loss " << std::fixed
      << std::setprecision(4) << result.best.loss << " (start " << result.curve.front().best_loss
      << ") | " << result.curve.back().evaluations << " evaluations (" << evaluated
      << " computed now) in " << std::setprecision(0) << seconds << " s\nwrote "
      << (out_dir / "longrope_factors.toml").string() << ", "
      << (out_dir / "fitness.csv").string() << std::endl;
  return 0;
}

}  // namespace poslab
