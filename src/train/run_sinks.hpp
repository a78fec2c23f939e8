// `poslab sinks` on a finished run: the attention-sink diagnostic (eval/sink_diagnostic.hpp)
// of its checkpoint, the mass of every layer's and head's attention on the first key over
// windows of a split, written beside the run (run_sinks.cpp says what and how).
#pragma once

#include <iosfwd>
#include <string>

namespace poslab {

struct SinksOptions {
  std::string run_dir;     // a finished run (config.toml + checkpoint/)
  std::string split;       // "valid" | "test"; "" = the run's eval.split
  int window = 0;          // tokens per window; 0 = train.seq_len
  long windows = 100;      // windows from the split's start; 0 = all it holds
  int first_query = -1;    // summary over queries [first_query, window); -1 = window / 2
  double threshold = 0.5;  // a head with first_key_mass >= threshold is counted as a sink
  std::string out_dir;     // "" = RUN/sinks
};
// Writes out_dir/sink_heads.csv, out_dir/sink_profile.csv and out_dir/sinks.json.
int run_sinks(const SinksOptions& options, std::ostream& out);

}  // namespace poslab
