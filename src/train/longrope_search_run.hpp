// `poslab longrope-search` on a finished rope run: LongRoPE's evolutionary search
// (eval/longrope_search.hpp) driven over a directory of its own, --out, which it holds, fills
// and resumes as `poslab train` does a run directory (longrope_search_run.cpp says what it
// writes).
//
// Where the search lives. Its algorithm and its fitness are evaluation, in eval/: the search
// trains no parameter, every step of it reads the trained model (its validation loss at the
// target length, eval/chunked.hpp's evaluate, with rope's long_factor = the candidate), and
// what it finds is an encoding setting for later runs, not a model. This file is the part that
// owns a directory (a lock, a claim, evaluations.csv to resume from, stop requests), which is
// train/'s business (run_dir.hpp, run_claim.hpp), as for a run.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "eval/longrope_search.hpp"

namespace poslab {

struct LongRopeSearchCommand {
  std::string run_dir;
  std::vector<std::string> overrides;  // --set, applied to the run's config
  int target_len = 0;                  // L'
  std::string out_dir;                 // --out (required): the search's own directory
  std::string seeds = "pi,ntk,yarn";
  int eval_batches = 4;                // validation batches per fitness evaluation
  int eval_rows = 8;                   // rows per batch
  LongRopeSearchOptions options;       // factor is set from target_len / train.seq_len
};

// Searches, printing its progress to `out`, and writes OUT/search.json, evaluations.csv,
// fitness.csv and longrope_factors.toml (last). Returns 0, or 128 + signal when a stop request
// ended it (the same command resumes). The figure OUT/fitness.png is the caller's to draw
// (notebooks/longrope_fitness.py on OUT/fitness.csv).
int run_longrope_search_command(const LongRopeSearchCommand& command, std::ostream& out);

}  // namespace poslab
