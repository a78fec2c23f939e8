// The whole configuration of a run, as plain structs (nanoGPT style). A TOML file fills it
// (config/load.hpp); every field has a sensible default, so a config file only names what it
// changes. Section and key names here are the ones used in TOML: `[model] d_model = 128`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/options.hpp"

namespace poslab {

struct ModelConfig {
  int vocab_size = 256;        // byte-level: every byte value is a symbol
  int d_model = 128;           // d
  int n_layers = 4;            // N
  int n_heads = 4;             // H; d_head = d_model / n_heads
  int d_inner = 512;           // feed-forward hidden size
  std::string activation = "relu";  // "relu" (the papers) or "gelu"
  bool pre_ln = false;         // false: post-LN as in Vaswani et al. and Transformer-XL
  bool tie_embeddings = false; // output projection = token embedding^T
  // A learned sink logit per head and layer (gpt-oss; nn/attention.hpp): a scalar s_h joins each
  // softmax denominator with no value, P_ij = exp(S_ij) / (exp(s_h) + sum_j' exp(S_ij')), so a
  // query may attend to "nothing". Starts at 0 (softmax_1) and trains, without weight decay.
  bool sink_logit = false;
  // A prepended learned sink token (Xiao et al. 2023, section 3.3: "a learnable placeholder
  // token" at the start of every pre-training sample): one extra vocabulary id, vocab_size, with
  // its own embedding row (the table is [vocab_size + 1, d]; the output layer stays over the
  // vocab_size bytes, so the sink is never predicted). Every sequence the model starts with an
  // empty memory, in training and in evaluation, reads [SINK, x_0 .. x_{L-1}]: L + 1 positions,
  // the sink at position 0 (offset + 0) and x_i at offset + i + 1; the sink's own output is not
  // scored, so the scored predictions are exactly those without it (model/transformer.hpp).
  // Language models without memory in training (checked by the config loader).
  bool sink_token = false;
  double init_std = 0.02;      // N(0, init_std) for weight matrices and tables
};

struct EncodingConfig {
  std::string type = "none";   // a name from `poslab encodings`
  Options options;             // that encoding's options, defaults filled in
};

struct MemoryConfig {
  int mem_len = 0;                  // M: cached hidden states per layer (0 = no recurrence)
  bool same_length = false;         // every query sees exactly mem_len keys
  bool continue_positions = false;  // absolute encodings: positions keep counting across segments
  bool half_loss = false;           // train only on the second half of each segment (Dai et al.)
};

// The text corpus of task "lm" (data/corpus.hpp explains reading and splitting in full).
struct DataConfig {
  // A text file, or a directory read recursively: each file is one document, named by its path
  // relative to `path`. Default: the fortunes of Debian's `fortunes` package.
  std::string path = "/usr/share/games/fortunes";
  // Which files of a directory are documents: fnmatch(3) globs matched against the relative path
  // ("email/parser.py"), where `*` also matches '/', so "*.py" finds .py files at any depth and
  // "test/*" everything under test/. include = [] keeps every plain-text file (hidden files,
  // *.dat, *.u8 and files with a NUL byte are then skipped silently); exclude wins over include.
  std::vector<std::string> include = {};
  std::vector<std::string> exclude = {};
  double valid_fraction = 0.1;  // share of the corpus bytes in the validation split
  double test_fraction = 0.0;   // share in the test split: held out from training and from
                                // the validation evaluations; the final evaluation plan reads
                                // it with eval.split = "test" (0 = no test split)
  // "position": the documents back to back, cut by position: [train | valid | test], test last
  //             (with test_fraction 0, exactly the split of earlier poslab versions).
  // "file":     whole documents go to test, valid or train, in the order of a hash of their
  //             relative path; no document is in two splits.
  std::string split = "position";
  // Written between two documents of a split in "file" mode, so a model sees where one ends.
  // "position" mode does not use it: its bytes stay those of earlier versions.
  std::string separator = "\n\n";
};

struct TrainConfig {
  int seq_len = 64;         // L: segment (target) length
  int batch_size = 16;      // B: number of contiguous streams
  int steps = 1000;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;  // cosine decays to lr * min_lr_ratio
  int warmup_steps = 100;     // linear warm-up from 0
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double grad_clip = 1.0;     // global gradient norm; 0 = off
  std::uint64_t seed = 1;
  int log_every = 50;
  int eval_every = 0;         // 0 = only at the end
  int eval_batches = 32;      // validation batches of the evaluations *during* training (eval_every)
  // Passkey retrieval read during training (train/passkey_curve.hpp): every eval_every steps and
  // after the last, this many instances per cell of the eval.passkey grid, on the validation
  // split, into RUN/passkey_curve.csv. 0 = off. It changes nothing in what a run computes.
  int eval_passkey_instances = 0;
  int threads = 0;            // BLAS/OpenMP threads, 0 = all cores
  // Steps between saves of the training state (RUN/resume/) that `poslab train --resume`
  // continues from; also saved after the last step and when stopped by SIGTERM or SIGINT.
  // 0 = only when stopped. It changes nothing in what a run computes.
  int save_state_every = 1000;
  // Randomized positions (Ruoss et al. 2023): in training, the positions of a segment are a
  // sorted random sample of distinct integers from [0, max_position) instead of 0..L-1, so the
  // model meets large positions and distances during training; evaluation stays contiguous.
  bool randomized_positions = false;
  int max_position = 1024;
  // PoSE, positional skip-wise training (Zhu et al. 2023; data/pose_sampling.hpp): train at
  // seq_len L with position ids that skip, in two chunks, to cover a target length L' =
  // pose_target_len > L; every id is below L'. Language models without memory only. 0 = off.
  // Evaluation keeps plain positions. Pair it with rope's scaling for L' (e.g. linear, factor
  // L'/L), as the paper does.
  int pose_target_len = 0;
  // How chunk lengths and skips are drawn: "code" (the released code: chunk 1 at most half the
  // row, at positions from 0) or "paper" (§3.2: any division, both chunks skipped).
  std::string pose_variant = "code";
  // Passkey instances mixed into the training rows of a language model (tasks/passkey_mix.hpp):
  // each row is replaced by one with this probability (0 = never; the same rows and instances
  // for every arm with the same seed). Filler as eval.passkey_filler, from the train split; prompt
  // as eval.passkey_format.
  double passkey_fraction = 0.0;
  // Fine-tuning (train/init_from.hpp): a finished run's directory whose parameters this run
  // starts from instead of a random initialisation ("" = none). Every parameter must keep its
  // shape; everything else (segment, batch, steps, learning rate and schedule, the encoding's
  // options that are not parameters, the data) may change.
  std::string init_from = "";
  // With init_from: also start from the parent's Adam moments, their bias correction continuing
  // from the parent's step count. Default: the optimizer starts fresh.
  bool init_optimizer = false;
};

// What the model is trained on: a text corpus, or a generated task (src/tasks).
struct TaskConfig {
  std::string name = "lm";  // "lm": language modelling on data.path; else a task of `poslab tasks`
  Options options;          // that task's options, defaults filled in
};

struct EvalConfig {
  int seq_len = 0;   // the main evaluation: 0 = train.seq_len
  int mem_len = -1;  //                       -1 = memory.mem_len
  // Length generalization: also evaluate at segment train.seq_len * f for each f (with the
  // trained memory length). Empty = none.
  std::vector<double> length_factors = {};
  // State reuse: also evaluate with memory train.seq_len * f for each f (segment train.seq_len).
  std::vector<double> memory_factors = {};
  // Sliding-window evaluation (Press et al. 2022, Peng et al. 2023; eval/sliding_window.hpp),
  // language models only: beside the main evaluation and each length factor (non-overlapping
  // chunks), a row scored with windows of that length moving by `stride` bytes, each window
  // scoring its last `stride` bytes (so every scored byte sees at least length - stride bytes
  // before it), without memory. -1 = off; otherwise 1 <= stride <= the shortest such length.
  int stride = -1;
  // Loss by copy distance (eval/copy_distance.hpp, docs/06), language models only: every
  // chunked evaluation row (main, length, memory) also reports the mean loss of the bytes that
  // continue a string of at least copy_min_match bytes seen d bytes earlier in the segment,
  // bucketed by d in powers of two, beside the bytes with a wrong continuation or no match.
  bool copy_distance = false;
  int copy_min_match = 8;  // k >= 1: the shortest repeated string that counts as a match
  int batches = 16;  // batches per setting of the final evaluation plan (0 = one whole pass;
                     // a generated task's evaluation set is this many batches, 0 -> 16)
  // Which held-out data the final evaluation plan reads: "valid" while choosing settings,
  // "test" (a corpus' test split, a task's test draw) only for final results.
  std::string split = "valid";
  int batch_size = 0;  // rows per evaluation batch (0 = train.batch_size); fewer rows bound the
                       // memory of evaluating long segments, which grows with rows x L x (M + L)
  // The in-distribution gate of a generated task: exact match on its largest training sizes
  // must reach this (summary column in_distribution_ok). Language models: loss below the
  // bigram baseline of the evaluation split.
  double gate_threshold = 0.95;
  // Passkey retrieval (tasks/passkey.hpp, eval/passkey_eval.hpp), language models only: at
  // every (length, depth) cell, passkey_instances instances of input length
  // round(train.seq_len * f) with the key line at depth d. Empty factors = no passkey evaluation.
  std::vector<double> passkey_length_factors = {};
  std::vector<double> passkey_depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int passkey_instances = 100;  // per cell: Wilson's 95% interval 0.40-0.60 at 0.5, 0-0.037 at 0
  // "sentence_shifted": the sentence from a random offset, so no landmark follows the key line
  std::string passkey_filler = "corpus";  // "corpus": text of eval.split; "sentence": the paper's
  // The prompt (tasks/passkey.hpp), of the evaluation grid and of the training mix alike:
  // "paper" (104 fixed bytes, L >= 103) or "compact" (28 fixed bytes, L >= 27).
  std::string passkey_format = "paper";
  std::uint64_t passkey_seed = 1;  // the instances (keys, windows); the same for every run
  // Streaming evaluation with attention sinks (StreamingLLM; eval/streaming_cache.hpp),
  // language models with a relative encoding only: the first stream_length bytes of eval.split,
  // read token by token with a cache of the stream_sinks first tokens and the stream_recent
  // most recent ones, beside the baselines of stream_modes; every mode scores the bytes after
  // the first stream_sinks + stream_recent + 1. 0 = off.
  int stream_length = 0;
  int stream_sinks = 4;   // S >= 0
  int stream_recent = 0;  // R >= 1; 0 = train.seq_len - 1 - stream_sinks (S + R + 1 = L keys)
  std::string stream_positions = "cache";  // "cache": StreamingLLM's pos-shift; "text"
  std::vector<std::string> stream_modes = {"sinks", "window", "recompute", "dense"};
};

struct Config {
  ModelConfig model;
  EncodingConfig encoding;
  MemoryConfig memory;
  DataConfig data;
  TrainConfig train;
  EvalConfig eval;
  TaskConfig task;
  std::string out_dir = "runs/default";  // where `poslab train` writes the run
};

}  // namespace poslab
