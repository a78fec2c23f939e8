// The vanilla sliding-window evaluation and its state-reuse counterpart: what and why are in
// sliding_window.hpp; this file is the how.
#include "eval/sliding_window.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <stdexcept>
#include <string>

#include "data/corpus.hpp"
#include "eval/rows.hpp"
#include "tasks/make_source.hpp"

namespace poslab {

EvalResult evaluate_sliding_window(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& tokens,
                                   const SlidingWindowOptions& o,
                                   std::vector<float>* token_losses) {
  const int A = o.attn_len, S = o.stride, V = model.config().vocab_size;
  if (A < 1 || S < 1 || S > A || o.batch < 1)
    throw std::invalid_argument("sliding window: need 1 <= stride <= attn_len and batch >= 1, got "
                                "attn_len " + std::to_string(A) + ", stride " +
                                std::to_string(S) + ", batch " + std::to_string(o.batch));
  const auto n = static_cast<std::int64_t>(tokens.size());
  // Window w starts at s = w * S and needs tokens [s, s + A] (A inputs and the target after the
  // last one); it scores its last S positions.
  std::int64_t windows = n > A ? (n - A - 1) / S + 1 : 0;
  if (o.max_targets > 0) windows = std::min<std::int64_t>(windows, (o.max_targets + S - 1) / S);
  if (windows == 0)
    throw std::invalid_argument("sliding window: " + std::to_string(n) +
                                " tokens are too few for one window of " + std::to_string(A));
  const int B = int(std::min<std::int64_t>(o.batch, windows));  // no pass wider than needed

  const int trained_mem_len = model.mem_len();
  model.set_mem_len(0);  // no state reuse: every window is computed from scratch
  const bool inference_only = model.set_inference_only(true);  // no backward in evaluation
  model.reset_memory();

  std::vector<std::int32_t> inputs(std::size_t(B) * A), targets(inputs.size());  // [B, A]
  std::vector<float> weights(inputs.size());                                       // [B, A]
  EvalResult r;
  if (token_losses) token_losses->clear();
  double loss_sum = 0, correct = 0;
  for (std::int64_t first = 0; first < windows; first += B) {
    // Rows b < rows hold windows first + b; the rest repeat the last one with weight 0, so that
    // every forward pass has the same shape.
    const int rows = int(std::min<std::int64_t>(B, windows - first));
    for (int b = 0; b < B; ++b) {
      const std::int64_t start = (first + std::min(b, rows - 1)) * S;  // s
      for (int i = 0; i < A; ++i) {
        const std::size_t cell = std::size_t(b) * A + i;
        inputs[cell] = tokens[std::size_t(start + i)];
        targets[cell] = tokens[std::size_t(start + i + 1)];
        weights[cell] = (b < rows && i >= A - S) ? 1.0f : 0.0f;
      }
    }
    model.forward(inputs.data(), targets.data(), weights.data(), B, A, 0, false);
    const float* loss = model.token_loss().data();
    const float* logits = model.logits().data();
    for (std::size_t cell = 0; cell < weights.size(); ++cell) {
      if (weights[cell] == 0) continue;
      const float* z = logits + cell * V;
      loss_sum += loss[cell];
      if (token_losses) token_losses->push_back(loss[cell]);  // cells are in target order
      correct += (std::max_element(z, z + V) - z) == targets[cell];
      ++r.tokens;
    }
    ++r.batches;
  }
  model.set_mem_len(trained_mem_len);
  model.set_inference_only(inference_only);
  model.reset_memory();
  r.loss = loss_sum / double(r.tokens);
  r.accuracy = correct / double(r.tokens);
  return r;
}

EvalResult evaluate_with_reuse(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                               int seq_len, int mem_len, long max_targets, int batch) {
  StreamBatcher source(tokens, batch, seq_len);
  const long per_batch = long(batch) * seq_len;
  const int batches = max_targets > 0 ? int((max_targets + per_batch - 1) / per_batch) : 0;
  return evaluate(model, source, batches, mem_len);
}

nlohmann::json sliding_window_row(TransformerLM<float>& model, const Config& cfg,
                                  const EvalSetting& s, nlohmann::json row, std::ostream& out) {
  const auto tokens = corpus_split_tokens(cfg, evaluation_split(cfg));
  const int rows = evaluation_batch_size(cfg);
  reset_peak_memory();
  const EvalResult r = evaluate_sliding_window(
      model, *tokens,
      SlidingWindowOptions{.attn_len = s.seq_len, .stride = s.stride,
                           .max_targets = cfg.eval.batches > 0
                                              ? long(cfg.eval.batches) * rows * s.seq_len
                                              : 0,
                           .batch = rows});
  row.update({{"loss", r.loss},  // no exact_match: a window's rows are not instances
              {"accuracy", r.accuracy},
              {"tokens", r.tokens},
              {"peak_memory_mb", peak_memory_mb()}});
  out << std::fixed << std::setprecision(4) << "eval " << s.kind << " x" << std::setprecision(2)
      << s.factor << std::setprecision(4) << ": windows of " << s.seq_len << ", stride "
      << s.stride << " | loss " << r.loss << " | accuracy " << std::setprecision(3)
      << r.accuracy << " | " << r.tokens << " scored tokens" << std::endl;
  return row;
}

}  // namespace poslab
