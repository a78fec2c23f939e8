// Streaming evaluation with attention sinks (StreamingLLM, Xiao et al. 2023) and its three
// baselines: a language model reads one long stream token by token, as it would while
// generating, keeping only a bounded cache of the past.
//
// StreamingLLM's cache (`StartRecentKVCache` in mit-han-lab/streaming-llm) holds the S first
// tokens of the stream, the "attention sinks", and the R most recent ones. Token t (0-based,
// predicting token t + 1) attends to
//
//     {0, ..., S-1}  U  {t-R, ..., t-1}  U  {t}          S + R + 1 keys once t > S + R
//
// and after the step the oldest recent token, t - R, is evicted (the sinks never are). The
// paper's point: softmax attention dumps its surplus mass on the first tokens, so a plain window
// (S = 0) that evicts them breaks the model; keeping 1..4 sinks restores it (Tables 1-3).
//
// The cache here is Transformer-XL's memory (model/block.hpp): each layer keeps its INPUTS of
// earlier tokens, mem [1, M, d], and computes their keys and values again at every step, with
// that step's positions. StreamingLLM's pos-shift needs exactly that (its cache holds keys before
// RoPE and rotates them anew every step), so the sink policy is one rule of the memory update
// (Block::update_memory with sinks = S): keep the first S rows when evicting, then the last R.
// As with a KV cache, a cached token's state was computed once, from what was in view when it
// was read, and is never recomputed.
//
// Positions (eval.stream_positions), for the M = min(t, S + R) cached tokens and the current one:
//   cache  StreamingLLM's pos-shift (paper section 3.2; `llama_pos_shift_attention_forward`):
//          positions are indices within the cache: keys at 0, 1, ..., M, the query at M.
//          The paper's example: cache [0,1,2,3,6,7,8] decoding token 9 uses positions 0..7.
//   text   every token keeps its place in the stream: sinks at 0..S-1, recent tokens at
//          t-R..t-1, the query at t. Distances grow without bound: a relative encoding then
//          reads the sinks at distances it never saw in training. (This is not what the
//          released script does without --enable_pos_shift, which pins every new token at
//          S + R once the cache is full; docs/conventions.md, "Attention sinks
//          (StreamingLLM)".)
//
// The four modes (eval.stream_modes), all over the same stream and the same targets:
//   sinks      the cache above: S sinks + R recent.
//   window     window attention: S = 0, the last S + R tokens (the same cache size).
//   recompute  sliding window with recomputation: every prediction a fresh forward pass over the
//              last S + R + 1 tokens, at positions 0..S+R (eval/sliding_window.hpp, stride 1):
//              no cached state, O(T (S+R)^2) work. With one layer it equals `window` with cache
//              positions; with more it differs once a token is evicted, because the cached
//              states of deeper layers carry information from evicted tokens.
//   dense      everything before the token in view (no eviction), at text positions: segments
//              of `dense_segment` tokens with a memory of the whole stream read so far, which
//              gives every token the same keys as reading token by token with an unbounded cache.
//   memory     Transformer-XL's state reuse: segments of `dense_segment` tokens, each reading the
//              cached states of the S + R tokens before it (the memory M = S + R) at text
//              positions. A token sees between M and M + segment - 1 earlier tokens; evicted
//              tokens still reach it through the deeper layers' cached states, as in recompute.
//
// A model with a prepended sink token (model.sink_token; model/transformer.hpp) reads the stream
// [SINK, tokens]: the sink is stream entry 0 and token t is entry t + 1, in the cache, in its
// positions and in the S kept entries (S = 1 keeps the sink token alone, S = 0 evicts it);
// recompute's windows are [SINK, the last S + R tokens], S + R + 1 keys as in the other modes.
// The scored targets are the same tokens as without it.
//
// Scored targets: tokens[first_target .. T-1]. The evaluation plan uses first_target = S + R + 1,
// the first prediction made with a full cache (before it the four modes see the same keys).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "model/transformer.hpp"

namespace poslab {

enum class StreamPositions { cache, text };
enum class StreamMode { sinks, window, recompute, dense, memory };

StreamPositions stream_positions_from_name(const std::string& name);  // "cache" | "text"
StreamMode stream_mode_from_name(const std::string& name);  // "sinks" | "window" | ...
std::string stream_mode_name(StreamMode mode);

struct StreamOptions {
  int sinks = 4;    // S >= 0
  int recent = 60;  // R >= 1
  StreamPositions positions = StreamPositions::cache;
  long first_target = 0;   // score targets tokens[first_target ..]; 0 = S + R + 1
  int dense_segment = 64;  // dense, memory: tokens per forward pass
  int batch = 16;          // recompute: windows per forward pass
};

struct StreamResult {
  double loss = 0;                 // mean cross-entropy of the scored targets, nats per token
  long tokens = 0;                 // scored targets
  long first_target = 0;           // stream index of the first scored target
  double seconds = 0;              // wall time of the whole pass (warm-up steps included)
  std::vector<float> token_losses; // [tokens] loss of targets first_target, first_target + 1, ...
};

// The positions of step t of the sinks (and window) mode: M cached keys, memory first, then
// the current token, as described above.  [M + 1]
std::vector<std::int64_t> stream_step_positions(StreamPositions positions, int sinks, int recent,
                                                std::int64_t t);

// Reads tokens[0 .. T-1] in `mode` and scores tokens[first_target .. T-1]. The model's memory
// length and sinks are set for the pass and restored afterwards; its memory is reset.
StreamResult evaluate_stream_cache(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& tokens, StreamMode mode,
                                   const StreamOptions& options);

// The loss along the stream: the scored targets in buckets of `width` stream positions,
// [low, high) with low a multiple of width; `tokens` scored targets and their mean `loss` in each.
struct StreamBucket {
  long low = 0, high = 0, tokens = 0;
  double loss = 0;
};
std::vector<StreamBucket> stream_buckets(const StreamResult& r, int width);

// ---------------------------------------------------------------------------------------------
// The stream evaluation mode (eval.stream_length > 0)
// ---------------------------------------------------------------------------------------------

// The stream: the first eval.stream_length tokens of eval.split. Throws, naming the key, if the
// split is shorter (checked before a run starts).
std::vector<std::int32_t> stream_tokens(const Config& cfg);

// The options of the streaming modes from cfg.eval (stream_recent 0: train.seq_len - 1 - S).
StreamOptions stream_options(const Config& cfg);

// The largest evaluation the streaming modes make (dense: one row of train.seq_len queries over
// a memory of the whole stream) fits in memory, and the split holds the stream. Checked before
// anything is written; `what` names the evaluation in the error.
void check_stream_memory(const Config& cfg, const std::string& what);

// One row per mode of eval.stream_modes, kind "stream_<mode>": seq_len = the stream's length,
// mem_len = the tokens a prediction sees besides its own (S + R; dense: the stream before it,
// at most stream_length - 1), loss over the same targets (the bytes after the first S + R + 1),
// tokens_per_second = scored targets / wall seconds of the whole pass (shared machine: a
// comparison between the rows of one run, not a benchmark), and the loss along the stream in
// buckets of train.seq_len bytes (loss_by_stream_position). A mode the model cannot run is
// recorded with its error. One line per mode to `out`.
std::vector<nlohmann::json> evaluate_stream_rows(TransformerLM<float>& model, const Config& cfg,
                                                 std::ostream& out);

// eval_stream.csv of `poslab eval --stream`: the loss along the stream, one line per row and
// bucket of evaluate_stream_rows.
std::string stream_rows_csv(const std::vector<nlohmann::json>& rows);

}  // namespace poslab
