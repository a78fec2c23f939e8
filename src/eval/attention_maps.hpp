// The attention maps of the attention explorer (`poslab explore`): for one text at one length,
// every layer's and head's attention weights pooled into at most 128 x 128 blocks, and the loss
// of every input token.
//
//   1. The M = memory.mem_len tokens before the input go through the model first (filling its
//      memory, as the previous segment would in evaluation), then the input, L tokens, as one
//      segment at position M: the same two passes as `poslab attention`
//      (eval/attention_weights.hpp), with the true next tokens as targets.
//   2. The attention weights of every layer and head, probs [H, L, K = M_rows + L], pooled into
//      blocks of b x b (b = ceil(L / 128): at most 128 rows; b = 1 up to 128 tokens). A block
//      holds the attention mass its queries give its keys, averaged over its queries:
//          A[qb, kb] = (1 / |qb|) sum_{i in qb} sum_{j in kb} P_ij
//      so that every row of blocks still sums to 1. Stored as one byte per block,
//      round(255 sqrt(A)) (the square root keeps weak attention visible; the page squares it),
//      at least 1 where A > 0: 0 is a masked block only (map_byte).
//   3. The loss of every input token (the model's cross-entropy on the next token).
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.hpp"

namespace poslab {

inline constexpr int kMaxMapRows = 128;  // rows (and key columns per row of blocks) of a map

// A block's mass A as one byte: round(255 sqrt(A)), but at least 1 where A > 0, so that 0
// means masked (keys after the query) only. A weight below (0.5 / 255)^2 = 3.8e-6 would round
// to 0 and be drawn white, as if it were missing.
std::uint8_t map_byte(double mass);

struct PooledAttention {
  int length = 0;       // L: input tokens
  int memory_rows = 0;  // M_rows: memory keys before the input's (K = M_rows + L)
  int block = 0;        // b: tokens per block side
  int rows = 0, cols = 0;  // ceil(L / b) rows of blocks, ceil(K / b) columns
  std::vector<std::vector<std::vector<std::uint8_t>>> maps;  // [layer][head]: rows x cols bytes
  std::vector<float> token_loss;  // [L]: the loss of predicting input[i + 1]
};

// Steps 1-3 for the text `tokens`: memory_len tokens of memory, then `length` input tokens and
// the input's last target (memory_len + length + 1 tokens). Throws if the model cannot take the
// input (e.g. a learned position table shorter than L).
PooledAttention pooled_attention(TransformerLM<float>& model, const std::int32_t* tokens,
                                 int memory_len, int length);

}  // namespace poslab
