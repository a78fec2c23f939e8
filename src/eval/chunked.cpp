#include "eval/chunked.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <optional>
#include <ostream>

#include "data/corpus.hpp"
#include "eval/memory_estimate.hpp"
#include "eval/mode.hpp"
#include "eval/rows.hpp"
#include "eval/sliding_window.hpp"
#include "tasks/make_source.hpp"

namespace poslab {

EvalResult evaluate(TransformerLM<float>& model, BatchSource& source, int max_batches,
                    int mem_len, bool continue_positions, bool sample_positions,
                    std::vector<float>* token_losses, CopyDistanceLoss* copy_distance) {
  const int B = source.batch(), L = source.len(), V = model.config().vocab_size;
  const std::int64_t pass = source.batches_per_pass();
  const int n_batches = int(max_batches > 0 ? std::min<std::int64_t>(max_batches, pass) : pass);
  const int train_mem_len = model.mem_len();
  const bool randomized = model.set_randomized_positions(sample_positions);
  const bool inference_only = model.set_inference_only(true);  // no backward in evaluation
  model.set_mem_len(mem_len);
  model.reset_memory();
  source.reset();

  EvalResult r;
  if (token_losses) token_losses->clear();
  r.loss_by_position.assign(L, 0.0);
  std::vector<double> scored_at(L, 0.0);
  double loss_sum = 0, correct_sum = 0, rows = 0, exact_rows = 0;
  Batch b;
  for (int t = 0; t < n_batches; ++t) {
    source.next(b);
    if (b.first_of_pass) model.reset_memory();
    const std::int64_t offset = continue_positions ? b.start : 0;
    const float* w = b.weights.empty() ? nullptr : b.weights.data();
    model.forward(b.inputs.data(), b.targets.data(), w, B, L, offset, true);
    const float* loss = model.token_loss().data();
    const float* logits = model.logits().data();
    for (int row = 0; row < B; ++row) {
      if (copy_distance)  // the row's targets by copy distance, from its own bytes
        copy_distance->add_row(b.inputs.data() + long(row) * L, b.targets.data() + long(row) * L,
                               loss + long(row) * L, w ? w + long(row) * L : nullptr, L);
      double row_scored = 0, row_correct = 0;
      for (int i = 0; i < L; ++i) {
        const long n = long(row) * L + i;
        const double weight = w ? w[n] : 1.0;
        if (weight == 0) continue;
        const float* z = logits + n * V;
        const bool right = (std::max_element(z, z + V) - z) == b.targets[n];
        loss_sum += weight * loss[n];
        if (token_losses) token_losses->push_back(loss[n]);
        correct_sum += weight * right;
        r.loss_by_position[i] += weight * loss[n];
        scored_at[i] += weight;
        row_scored += weight;
        row_correct += weight * right;
      }
      if (row_scored > 0) {
        rows += 1;
        exact_rows += row_correct == row_scored;
        r.tokens += long(row_scored);
      }
    }
  }
  double scored = 0;
  for (double s : scored_at) scored += s;
  r.batches = n_batches;
  r.rows = long(rows);
  r.loss = scored > 0 ? loss_sum / scored : 0;
  r.accuracy = scored > 0 ? correct_sum / scored : 0;
  r.exact_match = rows > 0 ? exact_rows / rows : 0;
  for (int i = 0; i < L; ++i) r.loss_by_position[i] = scored_at[i] > 0 ? r.loss_by_position[i] / scored_at[i] : 0;
  model.set_mem_len(train_mem_len);
  model.set_randomized_positions(randomized);
  model.set_inference_only(inference_only);
  model.reset_memory();
  return r;
}

EvalResult evaluate_stream(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                           int batch, int seq_len, int mem_len, int max_batches,
                           bool continue_positions) {
  StreamBatcher source(tokens, batch, seq_len);
  return evaluate(model, source, max_batches, mem_len, continue_positions);
}

// ---------------------------------------------------------------------------------------------
// The mode: its settings, one row each
// ---------------------------------------------------------------------------------------------

std::vector<EvalSetting> chunked_settings(const Config& cfg, bool independent_rows) {
  const int L = cfg.train.seq_len;
  std::vector<EvalSetting> plan;
  plan.push_back({.kind = "main",
                  .seq_len = cfg.eval.seq_len > 0 ? cfg.eval.seq_len : L,
                  .mem_len = cfg.eval.mem_len >= 0 ? cfg.eval.mem_len : cfg.memory.mem_len});
  if (independent_rows)
    plan.push_back({.kind = "gate", .seq_len = L, .mem_len = cfg.memory.mem_len, .gate = true});
  std::vector<double> factors = cfg.eval.length_factors;
  std::sort(factors.begin(), factors.end());
  int longest_so_far = L;
  for (double f : factors) {
    const int len = int(std::lround(L * f));
    plan.push_back({.kind = "length", .factor = f, .seq_len = len, .mem_len = cfg.memory.mem_len,
                    .longer_than = longest_so_far});
    longest_so_far = std::max(longest_so_far, len);
  }
  for (double f : cfg.eval.memory_factors)
    plan.push_back({.kind = "memory", .factor = f, .seq_len = L,
                    .mem_len = int(std::lround(L * f))});
  // Randomized positions (Ruoss et al. 2023): the length settings once more, with positions
  // sampled from [0, train.max_position) at evaluation as well, as their reference code does.
  if (cfg.train.randomized_positions) {
    const std::size_t settings = plan.size();
    for (std::size_t i = 0; i < settings; ++i)
      if (plan[i].kind == "length" || plan[i].kind == "gate") {
        EvalSetting sampled = plan[i];
        sampled.kind += "_sampled";
        sampled.sample_positions = true;
        plan.push_back(sampled);
      }
  }
  // Sliding windows (eval.stride; language models): the main length and every length factor
  // again, read as Press et al. and Peng et al. read them, after every chunked row.
  if (cfg.eval.stride > 0) {
    const std::size_t settings = plan.size();
    for (std::size_t i = 0; i < settings; ++i)
      if (plan[i].kind == "main" || plan[i].kind == "length") {
        EvalSetting sliding = plan[i];
        sliding.kind += "_sliding";
        sliding.mem_len = 0;
        sliding.stride = cfg.eval.stride;
        plan.push_back(sliding);
      }
  }
  return plan;
}

std::string setting_name(const EvalSetting& s) {
  return "the " + s.kind + " evaluation (segment " + std::to_string(s.seq_len) + ", memory " +
         std::to_string(s.mem_len) + ")";
}

std::unique_ptr<BatchSource> evaluation_source(const Config& cfg, const EvalSetting& s) {
  Config rows = cfg;
  rows.train.batch_size = evaluation_batch_size(cfg);
  SourceSpec spec;
  spec.split = evaluation_split(cfg);
  spec.len = s.seq_len;
  spec.longer_than = s.longer_than;
  spec.gate = s.gate;
  return make_batch_source(rows, spec);
}

namespace {

// The seed of the positions sampled at evaluation (kind "length_sampled"): fixed, so that every
// run and every setting reads the same sample, whatever its training drew.
constexpr std::uint64_t kEvaluationPositionSeed = 0xE7A1'0A7E;

// The numbers of a chunked row: loss, accuracy, exact match with its interval, and the loss by
// position (and by copy distance, eval.copy_distance); one line to `out`.
void chunked_row(TransformerLM<float>& model, const Config& cfg, const EvalSetting& s,
                 std::vector<float>* token_losses, nlohmann::json& row, std::ostream& out) {
  auto source = evaluation_source(cfg, s);
  if (s.sample_positions)
    model.enable_randomized_positions(kEvaluationPositionSeed, cfg.train.max_position);
  std::optional<CopyDistanceLoss> copy_distance;  // eval.copy_distance
  if (cfg.eval.copy_distance) copy_distance.emplace(cfg.eval.copy_min_match, s.seq_len);
  reset_peak_memory();
  const EvalResult r = evaluate(model, *source, cfg.eval.batches, s.mem_len,
                                cfg.memory.continue_positions, s.sample_positions, token_losses,
                                copy_distance ? &*copy_distance : nullptr);
  const auto [low, high] = wilson_interval(r.exact_match, r.rows);
  row.update({{"loss", r.loss},
              {"accuracy", r.accuracy},
              {"exact_match", r.exact_match},
              {"exact_match_ci_low", low},
              {"exact_match_ci_high", high},
              {"instances", r.rows},
              {"tokens", r.tokens},
              {"peak_memory_mb", peak_memory_mb()},
              {"loss_by_position", r.loss_by_position}});
  if (copy_distance) row["copy_distance"] = copy_distance_json(*copy_distance, s.seq_len);
  out << std::fixed << std::setprecision(4) << "eval " << std::setw(6) << s.kind << " x"
      << std::setprecision(2) << s.factor << std::setprecision(4) << ": segment " << s.seq_len
      << ", memory " << s.mem_len << " | loss " << r.loss << " | accuracy "
      << std::setprecision(3) << r.accuracy << " | exact match " << r.exact_match << " over "
      << r.rows << " rows | " << r.tokens << " scored tokens" << std::endl;
}

}  // namespace

nlohmann::json evaluate_setting(TransformerLM<float>& model, const Config& cfg,
                                const EvalSetting& s, std::ostream& out,
                                std::vector<float>* token_losses) {
  nlohmann::json row = {{"kind", s.kind}, {"factor", s.factor}, {"seq_len", s.seq_len},
                        {"mem_len", s.mem_len}, {"split", cfg.eval.split}};
  if (s.stride > 0) row["stride"] = s.stride;
  try {
    check_memory(cfg, evaluation_batch_size(cfg), s.seq_len, s.mem_len, /*training=*/false,
                 setting_name(s));
    const auto start = std::chrono::steady_clock::now();
    if (s.stride > 0)
      row = sliding_window_row(model, cfg, s, row, out);
    else
      chunked_row(model, cfg, s, token_losses, row, out);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (row.contains("tokens") && row["tokens"].is_number() && seconds > 0)
      row["tokens_per_second"] = row["tokens"].get<double>() / seconds;
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["loss"] = nullptr;
    out << "eval " << s.kind << " x" << s.factor << ": segment " << s.seq_len << ", memory "
        << s.mem_len << " | not possible: " << e.what() << std::endl;
  }
  return row;
}

namespace {

// The chunked mode of one run: every setting of chunked_settings, the main one checked before
// anything is written (it decides the run's loss: it must fit in memory, and the split must
// hold a segment of its length).
class ChunkedEvaluation : public PreparedEvaluation {
 public:
  ChunkedEvaluation(const Config& cfg, const RunFacts& facts)
      : cfg_(cfg), settings_(chunked_settings(cfg, facts.independent_rows)) {
    const EvalSetting& main = settings_.front();
    check_memory(cfg, evaluation_batch_size(cfg), main.seq_len, main.mem_len,
                 /*training=*/false, setting_name(main));
    evaluation_source(cfg, main);  // throws if the split is too short for eval.seq_len
  }
  void evaluate(TransformerLM<float>& model, const BeforeEach& before_each, EvalRows& rows,
                std::ostream& out) override {
    for (const EvalSetting& setting : settings_) {
      before_each();
      rows.push_back(evaluate_setting(model, cfg_, setting, out));
    }
  }

 private:
  Config cfg_;
  std::vector<EvalSetting> settings_;
};

}  // namespace

EvalMode chunked_eval_mode() {
  return {.name = "chunked",
          .measures = "loss, accuracy and exact match of held-out segments at the trained and "
                      "other lengths and memories (Dai et al. 2019; Press et al. 2022)",
          .wanted = [](const Config&) { return true; },  // every run has a main setting
          .prepare = [](const Config& cfg, const RunFacts& facts)
              -> std::unique_ptr<PreparedEvaluation> {
            return std::make_unique<ChunkedEvaluation>(cfg, facts);
          }};
}

}  // namespace poslab
