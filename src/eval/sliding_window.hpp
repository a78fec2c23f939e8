// Evaluation WITHOUT state reuse: the "vanilla" evaluation that Transformer-XL's state reuse
// replaces (Dai et al. 2019, section 3.2 and Table 9; the vanilla model is Al-Rfou et al. 2019).
//
// A model that cannot reuse the hidden states of earlier segments must recompute its whole
// context for every prediction. To give token t a context of A - 1 tokens it runs on the window
//
//     inputs  x[t-A+1 .. t]          (A tokens)
//     target  x[t+1]                  scored at the window's last position only
//
// and then slides the window by one token. Every prediction costs a full forward pass over A
// tokens: O(A) work per token (O(A^2) for attention), against O(1) segments per L tokens with
// reuse (state_reuse_evaluation below), where a segment of L tokens attends to M cached states
// and all L predictions come out of one pass. The ratio of the two is Table 9's speedup.
//
// The per-segment variant (stride S > 1) is the usual compromise: the window moves by S tokens
// and scores its last S positions, so a token sees between A - S and A - 1 tokens of context and
// the work per token is divided by S.
//
// Windows are batched: up to `batch` windows ending at consecutive targets run as one [B, A]
// forward pass. Targets whose window would start before the first token are skipped (every
// scored token has its full A - S .. A - 1 tokens of context).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "model/transformer.hpp"
#include "eval/chunked.hpp"

namespace poslab {

struct SlidingWindowOptions {
  int attn_len = 128;       // A: tokens in every window
  int stride = 1;           // S: 1 = a forward pass per predicted token (the vanilla model)
  long max_targets = 0;     // predictions to score (0 = as many as the tokens allow)
  int batch = 16;           // windows per forward pass
};

// Mean loss (nats/token) and accuracy over the scored targets; loss_by_position is empty.
// The model runs without memory; its memory length is restored afterwards. token_losses, if
// given, receives the loss of every scored target in stream order: targets tokens[A], ...
// (the streaming cache's "recompute" baseline, eval/streaming_cache.hpp, reads them by
// position).
EvalResult evaluate_sliding_window(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& tokens,
                                   const SlidingWindowOptions& options,
                                   std::vector<float>* token_losses = nullptr);

// Evaluation WITH state reuse over the same tokens, for timing beside the sliding window: one
// stream (batch 1 row per stream, `batch` streams), segments of seq_len tokens, memory mem_len.
// Scores max_targets predictions (0 = every one).
EvalResult evaluate_with_reuse(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                               int seq_len, int mem_len, long max_targets, int batch);

// A sliding-window setting of the chunked mode (eval.stride; kinds main_sliding,
// length_sliding) on the stream of eval.split: the scored bytes of the chunked setting of the
// same length (eval.batches x rows x seq_len), rounded up to whole windows of `stride` bytes;
// eval.batches = 0: the whole split, less the first seq_len - stride bytes, which no window
// scores. No loss by position: every scored byte is at one of the window's last `stride`
// positions. Returns `row` with the numbers added; one line to `out`.
nlohmann::json sliding_window_row(TransformerLM<float>& model, const Config& cfg,
                                  const EvalSetting& s, nlohmann::json row, std::ostream& out);

}  // namespace poslab
