#include "train/evaluate.hpp"

#include <algorithm>

#include "data/corpus.hpp"

namespace poslab {

EvalResult evaluate_stream(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                           int batch, int seq_len, int mem_len, int max_batches,
                           bool continue_positions) {
  StreamBatcher batcher(tokens, batch, seq_len);
  const int n_batches = max_batches > 0 ? std::min<int>(max_batches, int(batcher.batches_per_pass()))
                                        : int(batcher.batches_per_pass());
  const int train_mem_len = model.mem_len();
  model.set_mem_len(mem_len);
  model.reset_memory();

  EvalResult r;
  r.loss_by_position.assign(seq_len, 0.0);
  const int V = model.config().vocab_size;
  Batch b;
  double loss_sum = 0;
  long correct = 0;
  for (int t = 0; t < n_batches; ++t) {
    batcher.next(b);
    const std::int64_t offset = continue_positions ? b.start : 0;
    model.forward(b.inputs.data(), b.targets.data(), nullptr, batch, seq_len, offset, true);
    const float* loss = model.token_loss().data();
    const float* logits = model.logits().data();
    for (int row = 0; row < batch; ++row)
      for (int i = 0; i < seq_len; ++i) {
        const long n = long(row) * seq_len + i;
        loss_sum += loss[n];
        r.loss_by_position[i] += loss[n];
        const float* z = logits + n * V;
        correct += (std::max_element(z, z + V) - z) == b.targets[n];
      }
  }
  r.batches = n_batches;
  r.tokens = long(n_batches) * batch * seq_len;
  r.loss = loss_sum / double(r.tokens);
  r.accuracy = double(correct) / double(r.tokens);
  for (auto& x : r.loss_by_position) x /= double(n_batches) * batch;
  model.set_mem_len(train_mem_len);
  model.reset_memory();
  return r;
}

}  // namespace poslab
