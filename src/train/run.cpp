// A whole run: checks -> train -> evaluate the plan -> write (run.hpp says what each step does).
#include "train/run.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "config/load.hpp"
#include "core/blas.hpp"
#include "core/provenance.hpp"
#include "data/corpus.hpp"
#include "data/ngram_baseline.hpp"
#include "eval/memory_estimate.hpp"
#include "eval/plan.hpp"
#include "eval/rows.hpp"
#include "model/transformer.hpp"
#include "tasks/instance_batcher.hpp"
#include "tasks/make_source.hpp"
#include "train/checkpoint.hpp"
#include "train/init_from.hpp"
#include "train/passkey_curve.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"
#include "train/stop_request.hpp"
#include "train/train.hpp"
#include "train/training_state.hpp"

namespace poslab {
namespace {

// The unigram and bigram losses of the held-out split (language models), the yardsticks a
// run's loss is read against, and the corpus in one line.
struct Baselines {
  double unigram = std::nan(""), bigram = std::nan("");
  std::string corpus_description;
};

Baselines corpus_baselines(const Config& cfg) {
  Baselines b;
  if (cfg.task.name != "lm") return b;
  const std::shared_ptr<const CorpusSplit> corpus = cached_split(cfg.data);  // read once per process
  const CorpusSplit& data = *corpus;
  const std::vector<std::int32_t>& held_out = cfg.eval.split == "test" ? data.test : data.valid;
  if (held_out.empty())
    throw std::runtime_error("eval.split = \"" + cfg.eval.split + "\" but the corpus " +
                             cfg.data.path + " has no such split (set data.test_fraction)");
  b.unigram = unigram_cross_entropy(data.train, held_out, cfg.model.vocab_size);
  b.bigram = bigram_cross_entropy(data.train, held_out, cfg.model.vocab_size);
  b.corpus_description = describe_corpus(data);
  return b;
}

// Everything a run needs, made and checked before anything is written (step 1).
struct PreparedRun {
  std::string started, threads_from;
  std::unique_ptr<BatchSource> train_source, valid_source;
  EvalPlan plan;
  // The passkey curve read during training (train.eval_passkey_instances) reads the eval
  // grid on the validation split, whatever eval.split says.
  std::optional<PasskeyGenerator> curve_generator;
  std::unique_ptr<TransformerLM<float>> model;
  std::optional<ParentRun> parent;
  bool parent_recorded = false;  // --resume of a fine-tuned run: its own record, not the parent
  Baselines baselines;
};

PreparedRun prepare_run(const Config& cfg, ExistingRun existing) {
  PreparedRun p;
  p.started = utc_now();
  p.threads_from = set_threads(cfg.train.threads);
  const int L = cfg.train.seq_len;
  // Sizes the machine cannot hold, data too short for the lengths, then the model itself.
  check_memory(cfg, cfg.train.batch_size, L, cfg.memory.mem_len, /*training=*/true,
               "training (train.batch_size = " + std::to_string(cfg.train.batch_size) +
                   ", train.seq_len = " + std::to_string(L) +
                   ", memory.mem_len = " + std::to_string(cfg.memory.mem_len) + ")");
  p.train_source = make_batch_source(cfg, SourceSpec{.split = Split::train, .len = L});
  p.valid_source = make_batch_source(cfg, SourceSpec{.split = Split::valid, .len = L});
  const RunFacts facts{
      .independent_rows = dynamic_cast<const InstanceBatcher*>(p.train_source.get()) != nullptr};
  p.plan = prepare_plan(cfg, facts);  // every mode checked: memory, data, generators
  if (cfg.train.eval_passkey_instances > 0) {
    p.curve_generator = make_passkey_generator(cfg, Split::valid);
    for (const PasskeyCell& cell : passkey_cells(cfg)) p.curve_generator->check_length(cell.seq_len);
  }
  p.model = std::make_unique<TransformerLM<float>>(cfg.model, cfg.encoding, cfg.memory);
  p.model->init(cfg.train.seed);
  // Fine-tuning (train/init_from.hpp): the parent is checked and loaded here. A child that
  // continues from its own saved state (--resume) takes the record it wrote when it started and
  // does not read the parent again: the saved state holds its parameters and moments.
  if (!cfg.train.init_from.empty()) {
    const std::filesystem::path dir(cfg.out_dir);
    p.parent_recorded = existing == ExistingRun::resume && has_training_state(dir) &&
                        std::filesystem::exists(dir / kParentRecordFile);
    p.parent = p.parent_recorded ? read_parent_record(dir) : initialize_from_parent(cfg, *p.model);
  }
  p.baselines = corpus_baselines(cfg);
  return p;
}

// What a run prints once its directory is claimed, and the parent's record (init_from.json).
void announce_run(const Config& cfg, const PreparedRun& p, RunDirectory& run,
                  const Provenance& provenance) {
  std::cout << "poslab train: " << p.model->arena().count() << " parameters, task '"
            << cfg.task.name << "', encoding '" << cfg.encoding.type << "', memory "
            << cfg.memory.mem_len << "\n  writing to " << run.path().string() << "\n  poslab "
            << provenance.poslab_version << " at " << provenance.commit << ", "
            << provenance.threads << " threads (" << provenance.threads_from << ")\n";
  if (!p.baselines.corpus_description.empty())
    std::cout << "  " << p.baselines.corpus_description << "\n";
  if (!p.parent) return;
  const ParentRun& parent = *p.parent;
  if (!p.parent_recorded || !std::filesystem::exists(run.file(kParentRecordFile)))
    run.write_json(kParentRecordFile, parent.to_json());
  std::cout << "  fine-tuning from " << parent.path << " (" << parent.encoding << ", segment "
            << parent.seq_len << ", " << parent.steps << " steps; checkpoint sha256 "
            << parent.checkpoint_sha256.substr(0, 12) << "...), optimizer "
            << (parent.optimizer ? "continued from its Adam moments" : "fresh") << "\n";
}

// The passkey curve's reads during training (train/passkey_curve.hpp), one line each: the mean
// exact match over each length's depths.
struct CurveReads {
  std::optional<PasskeyCurve> curve;
  double seconds = 0;

  std::function<void(int)> reader(const Config& cfg, TransformerLM<float>& model) {
    if (!curve) return {};
    return [this, &cfg, &model](int step) {
      const auto begin = std::chrono::steady_clock::now();
      const std::vector<PasskeyCellResult> cells = curve->read(model, step);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      std::cout << "  passkey (validation, " << cfg.train.eval_passkey_instances
                << " per cell) at step " << step << ", exact match by length:";
      for (std::size_t i = 0; i < cells.size();) {
        double sum = 0;
        std::size_t n = 0;
        for (; i + n < cells.size() && cells[i + n].seq_len == cells[i].seq_len; ++n)
          sum += cells[i + n].exact_match;
        std::cout << " " << cells[i].seq_len << ": " << std::fixed << std::setprecision(2)
                  << sum / double(n);
        i += n;
      }
      std::cout << std::endl;
    };
  }
};

// Steps 2 and 3 in the claimed directory: train, then evaluate the plan. A stop request during
// training, or between two evaluations, saves the state and throws TrainingInterrupted.
EvalRows train_and_evaluate(const Config& cfg, PreparedRun& p, RunDirectory& run,
                            const Provenance& provenance, TrainReport& report) {
  TransformerLM<float>& model = *p.model;
  install_stop_handler();  // SIGTERM (Slurm's warning, `poslab run` stopping) or SIGINT
  const Resumable resumable{.run_dir = run.path(),
                            .save_every = cfg.train.save_state_every,
                            .from_saved_state = has_training_state(run.path()),
                            .threads = provenance.threads};
  if (resumable.from_saved_state)  // the rows after the saved step are logged again
    drop_metrics_after(run.file("metrics.csv"), saved_steps_done(run.path()));
  MetricsLog metrics = run.metrics(training_metrics_columns());
  CurveReads curve;
  if (p.curve_generator)
    curve.curve.emplace(cfg, run.path(), std::move(*p.curve_generator),
                        resumable.from_saved_state ? saved_steps_done(run.path()) : 0);
  const OptimizerStart optimizer{
      .moment_steps_before = p.parent && p.parent->optimizer ? p.parent->steps : 0};
  report = train_model(model, cfg, *p.train_source, p.valid_source.get(), &metrics, std::cout,
                       &resumable, optimizer, curve.reader(cfg, model));
  if (curve.curve)
    std::cout << std::fixed << std::setprecision(1) << "passkey curve: " << curve.seconds
              << " s of reads in " << report.seconds << " s of training ("
              << run.file(PasskeyCurve::kFile).string() << ")" << std::endl;
  // Between two evaluations, a stop request saves the trained model, then stops.
  const BeforeEach stop_if_requested = [&] {
    if (const int signal = stop_requested()) {
      save_training_state(run.path(), model,
                          TrainingProgress{.steps_done = cfg.train.steps,
                                           .logged_loss = report.final_train_loss,
                                           .elapsed_seconds = report.seconds,
                                           .threads = provenance.threads});
      throw TrainingInterrupted(signal, cfg.train.steps,
                                std::string(strsignal(signal)) + " while evaluating; the "
                                "trained model is saved in " + run.file("resume").string());
    }
  };
  return run_plan(p.plan, model, stop_if_requested, std::cout);
}

// The in-distribution gate: did the model learn what it was trained on? A task's gate setting
// (a model trained on randomized positions: with sampled ones) passes at eval.gate_threshold
// exact match; a language model's main loss must beat the bigram baseline.
nlohmann::json in_distribution_gate(const Config& cfg, const EvalRows& evaluations,
                                    double bigram) {
  nlohmann::json gate = nullptr;
  const std::string gate_kind = cfg.train.randomized_positions ? "gate_sampled" : "gate";
  for (const nlohmann::json& e : evaluations)
    if (e["kind"] == gate_kind && e["loss"].is_number())
      gate = e["exact_match"].get<double>() >= cfg.eval.gate_threshold;
  if (!std::isnan(bigram) && evaluations[0]["loss"].is_number())
    gate = evaluations[0]["loss"].get<double>() < bigram;
  return gate;
}

// eval.json: the main row's numbers, the gate, training's, every row, and where it was made.
nlohmann::json run_result(const Config& cfg, const PreparedRun& p, const TrainReport& report,
                          const EvalRows& evaluations, const Provenance& provenance) {
  const nlohmann::json& main_eval = evaluations[0];
  nlohmann::json result = {{"loss", main_eval["loss"]},
                           {"accuracy", main_eval.value("accuracy", 0.0)},
                           {"exact_match", main_eval.value("exact_match", 0.0)},
                           {"in_distribution_ok",
                            in_distribution_gate(cfg, evaluations, p.baselines.bigram)},
                           {"train_loss", report.final_train_loss},
                           {"train_tokens_per_second", report.tokens_per_second},
                           {"train_seconds", report.seconds},
                           {"steps", report.steps},
                           {"parameters", p.model->arena().count()},
                           {"encoding", cfg.encoding.type},
                           {"task", cfg.task.name},
                           {"evaluations", evaluations},
                           {"provenance",
                            {{"poslab_version", provenance.poslab_version},
                             {"commit", provenance.commit},
                             {"compiler", provenance.compiler},
                             {"flags", provenance.flags},
                             {"blas", provenance.blas},
                             {"threads", provenance.threads},
                             {"threads_from", provenance.threads_from},
                             {"host", provenance.host},
                             {"cpu", provenance.cpu},
                             {"started", p.started},
                             {"finished", utc_now()}}}};
  if (!std::isnan(p.baselines.unigram)) result["unigram_loss"] = p.baselines.unigram;
  if (!std::isnan(p.baselines.bigram)) result["bigram_loss"] = p.baselines.bigram;
  if (!p.baselines.corpus_description.empty())
    result["corpus"] = p.baselines.corpus_description;
  if (p.parent) {  // fine-tuned: from which run, exactly
    result["fine_tuned_from"] = p.parent->path;
    result["provenance"]["init_from"] = p.parent->to_json();
  }
  return result;
}

// Step 4: the checkpoint, then eval.json (written last: it marks the run as finished).
void write_finished_run(const Config& cfg, const PreparedRun& p, RunDirectory& run,
                        const TrainReport& report, const EvalRows& evaluations,
                        const Provenance& provenance) {
  const nlohmann::json& main_eval = evaluations[0];
  // The setting was checked before the run started; a NaN loss (a broken model, no scored
  // token) is found only now. nlohmann::json keeps a NaN as a number and writes it as null.
  if (!main_eval["loss"].is_number() || !std::isfinite(main_eval["loss"].get<double>()))
    throw std::runtime_error("the main evaluation gave no loss" +
                             (main_eval.contains("error")
                                  ? ": " + main_eval["error"].get<std::string>()
                                  : std::string(" (NaN): the model is broken")) +
                             "; the run in " + cfg.out_dir + " is left unfinished");
  save_checkpoint(run.path(), p.model->arena());
  save_optimizer_state(run.path(), p.model->arena());  // for children with train.init_optimizer
  run.write_json("eval.json", run_result(cfg, p, report, evaluations, provenance));
  remove_training_state(run.path());  // checkpoint/ holds the trained parameters
  const Baselines& b = p.baselines;
  if (!std::isnan(b.unigram) && main_eval["loss"].is_number())
    std::cout << std::fixed << std::setprecision(4) << "evaluation loss (" << cfg.eval.split
              << ") " << main_eval["loss"].get<double>() << " nats/byte = "
              << main_eval["loss"].get<double>() / std::log(2.0) << " bits/byte; unigram baseline "
              << b.unigram << ", bigram baseline " << b.bigram << " nats/byte\n";
  std::cout << "trained " << report.steps << " steps in " << std::setprecision(1)
            << report.seconds << " s (" << std::setprecision(0) << report.tokens_per_second
            << " tokens/s)\n";
}

}  // namespace

int run_train(const Config& cfg, ExistingRun existing, int wait_for_trainer_seconds) {
  const bool wait = existing == ExistingRun::resume && wait_for_trainer_seconds > 0;
  // --resume of a finished run (or, with --wait-for-trainer, one another process finished
  // while this one waited): nothing to do, and nothing to load.
  if (existing == ExistingRun::resume &&
      claim_run_directory(cfg, existing, false, wait ? wait_for_trainer_seconds : 0))
    return 0;
  PreparedRun prepared = prepare_run(cfg, existing);  // 1. checks: nothing written before

  // --resume of a finished run
  if (claim_run_directory(cfg, existing, false, wait ? wait_for_trainer_seconds : 0)) return 0;
  RunDirectory run = RunDirectory::create(cfg.out_dir);
  // One writer per run directory, for as long as this process lives. Checked again under the
  // lock: another `poslab train` may have taken the directory since claim_run_directory looked.
  std::optional<DirectoryLock> lock = DirectoryLock::try_lock(run.path());
  if (!lock && wait) {  // another trainer took it since the first look
    wait_for_other_trainer(cfg.out_dir, wait_for_trainer_seconds, std::cout);
    return outcome_of_other_trainer(cfg);
  }
  if (!lock)
    throw std::runtime_error(cfg.out_dir + " is being written by another poslab process (it "
                             "holds the directory's lock); not training it twice");
  if (claim_run_directory(cfg, existing, /*locked=*/true)) return 0;
  const RunClaim claim(run.path());  // claim.json, with a heartbeat, until this run ends
  run.write_text("config.toml", config_to_toml(cfg));
  const Provenance provenance = collect_provenance(prepared.threads_from);
  announce_run(cfg, prepared, run, provenance);

  TrainReport report;
  EvalRows evaluations;
  try {
    evaluations = train_and_evaluate(cfg, prepared, run, provenance, report);  // 2. and 3.
  } catch (const TrainingInterrupted& stopped) {
    std::cout << "poslab train: stopped: " << stopped.what() << "\ncontinue with: poslab train "
              << "--config " << run.file("config.toml").string() << " --resume\n";
    return 128 + stopped.signal;  // the shell's code for "ended by this signal"
  }
  write_finished_run(cfg, prepared, run, report, evaluations, provenance);  // 4.
  return 0;
}

}  // namespace poslab
