// The attention weights of a model on a text of your choice (`poslab attention`): what every
// layer's softmax gives each query, after an optional text that fills the model's memory first.
//
//   1. The memory text (if given) goes through the model as one segment from position 0. With
//      memory.mem_len = M > 0 that leaves the last min(M, its length) hidden states of every
//      layer in the memory, exactly as a previous segment would in evaluation.
//   2. The input (L tokens) goes through as one segment, at the stream position after the memory
//      text (for encodings that continue positions across segments).
//   3. Per layer, the softmax output of the attention, probs [B = 1, H, L, K] with K = M_rows + L
//      (nn/attention.hpp): row i is query i of the input, column j key j, the memory keys first;
//      each row sums to 1 over the keys query i may see (j <= i + M_rows) and is exactly 0 on the
//      others (the causal mask).
//
// A forward pass needs targets for its loss only; the next token will do (the last repeated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "model/transformer.hpp"

namespace poslab {

// Bytes as tokens (token = byte value); every byte must be a symbol of the model's vocabulary,
// else std::runtime_error naming `what` (the option the text came from) and the byte.
std::vector<std::int32_t> byte_tokens(const std::string& text, int vocab_size,
                                      const std::string& what);

struct AttentionWeights {
  int memory_rows = 0;                        // M_rows: memory keys before the input's
  std::vector<xt::xtensor<float, 3>> layers;  // per layer: probs [H, L, K]
  std::vector<std::int64_t> query_positions;  // [L]: the position id of each query
  std::vector<std::int64_t> key_positions;    // [K]: the position id of each key
};

// Steps 1-3 above; `memory` may be empty (no memory pass: the input attends to itself only).
// The model's memory is reset first.
AttentionWeights attention_weights(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& memory,
                                   const std::vector<std::int32_t>& input);

}  // namespace poslab
