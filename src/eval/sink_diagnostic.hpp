// The attention-sink diagnostic: how much of each head's attention lands on the first key.
//
// Xiao et al. (2023, "Efficient Streaming Language Models with Attention Sinks", section 3.1 and
// Figure 2) find that in trained LMs many heads of the deeper layers put a large share of every
// query's attention on the first token(s) of the text, whatever those tokens are: an "attention
// sink" that soaks up the softmax's surplus. Window attention breaks exactly when those first
// keys are evicted, and keeping them restores it. So before a sink test means anything, a model
// must be shown to HAVE sink heads. This diagnostic measures it.
//
// The reading. The stream (a split of the corpus) is cut into W consecutive windows of `window`
// tokens; each window is read as one fresh segment from position 0 with no memory (the training
// condition of a model trained at seq_len = window). Every layer n and head h gives weights
// P^(n,h) [window, window] (nn/attention.hpp, causal; with a sink logit a row may sum to < 1).
// For each query index i the diagnostic averages, over the W windows,
//
//   a_{n,h}(i) = mean_w P^(n,h)_w[i, 0]        the mass on the first key       (profile)
//   u(i)       = 1 / n_i                       the same for uniform attention over the n_i
//                                              keys query i sees (n_i = i + 1, causal)
//
// and summarises over the queries i in [first_query, window):
//
//   first_key_mass = mean_i a_{n,h}(i)      uniform_mass = mean_i u(i)      ratio = the quotient
//
// A model with a prepended sink token (model.sink_token) reads every window as [SINK, window]:
// key 0 is then the sink, query i (the window's token i) sees n_i = i + 2 keys, and the profile
// stays indexed by the window's tokens.
//
// A head that parks all its attention on key 0 reads first_key_mass = 1; a head that spreads it
// evenly reads uniform_mass (about 0.022 for the second half of a window of 64). The default
// first_query = window / 2 leaves out the early queries, which see few keys, so that "mass on
// key 0" is not inflated by queries with only a handful of keys to choose from.
//
// Nothing here labels a head a sink: the numbers are the result. The command (`poslab sinks`)
// adds a threshold for its one-line summary.
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.hpp"

namespace poslab {

struct SinkDiagnosticOptions {
  int window = 64;       // tokens per window (the segment length of the read)
  long windows = 0;      // W windows from the stream's start; 0 = as many as the stream holds
  int first_query = -1;  // summary over queries [first_query, window); -1 = window / 2
  int batch = 8;         // windows per forward pass
};

struct SinkDiagnostic {
  int layers = 0, heads = 0, window = 0, first_query = 0;
  long windows = 0;  // W, windows read
  // [layers][heads][window]: a_{n,h}(i), the mean mass on key 0 of query i over the windows.
  std::vector<std::vector<std::vector<double>>> profile;
  std::vector<double> uniform;  // [window]: u(i) = 1 / n_i
  // [layers][heads]: the summaries over queries [first_query, window).
  std::vector<std::vector<double>> first_key_mass;
  double uniform_mass = 0;
};

// Reads tokens[0 .. W * window - 1] window by window as described above. The model's memory,
// evaluation-only mode and randomized positions are set for the pass and restored afterwards
// (its memory is reset). Throws std::invalid_argument if the stream holds no whole window or
// the options are out of range.
SinkDiagnostic attention_sink_diagnostic(TransformerLM<float>& model,
                                         const std::vector<std::int32_t>& tokens,
                                         const SinkDiagnosticOptions& options);

}  // namespace poslab
