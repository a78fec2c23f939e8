// The attention explorer's maps (attention_maps.hpp): two forward passes, then every head's
// weights summed over blocks of b x b and averaged over each block's queries.
#include "eval/attention_maps.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace poslab {

std::uint8_t map_byte(double mass) {
  if (!(mass > 0)) return 0;
  return std::uint8_t(std::max(1L, std::lround(255.0 * std::sqrt(std::min(mass, 1.0)))));
}

namespace {

// One head's weights P [L, K] as blocks: A[qb, kb] = mean over the block's queries of their mass
// on its keys, one byte each (map_byte).
void pool_head(const float* P, int L, int K, int b, int rows, int cols,
               std::vector<std::uint8_t>& bytes) {
  bytes.assign(std::size_t(rows) * cols, 0);
  for (int qb = 0; qb < rows; ++qb) {
    const int i0 = qb * b, i1 = std::min(L, i0 + b);
    for (int kb = 0; kb < cols; ++kb) {
      const int j0 = kb * b, j1 = std::min(K, j0 + b);
      double mass = 0;  // A[qb, kb] = mean over the block's queries of their mass on its keys
      for (int i = i0; i < i1; ++i)
        for (int j = j0; j < j1; ++j) mass += P[std::size_t(i) * K + j];
      mass /= (i1 - i0);
      bytes[std::size_t(qb) * cols + kb] = map_byte(mass);
    }
  }
}

}  // namespace

PooledAttention pooled_attention(TransformerLM<float>& model, const std::int32_t* tokens,
                                 int memory_len, int length) {
  const int M = memory_len, L = length, H = model.config().n_heads;
  const std::int32_t* memory = tokens;
  const std::int32_t* input = memory + M;
  if (model.config().sink_token)  // its maps would carry the sink's extra column
    throw std::invalid_argument("poslab explore: the run has model.sink_token = true, whose maps would "
                                "carry the sink's extra column; not supported (the mass on the "
                                "sink per head: poslab sinks)");
  // 1. The memory, then the input at position M; targets are the next tokens.
  model.reset_memory(1);
  if (M > 0) model.forward(memory, memory + 1, nullptr, 1, M, 0, true);
  const int Mr = model.memory_rows();
  model.forward(input, input + 1, nullptr, 1, L, M, false);
  const int K = Mr + L;
  if (model.geometry().k_len != K) throw std::logic_error("poslab explore: unexpected geometry");

  // 2. The maps.
  PooledAttention out;
  out.length = L;
  out.memory_rows = Mr;
  out.block = (L + kMaxMapRows - 1) / kMaxMapRows;
  out.rows = (L + out.block - 1) / out.block;
  out.cols = (K + out.block - 1) / out.block;
  for (int n = 0; n < model.config().n_layers; ++n) {
    const auto& probs = model.block(n).attn.probs();  // [1, H, L, K]
    out.maps.emplace_back(H);
    for (int h = 0; h < H; ++h)
      pool_head(probs.data() + std::size_t(h) * L * K, L, K, out.block, out.rows, out.cols,
                out.maps.back()[h]);
  }
  // 3. The loss of every input token.
  const auto& token_loss = model.token_loss();  // [L]: loss of predicting input[i + 1]
  out.token_loss.assign(token_loss.begin(), token_loss.begin() + L);
  return out;
}

}  // namespace poslab
