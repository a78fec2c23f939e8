#include "train/passkey_eval.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace poslab
