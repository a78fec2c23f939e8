// The attention-sink diagnostic: what and why are in sink_diagnostic.hpp; this file is the how.
#include "eval/sink_diagnostic.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace poslab {

namespace {

// The model's state for one diagnostic pass, restored when it ends (or throws): the training
// forward (it keeps every layer's weights P, which the evaluation-only forward does not),
// contiguous positions, and an empty memory.
class DiagnosticPass {
 public:
  explicit DiagnosticPass(TransformerLM<float>& model)
      : model_(model),
        inference_only_(model.set_inference_only(false)),
        randomized_(model.set_randomized_positions(false)) {
    model.reset_memory();
  }
  ~DiagnosticPass() {
    model_.set_inference_only(inference_only_);
    model_.set_randomized_positions(randomized_);
    model_.reset_memory();
  }

 private:
  TransformerLM<float>& model_;
  bool inference_only_, randomized_;
};

}  // namespace

SinkDiagnostic attention_sink_diagnostic(TransformerLM<float>& model,
                                         const std::vector<std::int32_t>& tokens,
                                         const SinkDiagnosticOptions& o) {
  const int L = o.window;
  if (L < 2)
    throw std::invalid_argument("sink diagnostic: window must be >= 2, got " + std::to_string(L));
  if (o.batch < 1 || o.windows < 0)
    throw std::invalid_argument("sink diagnostic: need batch >= 1 and windows >= 0");
  const int first_query = o.first_query < 0 ? L / 2 : o.first_query;
  if (first_query >= L)
    throw std::invalid_argument("sink diagnostic: first_query " + std::to_string(first_query) +
                                " leaves no query in a window of " + std::to_string(L));
  const long available = long(tokens.size()) / L;  // whole windows in the stream
  const long W = o.windows > 0 ? o.windows : available;
  if (W < 1 || W > available)
    throw std::invalid_argument("sink diagnostic: " + std::to_string(W) + " windows of " +
                                std::to_string(L) + " tokens need " + std::to_string(W * L) +
                                " tokens; the stream holds " + std::to_string(tokens.size()));

  const ModelConfig& mc = model.config();
  const int N = mc.n_layers, H = mc.n_heads;
  SinkDiagnostic r;
  r.layers = N;
  r.heads = H;
  r.window = L;
  r.first_query = first_query;
  r.windows = W;
  r.profile.assign(N, std::vector<std::vector<double>>(H, std::vector<double>(L, 0.0)));

  DiagnosticPass pass(model);
  std::vector<std::int32_t> targets;  // the loss is not read: the next token will do
  for (long w0 = 0; w0 < W; w0 += o.batch) {
    const int B = int(std::min<long>(o.batch, W - w0));  // windows w0 .. w0 + B - 1
    const std::int32_t* in = tokens.data() + w0 * L;     // [B, L], consecutive windows
    targets.assign(in + 1, in + long(B) * L);
    targets.push_back(in[long(B) * L - 1]);
    model.reset_memory();
    model.forward(in, targets.data(), nullptr, B, L, 0, /*update_memory=*/false);
    // With a prepended sink token (model.sink_token) the model read [SINK, window]: L + 1
    // columns, and key 0 is the sink; the window's token i is column i + 1.
    const int s = model.sink_prepended() ? 1 : 0;
    const AttentionGeometry& g = model.geometry();
    if (g.mem_len != 0 || g.k_len != L + s || g.q_len != L + s)
      throw std::logic_error("sink diagnostic: expected keys = queries = window, no memory");
    for (int n = 0; n < N; ++n) {
      const auto& P = model.block(n).attn.probs();  // [B, H, L + s, K = L + s]
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
          for (int i = 0; i < L; ++i) r.profile[n][h][i] += P(b, h, i + s, 0);  // on key 0
    }
  }

  // a(i) = the sums / W;  u(i) = 1 / n_i;  the summaries over queries [first_query, L).
  r.uniform.resize(L);
  const AttentionGeometry& g = model.geometry();
  const int s = model.sink_prepended() ? 1 : 0;  // token i is column i + s
  for (int i = 0; i < L; ++i)
    r.uniform[i] = 1.0 / double(g.last_visible(i + s) - g.first_visible(i + s) + 1);
  const int Q = L - first_query;
  for (int i = first_query; i < L; ++i) r.uniform_mass += r.uniform[i] / Q;
  r.first_key_mass.assign(N, std::vector<double>(H, 0.0));
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h) {
      for (double& a : r.profile[n][h]) a /= double(W);
      for (int i = first_query; i < L; ++i) r.first_key_mass[n][h] += r.profile[n][h][i] / Q;
    }
  return r;
}

}  // namespace poslab
