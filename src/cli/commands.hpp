// The subcommands of the `poslab` executable besides train, eval and longrope-search
// (train/run.hpp, train/evaluate_run.hpp, train/longrope_search_run.hpp). main.cpp parses the
// command line and calls these; each returns the process exit code. Errors are thrown
// (ConfigError, std::runtime_error) and reported by main.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace poslab {

// `poslab bench` (bench.cpp; the measurements are in src/bench/). Each checks the memory its
// measurements need before any, then prints a table.
// Training throughput at cfg's model size, against the machine's sgemm GFLOP/s.
int run_bench(const Config& cfg, int steps);

// Every registered encoding (default options) at cfg's size, with memory 0 and mem_len:
// tokens/s and the overhead against 'none'.
int run_bench_comparison(const Config& cfg, int steps, int mem_len);

// Evaluation speed of the vanilla sliding window, its per-segment variant and state reuse at
// each attention length (Dai et al. 2019, Table 9); writes a CSV if csv_path is not empty.
int run_bench_reuse(const Config& cfg, const std::vector<int>& attn_lens, long targets,
                    const std::string& csv_path);

// Peak resident memory of evaluation (one batch row, segment train.seq_len) at each memory
// length, through the evaluation-only ("inference", scores in chunks of at most
// score_budget_mb MiB) or the training forward.
int run_bench_eval_memory(const Config& cfg, const std::vector<int>& mem_lens,
                          const std::string& path, double score_budget_mb,
                          const std::string& csv_path);

// Every registered encoding (and its naive path, where it has one) at each segment length, with
// batch x segment = tokens_per_step and memory = segment: tokens/s, counted FLOPs per token,
// GFLOP/s and the ratio to 'none'; writes a CSV if csv_path is not empty.
int run_bench_scaling(const Config& cfg, int steps, const std::vector<int>& segments,
                      int tokens_per_step, const std::string& csv_path);

// `poslab encodings --describe rope` (describe.cpp): the per-pair frequency table of cfg's RoPE
// configuration (its scaling included) for a call covering `length` keys (0: train.seq_len +
// memory.mem_len), as an aligned table or as CSV.
int describe_encoding(const Config& cfg, long length, bool csv, std::ostream& out);

// `poslab attention` (attention.cpp): the attention weights of a trained run on a given text
// (computed by eval/attention_weights.hpp).
struct AttentionOptions {
  std::string run_dir;          // a finished run (config.toml + checkpoint/)
  std::string input;            // the text whose attention is dumped (bytes, batch 1)
  std::string mem_text;         // run through the model first to fill its memory
  bool mem_text_given = false;  //   (only if the run has memory.mem_len > 0)
  std::string out_dir;          // "" = RUN/attention
};
// Writes out_dir/layer{n}.npy (probs [H, L, K], float32) and out_dir/tokens.json.
int run_attention(const AttentionOptions& options, std::ostream& out);

// Runs /usr/bin/python3 <source tree>/notebooks/SCRIPT ARGUMENTS... (python_script.cpp) and
// returns its exit code; throws if the interpreter or the script is missing.
int run_python_script(const std::string& script_name, const std::vector<std::string>& arguments);

// `poslab report` (report.cpp): a study's results as a static site, built by
// notebooks/report.py; out_dir "" = STUDY_DIR/report.
struct ReportOptions {
  std::string study_dir;
  std::string out_dir;  // "" = STUDY_DIR/report
  bool debug = false;   // a Python error as its traceback, not one line
};
int run_report(const ReportOptions& options, std::ostream& out);

// `poslab explore` (explore.cpp): the attention explorer of one or more trained runs (what it
// shows is computed by eval/attention_maps.hpp and eval/positional_terms.hpp).
struct ExploreOptions {
  std::vector<std::string> runs;          // finished language-model runs
  std::string out_dir;                    // "" = explorer/
  std::string text_file;                  // a text of the user's, besides the test split's
  int texts = 4;                          // windows of the first run's test split
  std::vector<int> factors = {1, 2, 4, 8};  // input lengths, x train.seq_len
};
int run_explore(const ExploreOptions& options, std::ostream& out);

}  // namespace poslab
