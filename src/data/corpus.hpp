// The data side of language modelling: bytes in, batches of (input, next-token target) out.
//
// poslab models bytes, so a token is simply a byte value 0..255 and there is no tokenizer. The
// default corpus is Debian's `fortunes` package (/usr/share/games/fortunes): about 2.6 MB of
// short English texts, enough for a small model to learn something in minutes on a CPU.
//
// Four pieces, in the order a training run uses them:
//   read_corpus            a file or a directory of text files -> one byte vector
//   split_corpus           bytes -> train tokens (first part) + validation tokens (last part)
//   unigram_cross_entropy  the loss of a model that ignores context: the baseline to beat
//   StreamBatcher          train tokens -> an endless sequence of [B, L] batches laid out for
//                          Transformer-XL style segment recurrence (see the class comment)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch_source.hpp"

namespace poslab {

// A file -> its bytes. A directory -> the concatenation, in file-name order, of its plain-text
// files. In a directory we skip what is not a text file of its own:
//   *.dat         the index files `strfile` writes next to each fortune file (binary)
//   *.u8          in the fortunes package, symlinks to the UTF-8 version of the same file
//   symlinks      they point at files we would otherwise read twice
//   hidden files  (.something) editor backups, .gitignore and the like
//   subdirectories (we do not recurse)
//   files containing a NUL byte (text never does; this keeps stray binaries out)
// A path naming a file directly is read as it is: the caller chose it.
// Throws std::runtime_error naming the path when it does not exist, cannot be read, is empty,
// or is a directory without any plain-text file.
std::vector<std::uint8_t> read_corpus(const std::string& path);

// Train and validation tokens. The split is by position, not random: the last part of the corpus
// is validation, so validation text is never seen during training, not even as a neighbour.
struct CorpusSplit {
  std::vector<std::int32_t> train;
  std::vector<std::int32_t> valid;
};

// The last round(n * valid_fraction) bytes become `valid`, the rest `train`; each byte becomes
// the token of the same value (0..255). valid_fraction must lie in [0, 1).
CorpusSplit split_corpus(const std::vector<std::uint8_t>& bytes, double valid_fraction);

// Cross-entropy, in nats per token, of `valid` under the unigram distribution of `train` with
// add-one (Laplace) smoothing:
//   p(v) = (count_train(v) + 1) / (|train| + vocab)
//   H    = -(1 / |valid|) * sum_i log p(valid_i)
// A model that has learnt nothing about context reaches this number; anything useful beats it.
// Tokens must lie in [0, vocab); `valid` must not be empty.
double unigram_cross_entropy(const std::vector<std::int32_t>& train,
                             const std::vector<std::int32_t>& valid, int vocab);

// Batch is defined in data/batch_source.hpp.

// The Transformer-XL training stream (Dai et al., 2019, "Transformer-XL", section 3.2).
//
// The n tokens are cut into B contiguous streams of S = n / B tokens each (the last n mod B
// tokens are dropped); stream b is tokens[b*S, (b+1)*S). Batch t takes columns [t*L, (t+1)*L)
// of every stream as inputs and the same columns shifted by one as targets:
//
//   stream b:  | batch 0 | batch 1 | batch 2 | ...      each box is L tokens
//   inputs [b, i] = stream_b[t*L + i]
//   targets[b, i] = stream_b[t*L + i + 1]
//
// A batch therefore needs L + 1 tokens of each stream, and a pass has (S - 1) / L batches.
// Why this layout: row b of batch t+1 starts exactly where row b of batch t ended, so the hidden
// states a model caches from batch t (its "memory") are the true left context of batch t+1.
// Segment recurrence can be added to a model without touching the data.
//
// After the last batch of a pass, next() wraps around to batch 0 and sets first_of_pass, which
// tells the trainer that the memory no longer continues the text and must be cleared.
class StreamBatcher : public BatchSource {
 public:
  // Throws std::runtime_error if batch or len is not positive, or if the tokens cannot fill a
  // single batch (fewer than batch * (len + 1) tokens).
  StreamBatcher(std::vector<std::int32_t> tokens, int batch, int len);

  // Fills `out` with batch t and advances to t + 1 (or back to 0 at the end of a pass).
  // The stream is endless, so this always returns true; callers bound their loops by step count
  // or by batches_per_pass().
  bool next(Batch& out) override;

  // Back to batch 0: the next call to next() starts a pass.
  void reset() override { next_index_ = 0; }

  // (S - 1) / L: how many batches one pass over the streams yields.
  std::int64_t batches_per_pass() const override { return batches_per_pass_; }

  int batch() const override { return batch_; }
  int len() const override { return len_; }
  std::int64_t stream_length() const { return stream_length_; }  // S

 private:
  std::vector<std::int32_t> tokens_;
  int batch_;                     // B
  int len_;                       // L
  std::int64_t stream_length_;    // S = n / B
  std::int64_t batches_per_pass_; // (S - 1) / L
  std::int64_t next_index_ = 0;   // t of the batch the next call returns
};

}  // namespace poslab
