// The positional part of the score against distance (positional_terms.hpp): the encoding's own
// hooks called on one query at position D and keys at 0 .. D, with the content removed (keys 0)
// or made uniform (q = k = (1, ..., 1)).
#include "eval/positional_terms.hpp"

#include <algorithm>
#include <cstdint>

namespace poslab {

namespace {

enum class TermsKind { two_maps, score_terms, qk_response, none };

TermsKind kind_of(Encoding<float>& enc) {
  // A two-map method (Self-Extend, ReRoPE; encodings/two_map_scores.hpp) computes the whole
  // q.k score as its score terms, with near and far keys under different position maps: its
  // positional part is the merged score's q.k response (q = k = (1, ..., 1) at every position),
  // map 1 below the window, map 2 beyond. Keys set to 0 would draw it as a flat 0 (issue 51).
  if (enc.has_score_terms() && !enc.has_content_term()) return TermsKind::two_maps;
  if (enc.has_score_terms()) return TermsKind::score_terms;
  if (enc.has_qk_transform()) return TermsKind::qk_response;
  return TermsKind::none;
}

// What was computed, in words, and its kind's name.
PositionalTerms described(TermsKind kind, const EncodingConfig& encoding) {
  const Options& o = encoding.options;
  switch (kind) {
    case TermsKind::two_maps:
      return {"q.k response",
              "the merged score of '" + encoding.type + "'" +
                  (o.has("scaling") ? " with scaling " + o.get_string("scaling") : std::string()) +
                  " (two position maps: near keys as plain RoPE, far keys at the method's "
                  "positions) for q = k = (1, ..., 1) at every position: the same for every head",
              {}};
    case TermsKind::score_terms:
      return {"score terms",
              "the encoding's score terms with every key set to 0: biases exactly; terms of the "
              "query (Shaw's q.a^K, Transformer-XL's (b)+(d), DeBERTa's c2p) for the last query "
              "of the first text at the first length (1x by default); terms that read the key "
              "(XL's (c), DeBERTa's p2c) left out",
              {}};
    case TermsKind::qk_response:
      return {"q.k response",
              "the q.k response of '" + encoding.type +
                  "' (a rotation of q and k, as RoPE) with q = k = (1, ..., 1) at every position "
                  "(RoFormer's long-term decay): the same for every head",
              {}};
    case TermsKind::none: break;
  }
  return {"none",
          "'" + encoding.type +
              "' has no positional term in the score: positions (if any) are added to the "
              "embeddings, mixed with the content before attention",
          {}};
}

// Scores [H, K] of layer n for the query at D and the keys at 0 .. D (geometry g).
std::vector<float> layer_scores(TransformerLM<float>& model, TermsKind kind, int n,
                                const AttentionGeometry& g) {
  Encoding<float>& enc = model.encoding();
  const int H = g.n_heads, dh = g.d_head, d = H * dh, K = g.k_len;
  const float scale = enc.score_scale(dh);
  std::vector<float> q(d, 1.0f), k(std::size_t(K) * d, 0.0f), scores(std::size_t(H) * K, 0.0f);
  if (kind == TermsKind::two_maps) {
    std::fill(k.begin(), k.end(), 1.0f);
    enc.scores_forward(n, g, q.data(), k.data(), scale, scores.data());
  } else if (kind == TermsKind::score_terms) {
    const auto& queries = model.block(n).attn.queries();  // [1, L, d] of the last forward
    const std::size_t last = queries.shape(1) - 1;
    std::copy_n(queries.data() + last * d, d, q.data());
    enc.scores_forward(n, g, q.data(), k.data(), scale, scores.data());
  } else {
    // q.k response: scale * R(D) q . R(D - d) k, per head, in double.
    std::fill(k.begin(), k.end(), 1.0f);
    enc.qk_forward(n, g, q.data(), k.data());
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < K; ++j) {
        double dot = 0;
        for (int c = h * dh; c < (h + 1) * dh; ++c)
          dot += double(q[c]) * k[std::size_t(j) * d + c];
        scores[std::size_t(h) * K + j] = float(scale * dot);
      }
  }
  return scores;
}

}  // namespace

PositionalTerms positional_terms(TransformerLM<float>& model, const EncodingConfig& encoding,
                                 int max_distance) {
  const TermsKind kind = kind_of(model.encoding());
  PositionalTerms terms = described(kind, encoding);
  if (kind == TermsKind::none) return terms;
  const ModelConfig& m = model.config();
  const int H = m.n_heads, dh = m.d_model / H;
  const int D = max_distance, K = D + 1;
  std::vector<std::int64_t> q_pos = {D}, k_pos(K);
  for (int j = 0; j < K; ++j) k_pos[j] = j;  // key j is at distance D - j
  const AttentionGeometry g{1, 1, D, K, H, dh, 0, q_pos.data(), k_pos.data()};
  for (int n = 0; n < m.n_layers; ++n) {
    const std::vector<float> scores = layer_scores(model, kind, n, g);
    std::vector<std::vector<float>>& heads = terms.layers.emplace_back(H);
    for (int h = 0; h < H; ++h)
      for (int dist = 0; dist <= D; ++dist)
        heads[h].push_back(scores[std::size_t(h) * K + (D - dist)]);
  }
  return terms;
}

}  // namespace poslab
