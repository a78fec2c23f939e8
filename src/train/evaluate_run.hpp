// The evaluations of a finished run, what `poslab eval` does: the run's config.toml (with
// --set overrides) and checkpoint/ read back, one evaluation mode (eval/) run on it, its rows
// written into the run directory beside eval.json. A --set the evaluation would not read, or
// one that would replace an earlier evaluation's numbers made with other --set, is refused
// before anything is computed. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace poslab {

// The chunked mode at one setting; seq_len 0 / mem_len -1 mean "as trained". Writes
// DIR/eval_L<seq-len>_M<mem-len>.json. token_losses_file, if not empty, receives the loss of
// every scored token (.npy, float32).
int run_eval(const std::string& run_dir, const std::vector<std::string>& overrides, int seq_len,
             int mem_len, const std::string& token_losses_file = "");

// The streaming evaluation (eval.stream_*, from the run's config with `overrides`;
// eval/streaming_cache.hpp): one row per mode of eval.stream_modes, written to
// DIR/eval_stream.json, and the loss along the stream to DIR/eval_stream.csv.
int run_eval_stream(const std::string& run_dir, const std::vector<std::string>& overrides);

// The passkey grid (eval.passkey_*, from the run's config with `overrides`): one row per
// (length, depth) cell, written to DIR/eval_passkey.json.
int run_eval_passkey(const std::string& run_dir, const std::vector<std::string>& overrides);

}  // namespace poslab
