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
#include "train/checkpoint.hpp"
#include "train/evaluate.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

CorpusSplit load_data(const Config& cfg) {
  return split_corpus(read_corpus(cfg.data.path), cfg.data.valid_fraction);
}

nlohmann::json eval_to_json(const EvalResult& r, int seq_len, int mem_len) {
  return {{"seq_len", seq_len},
          {"mem_len", mem_len},
          {"loss", r.loss},
          {"bits_per_byte", r.loss / std::log(2.0)},
          {"accuracy", r.accuracy},
          {"tokens", r.tokens},
          {"loss_by_position", r.loss_by_position}};
}

void print_eval(const EvalResult& r, int seq_len, int mem_len, double unigram) {
  std::cout << std::fixed << std::setprecision(4) << "validation (segment " << seq_len
            << ", memory " << mem_len << ", " << r.tokens << " tokens): loss " << r.loss
            << " nats/byte = " << r.loss / std::log(2.0) << " bits/byte, accuracy "
            << std::setprecision(3) << r.accuracy << std::setprecision(4)
            << "\nunigram baseline: " << unigram << " nats/byte = " << unigram / std::log(2.0)
            << " bits/byte (the loss of a model that ignores context)\n";
}

}  // namespace

int run_train(const Config& cfg) {
  set_threads(cfg.train.threads);
  // Everything that can fail on bad input happens before the run directory is created.
  const CorpusSplit data = load_data(cfg);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  model.init(cfg.train.seed);
  const StreamBatcher check_train(data.train, cfg.train.batch_size, cfg.train.seq_len);
  const StreamBatcher check_valid(data.valid, cfg.train.batch_size, cfg.train.seq_len);
  const double unigram = unigram_cross_entropy(data.train, data.valid, cfg.model.vocab_size);

  RunDirectory run = RunDirectory::create(cfg.out_dir);
  run.write_text("config.toml", config_to_toml(cfg));
  std::cout << "poslab train: " << model.arena().count() << " parameters, encoding '"
            << cfg.encoding.type << "', memory " << cfg.memory.mem_len << ", "
            << data.train.size() << " train / " << data.valid.size() << " validation bytes from "
            << cfg.data.path << "\n  writing to " << run.path().string() << "\n";

  MetricsLog metrics = run.metrics(training_metrics_columns());
  const TrainReport report =
      train_model(model, cfg, data.train, data.valid, &metrics, std::cout);

  const int eval_len = cfg.eval.seq_len > 0 ? cfg.eval.seq_len : cfg.train.seq_len;
  const int eval_mem = cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len;
  const EvalResult r = evaluate_stream(model, data.valid, cfg.train.batch_size, eval_len,
                                       eval_mem, 0, cfg.memory.continue_positions);
  save_checkpoint(run.path(), model.arena());
  nlohmann::json result = eval_to_json(r, eval_len, eval_mem);
  result["unigram_loss"] = unigram;
  result["train_loss"] = report.final_train_loss;
  result["train_tokens_per_second"] = report.tokens_per_second;
  result["train_seconds"] = report.seconds;
  result["steps"] = report.steps;
  result["parameters"] = model.arena().count();
  result["encoding"] = cfg.encoding.type;
  run.write_json("eval.json", result);  // written last: marks the run as finished
  print_eval(r, eval_len, eval_mem, unigram);
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
  const CorpusSplit data = load_data(cfg);
  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  const int L = seq_len > 0 ? seq_len : cfg.train.seq_len;
  const int M = mem_len >= 0 ? mem_len : cfg.memory.mem_len;
  const EvalResult r = evaluate_stream(model, data.valid, cfg.train.batch_size, L, M, 0,
                                       cfg.memory.continue_positions);
  const double unigram = unigram_cross_entropy(data.train, data.valid, cfg.model.vocab_size);
  print_eval(r, L, M, unigram);
  nlohmann::json result = eval_to_json(r, L, M);
  result["unigram_loss"] = unigram;
  const std::string name = "eval_L" + std::to_string(L) + "_M" + std::to_string(M) + ".json";
  run.write_json(name, result);
  std::cout << "wrote " << run.file(name).string() << "\n";
  return 0;
}

}  // namespace poslab
