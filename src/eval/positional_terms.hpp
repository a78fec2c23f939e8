// The positional part of the attention score against the distance d = i - j (the attention
// explorer, `poslab explore`), for one query at position D (the largest distance shown) and keys
// at D - d, per layer and head, as far as the encoding exposes it:
//   - score terms (hook (c): T5, ALiBi, KERPLE, FIRE biases; Shaw's q.a^K; Transformer-XL's
//     (b) + (d) = (q + v) . W_kR R_{i-j}; DeBERTa's c2p): the encoding's scores_forward with the
//     keys set to 0, which removes every term that reads a key (XL's (c) u.k, DeBERTa's p2c) and
//     keeps the terms of positions alone or of the query. The query is the last query of the
//     model's last forward pass (queries() of that layer); a bias does not depend on it.
//   - RoPE (hook (b)): the q.k response, scale * R(D) q . R(D - d) k with q = k = (1, ..., 1):
//     RoFormer's long-term decay, the same for every head.
//   - a two-map method (Self-Extend, ReRoPE: rope with two score passes): the same q.k response
//     of the merged score, each key under the map its distance selects.
//   - absolute encodings (hook (a): sinusoidal, learned) and none: nothing to show; the
//     position is mixed into the content before any score.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/transformer.hpp"

namespace poslab {

struct PositionalTerms {
  std::string kind;  // "score terms", "q.k response", or "none" (no layers)
  std::string note;  // what was computed, in words (the explorer shows it)
  std::vector<std::vector<std::vector<float>>> layers;  // [layer][head][d = 0 .. D]
};

// The terms of `model` (configured by `encoding`, for the note) up to distance max_distance = D.
// For score terms the model must have run a forward pass (its queries are read).
PositionalTerms positional_terms(TransformerLM<float>& model, const EncodingConfig& encoding,
                                 int max_distance);

}  // namespace poslab
