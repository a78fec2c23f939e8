// The data side of language modelling: bytes in, batches of (input, next-token target) out.
//
// poslab models bytes, so a token is simply a byte value 0..255 and there is no tokenizer. The
// default corpus is Debian's `fortunes` package (/usr/share/games/fortunes): about 2.6 MB of
// short English texts, enough for a small model to learn something in minutes on a CPU. The
// long-document corpus is Debian's Python standard library (/usr/lib/python3.11, package
// libpython3.11-stdlib): about 600 source files, many of them thousands of lines long, where
// what a line means depends on an import or a definition far above it. That is the corpus on
// which a long memory and a positional encoding that extrapolates can show what they are worth
// (experiments/python_corpus.toml has its patterns and sizes).
//
// A corpus is a list of DOCUMENTS: a file, or every file of a directory tree (recursively) that
// the include/exclude globs keep, each named by its path relative to the corpus directory.
//
// Splitting (data.split) comes in two kinds:
//   "position"  the documents back to back, cut by position: [ train | valid | test ].
//               Exactly what poslab has always done, so earlier results stay bit-identical. A
//               document may straddle a boundary; fine for fortunes, which are all alike.
//   "file"      whole documents are dealt to test, valid and train. Why: on a corpus of long
//               documents, a position cut puts the end of one module in validation and its
//               beginning in training, and every file of a package shares names and idioms with
//               its neighbours in name order. Held-out files are a cleaner test of what a model
//               learnt, and of how it handles a document it has never seen from its first byte.
//               Which files: ordered by a hash of their relative path (a fixed shuffle, the same
//               on every machine), test takes files until it holds test_fraction of the bytes,
//               then valid until valid_fraction, train the rest; inside a split, files are in
//               relative-path order.
// In "file" mode the documents of a split are joined with a SEPARATOR (data.separator, default
// "\n\n": a blank line, which Python code, prose and fortunes all read as a paragraph break).
// Without it the last line of one file would run into the first of the next, and a model
// would learn text that exists nowhere. The separator is not added after the last document.
//
// The pieces, in the order a training run uses them:
//   read_documents         a file or a directory tree -> documents (include/exclude globs)
//   load_corpus            a DataConfig -> CorpusSplit: read, then split by position or by file
//   describe_corpus        the one-line summary of a split for the run log
//   unigram_cross_entropy  the loss of a model that ignores context: the baseline to beat
//   StreamBatcher          train tokens -> an endless sequence of [B, L] batches laid out for
//                          Transformer-XL style segment recurrence (see the class comment)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/batch_source.hpp"

namespace poslab {

// One document: a file of the corpus.
struct Document {
  std::string name;                  // relative to the corpus directory, '/'-separated
                                     // ("email/parser.py"); a corpus that is one file: its name
  std::vector<std::uint8_t> bytes;   // never empty: empty files are dropped (they hold no text)
};

// Which files of a directory tree are documents. Globs follow fnmatch(3) with no flags, matched
// against the relative path: `*` and `?` also match '/', so a pattern matches at any depth.
//   "*.py"          every .py file, in the top directory and in every subdirectory
//   "test/*"        everything under the top-level test/ directory
//   "*/tests/*"     everything under a tests/ directory that is not at the top
// A file is a document if it matches some include (or include is empty) and no exclude.
struct CorpusFilter {
  std::vector<std::string> include = {};  // empty: every plain-text file
  std::vector<std::string> exclude = {};
};

// A file -> one document, read as it is (the caller chose it; the filter does not apply).
// A directory -> its documents in relative-path order, found recursively. Never followed or read:
//   symlinks           they point at files we would read twice (fortunes' *.u8) or outside
//   hidden directories .git, .cache and the like are not descended into
// With an empty include list, these are skipped silently too, as poslab always did:
//   hidden files (.something), *.dat (the strfile indexes of fortunes), *.u8 (fortunes' UTF-8
//   aliases), and files containing a NUL byte (text never does; this keeps stray binaries out).
// With include patterns, every file they match (and exclude does not) must be text: one that
// cannot be read or holds a NUL byte is an error, not silently dropped.
// Throws std::runtime_error naming the path when it does not exist, cannot be read, is empty,
// holds no file the patterns keep (the message lists the patterns), or an included file is
// unreadable or binary (the message names the file).
std::vector<Document> read_documents(const std::string& path, const CorpusFilter& filter = {});

// Does a directory corpus keep any file, before reading one? Lists (never reads) the files
// read_documents(path, filter) would read, and throws its error when the filter keeps none: the
// check a study runs when it is loaded. A file path, or a path that is not there, passes (other
// checks name those).
void check_corpus_lists_files(const std::string& path, const CorpusFilter& filter);

// The documents of read_documents(path) back to back, no separator: the corpus as one byte
// vector, as "position" mode sees it.
std::vector<std::uint8_t> read_corpus(const std::string& path);

// Files and bytes of one split: what describe_corpus prints.
struct SplitStats {
  std::int64_t files = 0;  // "file" mode: documents in the split; "position" mode: documents
                           // with at least one byte in it (one on a boundary counts in both)
  std::int64_t bytes = 0;  // tokens in the split (separators included)
};

// Train, validation and test tokens; each byte becomes the token of the same value (0..255).
// Nothing trains or evaluates on `test`: it is held out for a final measurement.
struct CorpusSplit {
  std::vector<std::int32_t> train;
  std::vector<std::int32_t> valid;
  std::vector<std::int32_t> test;
  // Where the tokens came from, for the run log.
  std::string source;              // data.path ("" when split from bare bytes)
  std::string method = "position"; // data.split
  std::int64_t files = 0;          // documents read
  SplitStats train_stats, valid_stats, test_stats;
};

// "position" split of bare bytes: the last round(n * test_fraction) bytes become `test`, the
// round(n * valid_fraction) before them `valid`, the rest `train`. With test_fraction 0 this is
// the split of earlier poslab versions, byte for byte. Fractions lie in [0, 1) and sum below 1;
// a split whose fraction is positive must not come out empty, and train never may.
CorpusSplit split_corpus(const std::vector<std::uint8_t>& bytes, double valid_fraction,
                         double test_fraction = 0.0);

// "position" split of documents: split_corpus of their concatenation, plus how many documents
// reach into each split.
CorpusSplit split_by_position(const std::vector<Document>& documents, double valid_fraction,
                              double test_fraction = 0.0);

// "file" split (see the top of this file). Throws std::runtime_error when the fractions are out
// of range or a split that should hold documents holds none (the message says which split and
// which setting to change).
CorpusSplit split_by_file(const std::vector<Document>& documents, double valid_fraction,
                          double test_fraction, const std::string& separator);

// Reads data.path with data.include/exclude and splits it as data.split says. Every error
// message starts with "corpus 'PATH':".
CorpusSplit load_corpus(const DataConfig& data);

// One line for the run log:
//   corpus /usr/lib/python3.11 (split by file): 600 files, 9.10 MB; train 540 files 8.19 MB,
//   valid 30 files 455.1 kB, test 30 files 457.0 kB
std::string describe_corpus(const CorpusSplit& split);

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
  // single batch (fewer than batch * (len + 1) tokens). The tokens are shared, not copied: every
  // batcher of a split (training, validation reads, the passkey curve) reads the one cached copy.
  StreamBatcher(std::shared_ptr<const std::vector<std::int32_t>> tokens, int batch, int len);
  // The same over tokens of its own (tests, generated streams).
  StreamBatcher(std::vector<std::int32_t> tokens, int batch, int len)
      : StreamBatcher(std::make_shared<const std::vector<std::int32_t>>(std::move(tokens)), batch,
                      len) {}

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
  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
  int batch_;                     // B
  int len_;                       // L
  std::int64_t stream_length_;    // S = n / B
  std::int64_t batches_per_pass_; // (S - 1) / L
  std::int64_t next_index_ = 0;   // t of the batch the next call returns
};

}  // namespace poslab
