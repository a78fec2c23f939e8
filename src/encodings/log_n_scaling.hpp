// Log-n attention scaling, for any encoding: the logits of query row i are multiplied by
//
//   f(n_i) = max(1, ln n_i / ln L)          (= max(1, log_L n_i))
//
// where L = option `log_n_len` (the length the model was trained at) and n_i = the number of keys
// query i attends to (the keys its softmax runs over: i + M + 1 with M memory rows, at most the
// window with same_length). docs/conventions.md, "Log-n scaling"; docs/05-beyond.md.
//
// Why. The entropy of a softmax over n logits grows like ln n (Su, kexue.fm 8823): a model
// trained at length L, read at n > L, spreads its attention thinner than it learned to. Scaling
// the logits by log_L n keeps the entropy near what it was at L. Clipping at 1 leaves every
// length up to L exactly as trained.
//
// Option `log_n`:
//   off     (default) nothing changes, bit for bit
//   eval    only in evaluation-only passes (Qwen's use_logn_attn: `not self.training`); training
//           passes are unscaled, so a model trained without it can be read with it
//   always  in training and evaluation (Chiang & Cholak 2022; Su's log_512 n, here clipped at 1)
//
// Which n. Qwen-7B (modeling_qwen.py) indexes its table by the key position of each query row,
// logn_tensor[key_len - q_len + i], i.e. n = t + 1 with t the query's position in the sequence:
// the number of keys a causal query sees when the cache holds the whole sequence. poslab uses
// that count directly, n_i = the keys visible to query i (AttentionGeometry::first_visible ..
// last_visible). It equals Qwen's t + 1 for a pass from position 0 without memory, and differs
// from a position-based n where they should: with memory (keys before the memory are not seen),
// with same_length's window, with continued or randomized positions (a position is not a count).
// It depends on no absolute position, so a relative encoding stays relative with log-n on.
//
// Logits, not q. Qwen multiplies q after RoPE; poslab multiplies the whole logit row
// S_ij = scale q_i.k_j + (encoding terms) by f(n_i), after the encoding's score hook and before
// the mask and softmax. For encodings without score terms (none, sinusoidal, learned, rope, xpos)
// the two are the same function (f scale q.k either way, up to rounding); for score-term
// encodings (ALiBi, T5, KERPLE, FIRE, Shaw, Transformer-XL, DeBERTa) scaling the logits also
// scales their biases, which is Su's form softmax(f(n) S) (a temperature on the whole logit).
// Not offered: Su's unclipped log_512 n (< 1 below 512) and Chiang & Cholak's ln n on the query
// input (before the projection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/options.hpp"

namespace poslab {

struct LogNScaling {
  enum class Mode { off, eval, always };
  Mode mode = Mode::off;
  std::int64_t len = 0;  // L

  // Whether a pass scales its logits (inference_only: an evaluation-only pass).
  bool active(bool inference_only) const {
    return mode == Mode::always || (mode == Mode::eval && inference_only);
  }
  // f(n) = max(1, ln n / ln L), for a query that attends to n keys.
  double factor(std::int64_t n) const;
};

// "off", "eval", "always": the values of option `log_n`.
const std::vector<std::string>& log_n_names();

// The options `log_n` and `log_n_len`, which every registered encoding has (registry.cpp).
std::vector<OptionSpec> log_n_options();

// What is wrong with them (a config rule): log_n_len < 2 with log_n on (ln L must be > 0), or
// log_n_len set with log_n off (it would do nothing).
std::optional<ConfigProblem> log_n_problem(const Options& o);

// Reads them back; options without the keys (a hand-made Options in a test) mean off. Throws
// std::invalid_argument on what log_n_problem reports.
LogNScaling log_n_from_options(const Options& o);

}  // namespace poslab
