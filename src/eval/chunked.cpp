#include "train/evaluate.hpp"

#include <algorithm>

#include "data/corpus.hpp"

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

}  // namespace poslab
