#include "eval/passkey_eval.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <memory>
#include <optional>
#include <ostream>

#include "eval/memory_estimate.hpp"
#include "eval/mode.hpp"
#include "eval/rows.hpp"
#include "tasks/make_source.hpp"
#include "tasks/task.hpp"

namespace poslab {

PasskeyRowScore score_passkey_row(const float* logits, int L, int V, const std::int32_t* text) {
  PasskeyRowScore s;
  // Answer byte k (k = 0: the space, 1..5: the digits) is text[L + 1 - 6 + k], the target of
  // input position p = L - 6 + k.
  for (int k = 0; k < kPasskeyAnswer; ++k) {
    const int p = L - kPasskeyAnswer + k;
    const float* z = logits + std::size_t(p) * V;  // [V]
    const std::int32_t target = text[p + 1];
    const bool right = (std::max_element(z, z + V) - z) == target;
    if (k == 0) {
      s.space_right = right;
      continue;
    }
    s.digits_right += right;
    // -log softmax(z)[target] = log sum_v exp(z_v - max) - (z_target - max)
    const float top = *std::max_element(z, z + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(z[v]) - top);
    s.digit_loss += std::log(sum) - (double(z[target]) - top);
  }
  return s;
}

std::vector<PasskeyCell> passkey_cells(const Config& cfg) {
  std::vector<double> factors = cfg.eval.passkey_length_factors;
  std::sort(factors.begin(), factors.end());
  std::vector<PasskeyCell> cells;
  for (double f : factors)
    for (double d : cfg.eval.passkey_depths)
      cells.push_back({f, int(std::lround(cfg.train.seq_len * f)), d});
  return cells;
}

PasskeyCellResult evaluate_passkey_cell(TransformerLM<float>& model,
                                        const PasskeyGenerator& generator, const PasskeyCell& cell,
                                        int instances, int rows, std::uint64_t seed, Split split) {
  const int L = cell.seq_len, V = model.config().vocab_size;
  const int train_mem_len = model.mem_len();
  const bool randomized = model.set_randomized_positions(false);  // contiguous positions
  const bool inference_only = model.set_inference_only(true);
  model.set_mem_len(0);  // an instance is one segment: nothing to remember

  Rng rng(task_seed(seed, split));  // the same instances in every cell (see the header)
  std::vector<std::int32_t> texts(std::size_t(rows) * (L + 1));  // [rows, L + 1]
  std::vector<std::int32_t> inputs(std::size_t(rows) * L), targets(std::size_t(rows) * L);
  long exact = 0, greedy = 0, digits = 0;
  double loss = 0;
  for (int done = 0; done < instances;) {
    const int B = std::min(rows, instances - done);
    for (int b = 0; b < B; ++b) {
      std::int32_t* text = texts.data() + std::size_t(b) * (L + 1);
      generator.generate(L, cell.depth, rng, text);
      std::copy(text, text + L, inputs.data() + std::size_t(b) * L);
      std::copy(text + 1, text + L + 1, targets.data() + std::size_t(b) * L);
    }
    model.reset_memory();
    model.forward(inputs.data(), targets.data(), nullptr, B, L, 0, /*update_memory=*/false);
    const float* logits = model.logits().data();  // [B * L, V]
    for (int b = 0; b < B; ++b) {
      const PasskeyRowScore s = score_passkey_row(logits + std::size_t(b) * L * V, L, V,
                                                  texts.data() + std::size_t(b) * (L + 1));
      exact += s.exact();
      greedy += s.greedy();
      digits += s.digits_right;
      loss += s.digit_loss;
    }
    done += B;
  }
  model.set_mem_len(train_mem_len);
  model.set_randomized_positions(randomized);
  model.set_inference_only(inference_only);
  model.reset_memory();

  PasskeyCellResult r;
  r.factor = cell.factor;
  r.seq_len = L;
  r.depth = cell.depth;
  r.instances = instances;
  r.exact_match = double(exact) / instances;
  r.greedy_exact_match = double(greedy) / instances;
  r.digit_accuracy = double(digits) / (double(instances) * kPasskeyDigits);
  r.loss = loss / (double(instances) * kPasskeyDigits);
  return r;
}

// ---------------------------------------------------------------------------------------------
// The mode: one row per cell
// ---------------------------------------------------------------------------------------------

PasskeyGenerator checked_passkey_generator(const Config& cfg, const std::string& what) {
  PasskeyGenerator generator = make_passkey_generator(cfg, evaluation_split(cfg));
  int longest = 0;
  for (const PasskeyCell& cell : passkey_cells(cfg)) longest = std::max(longest, cell.seq_len);
  generator.check_length(longest);  // the filler grows with the length
  check_memory(cfg, evaluation_batch_size(cfg), longest, 0, /*training=*/false,
               what + " (segment " + std::to_string(longest) + ")");
  return generator;
}

nlohmann::json evaluate_passkey(TransformerLM<float>& model, const Config& cfg,
                                const PasskeyGenerator& generator, const PasskeyCell& cell,
                                std::ostream& out) {
  nlohmann::json row = {{"kind", "passkey"},  {"factor", cell.factor},
                        {"seq_len", cell.seq_len}, {"mem_len", 0},
                        {"split", cfg.eval.split}, {"passkey_depth", cell.depth}};
  try {
    reset_peak_memory();
    const PasskeyCellResult r =
        evaluate_passkey_cell(model, generator, cell, cfg.eval.passkey_instances,
                              evaluation_batch_size(cfg), cfg.eval.passkey_seed,
                              evaluation_split(cfg));
    const auto [low, high] = wilson_interval(r.exact_match, r.instances);
    row.update({{"loss", r.loss},
                {"accuracy", r.digit_accuracy},
                {"exact_match", r.exact_match},
                {"exact_match_ci_low", low},
                {"exact_match_ci_high", high},
                {"passkey_greedy_exact_match", r.greedy_exact_match},
                {"instances", r.instances},
                {"tokens", r.instances * kPasskeyDigits},
                {"peak_memory_mb", peak_memory_mb()}});
    out << std::fixed << std::setprecision(2) << "eval passkey x" << cell.factor << ": segment "
        << cell.seq_len << ", depth " << cell.depth << std::setprecision(3) << " | exact match "
        << r.exact_match << " (greedy " << r.greedy_exact_match << ") | digits "
        << r.digit_accuracy << " | over " << r.instances << " instances" << std::endl;
  } catch (const std::exception& e) {
    row["error"] = e.what();
    row["loss"] = nullptr;
    out << "eval passkey x" << cell.factor << ": segment " << cell.seq_len << ", depth "
        << cell.depth << " | not possible: " << e.what() << std::endl;
  }
  return row;
}

namespace {

// The grid of one run (eval.passkey_length_factors not empty), its generator checked.
class PasskeyEvaluation : public PreparedEvaluation {
 public:
  explicit PasskeyEvaluation(const Config& cfg)
      : cfg_(cfg), generator_(checked_passkey_generator(cfg, "the passkey evaluation")) {}
  void evaluate(TransformerLM<float>& model, const BeforeEach& before_each, EvalRows& rows,
                std::ostream& out) override {
    for (const PasskeyCell& cell : passkey_cells(cfg_)) {
      before_each();
      rows.push_back(evaluate_passkey(model, cfg_, generator_, cell, out));
    }
  }

 private:
  Config cfg_;
  PasskeyGenerator generator_;
};

}  // namespace

EvalMode passkey_eval_mode() {
  return {.name = "passkey",
          .measures = "retrieval of a 5-digit key at each length and depth, teacher-forced and "
                      "greedy (Mohtashami & Jaggi 2023)",
          .wanted = [](const Config& cfg) { return !cfg.eval.passkey_length_factors.empty(); },
          .prepare = [](const Config& cfg, const RunFacts&) -> std::unique_ptr<PreparedEvaluation> {
            return std::make_unique<PasskeyEvaluation>(cfg);
          }};
}

}  // namespace poslab
