// The attention weights of a model on a text (attention_weights.hpp): two forward passes, the
// memory text then the input, and every layer's softmax output copied out.
#include "eval/attention_weights.hpp"

#include <algorithm>
#include <stdexcept>

namespace poslab {

namespace {

// The targets of a forward pass are needed for its loss only; the next token will do.
std::vector<std::int32_t> next_tokens(const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(tokens.back());
  return targets;
}

}  // namespace

std::vector<std::int32_t> byte_tokens(const std::string& text, int vocab_size,
                                      const std::string& what) {
  std::vector<std::int32_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text) {
    if (int(c) >= vocab_size)
      throw std::runtime_error(what + ": byte " + std::to_string(int(c)) +
                               " is outside the model's vocabulary (model.vocab_size = " +
                               std::to_string(vocab_size) + ")");
    tokens.push_back(c);
  }
  return tokens;
}

AttentionWeights attention_weights(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& memory,
                                   const std::vector<std::int32_t>& input) {
  if (model.config().sink_token)  // its maps would carry the sink's extra column
    throw std::invalid_argument("poslab attention: the run has model.sink_token = true, whose maps would "
                                "carry the sink's extra column; not supported (the mass on the "
                                "sink per head: poslab sinks)");
  // 1. The memory text, if any, fills the memory (as much of it as the model keeps).
  model.reset_memory(1);
  if (!memory.empty()) {
    const auto targets = next_tokens(memory);
    model.forward(memory.data(), targets.data(), nullptr, 1, int(memory.size()), 0, true);
  }
  const int M = model.memory_rows();

  // 2. The input, one segment after the memory text (its stream position).
  const int L = int(input.size());
  const auto targets = next_tokens(input);
  model.forward(input.data(), targets.data(), nullptr, 1, L, std::int64_t(memory.size()), false);
  const AttentionGeometry& g = model.geometry();
  const int H = model.config().n_heads, K = g.k_len;
  if (g.mem_len != M || K != M + L)
    throw std::logic_error("poslab attention: unexpected attention geometry");

  // 3. Every layer's weights, probs [1, H, L, K] -> [H, L, K].
  AttentionWeights out;
  out.memory_rows = M;
  for (int n = 0; n < model.config().n_layers; ++n) {
    const auto& probs = model.block(n).attn.probs();  // [1, H, L, K]
    xt::xtensor<float, 3> p({std::size_t(H), std::size_t(L), std::size_t(K)});
    std::copy_n(probs.data(), p.size(), p.data());
    out.layers.push_back(std::move(p));
  }
  out.query_positions.assign(g.q_pos, g.q_pos + L);
  out.key_positions.assign(g.k_pos, g.k_pos + K);
  return out;
}

}  // namespace poslab
