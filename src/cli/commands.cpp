// What `poslab train`, `poslab eval` and `poslab bench` do. main.cpp parses the command line;
// the work is here.
#include "cli/commands.hpp"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "config/load.hpp"
#include "core/blas.hpp"
#include "data/corpus.hpp"
#include "model/transformer.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

CorpusSplit load_data(const Config& cfg) {
  return split_corpus(read_corpus(cfg.data.path), cfg.data.valid_fraction);
}



// One evaluation setting of a run's plan: "main" (as configured), "length" (segment
// train.seq_len * factor) or "memory" (memory train.seq_len * factor). A setting the model cannot
// run (a learned table too short for the length) is recorded with its error, not dropped.
nlohmann::json evaluate_setting(TransformerLM<float>& model, const Config& cfg,
                                const std::string& kind, double factor, int seq_len,
                                int mem_len) {
  nlohmann::json row = {{"kind", kind}, {"factor", factor}, {"seq_len", seq_len},
                        {"mem_len", mem_len}};
  try {
    auto source = make_batch_source(cfg, {Split::valid, seq_len});
    const EvalResult r =
        evaluate(model, *source, cfg.eval.batches, mem_len, cfg.memory.continue_positions);
    row.update({{"loss", r.loss},
                {"accuracy", r.accuracy},
                {"exact_match", r.exact_match},
                {"tokens", r.tokens},
                {"loss_by_position", r.loss_by_position}});
    std::cout << std::fixed << std::setprecision(4) << "eval " << std::setw(6) << kind
              << " x" << std::setprecision(2) << factor << std::setprecision(4) << ": segment "
              << seq_len << ", memory " << mem_len << " | loss " << r.loss << " | accuracy "
              << std::setprecision(3) << r.accuracy << " | exact match " << r.exact_match
              << " | " << r.tokens << " scored tokens\n";
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["loss"] = nullptr;
    std::cout << "eval " << kind << " x" << factor << ": segment " << seq_len << ", memory "
              << mem_len << " | not possible: " << e.what() << "\n";
  }
  return row;
}

}  // namespace

int run_train(const Config& cfg) {
  set_threads(cfg.train.threads);
  const int L = cfg.train.seq_len;
  // Everything that can fail on bad input happens before the run directory is created.
  auto train_source = make_batch_source(cfg, {Split::train, L});
  auto valid_source = make_batch_source(cfg, {Split::valid, L});
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  double unigram = std::nan("");
  if (cfg.task.name == "lm") {
    const CorpusSplit data = load_data(cfg);
    unigram = unigram_cross_entropy(data.train, data.valid, cfg.model.vocab_size);
  }

  RunDirectory run = RunDirectory::create(cfg.out_dir);
  run.write_text("config.toml", config_to_toml(cfg));
  std::cout << "poslab train: " << model.arena().count() << " parameters, task '"
            << cfg.task.name << "', encoding '" << cfg.encoding.type << "', memory "
            << cfg.memory.mem_len << "\n  writing to " << run.path().string() << "\n";

  MetricsLog metrics = run.metrics(training_metrics_columns());
  const TrainReport report =
      train_model(model, cfg, *train_source, valid_source.get(), &metrics, std::cout);

  // The evaluation plan: the main setting, then every length and memory factor.
  const int main_len = cfg.eval.seq_len > 0 ? cfg.eval.seq_len : L;
  const int main_mem = cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len;
  nlohmann::json evaluations = nlohmann::json::array();
  evaluations.push_back(evaluate_setting(model, cfg, "main", 1.0, main_len, main_mem));
  for (double f : cfg.eval.length_factors)
    evaluations.push_back(
        evaluate_setting(model, cfg, "length", f, int(std::lround(L * f)), cfg.memory.mem_len));
  for (double f : cfg.eval.memory_factors)
    evaluations.push_back(
        evaluate_setting(model, cfg, "memory", f, L, int(std::lround(L * f))));

  save_checkpoint(run.path(), model.arena());
  const nlohmann::json& main_eval = evaluations[0];
  nlohmann::json result = {{"loss", main_eval["loss"]},
                           {"accuracy", main_eval.value("accuracy", 0.0)},
                           {"exact_match", main_eval.value("exact_match", 0.0)},
                           {"train_loss", report.final_train_loss},
                           {"train_tokens_per_second", report.tokens_per_second},
                           {"train_seconds", report.seconds},
                           {"steps", report.steps},
                           {"parameters", model.arena().count()},
                           {"encoding", cfg.encoding.type},
                           {"task", cfg.task.name},
                           {"evaluations", evaluations}};
  if (!std::isnan(unigram)) result["unigram_loss"] = unigram;
  run.write_json("eval.json", result);  // written last: marks the run as finished
  if (!std::isnan(unigram) && main_eval["loss"].is_number())
    std::cout << std::fixed << std::setprecision(4) << "validation loss "
              << main_eval["loss"].get<double>() << " nats/byte = "
              << main_eval["loss"].get<double>() / std::log(2.0)
              << " bits/byte; unigram baseline " << unigram << " nats/byte = "
              << unigram / std::log(2.0) << " bits/byte (a model that ignores context)\n";
  std::cout << "trained " << report.steps << " steps in " << std::setprecision(1)
            << report.seconds << " s (" << std::setprecision(0) << report.tokens_per_second
            << " tokens/s)\n";
  return 0;
}

int run_eval(const std::string& run_dir, const std::vector<std::string>& overrides, int seq_len,
             int mem_len) {
  RunDirectory run = RunDirectory::open(run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), overrides);
  set_threads(cfg.train.threads);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  // Defaults: the run's own main evaluation setting.
  const int L = seq_len > 0 ? seq_len : (cfg.eval.seq_len > 0 ? cfg.eval.seq_len : cfg.train.seq_len);
  const int M = mem_len >= 0 ? mem_len : (cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len);
  const nlohmann::json result = evaluate_setting(model, cfg, "main", 1.0, L, M);
  const std::string name = "eval_L" + std::to_string(L) + "_M" + std::to_string(M) + ".json";
  run.write_json(name, result);
  std::cout << "wrote " << run.file(name).string() << "\n";
  return result.contains("error") ? 1 : 0;
}

}  // namespace poslab
