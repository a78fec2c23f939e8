// Reading the corpus, splitting it, the unigram baseline and the stream batcher.
// The what and why of each piece is in corpus.hpp; this file is the how.
#include "data/corpus.hpp"

#include <fnmatch.h>  // POSIX fnmatch(3): the glob matching of data.include / data.exclude

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace poslab {

namespace fs = std::filesystem;

namespace {

// "corpus '/usr/lib/python3.11': " -- how every reading error starts.
std::string corpus_prefix(const std::string& path) { return "corpus '" + path + "': "; }

// ["*.py", "lib/*"] as text for messages; "[]" when empty.
std::string list_text(const std::vector<std::string>& patterns) {
  std::string out = "[";
  for (std::size_t i = 0; i < patterns.size(); ++i)
    out += (i ? ", \"" : "\"") + patterns[i] + "\"";
  return out + "]";
}

// The whole file as bytes. Throws, naming the file, if it cannot be opened or read.
std::vector<std::uint8_t> read_file_bytes(const fs::path& file, const std::string& prefix) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);  // opened at the end: its size
  if (!in) throw std::runtime_error(prefix + "cannot open '" + file.string() + "'");
  const std::streamoff size = in.tellg();
  if (size < 0) throw std::runtime_error(prefix + "error while reading '" + file.string() + "'");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  // One read of the whole file (the byte-by-byte stream iterator took most of a small run's time).
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (in.bad() || in.gcount() != size)
    throw std::runtime_error(prefix + "error while reading '" + file.string() + "'");
  return bytes;
}

// File names that are never corpus text when no include pattern is given (see corpus.hpp).
bool is_skipped_name(const std::string& name) {
  if (name.empty() || name.front() == '.') return true;  // hidden file
  const fs::path as_path(name);
  return as_path.extension() == ".dat" || as_path.extension() == ".u8";
}

bool contains_nul(const std::vector<std::uint8_t>& bytes) {
  return std::find(bytes.begin(), bytes.end(), std::uint8_t{0}) != bytes.end();
}

// fnmatch(3) with no flags: `*`, `?` and `[...]` match '/' too, and a leading '.' is an ordinary
// character. "*.py" therefore matches "email/mime/text.py".
bool matches_any(const std::string& relative, const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns)
    if (fnmatch(pattern.c_str(), relative.c_str(), 0) == 0) return true;
  return false;
}

// The files under `dir` that the filter keeps, as (relative name, path), in relative-name order.
std::vector<std::pair<std::string, fs::path>> list_files(const fs::path& dir,
                                                         const CorpusFilter& filter,
                                                         const std::string& prefix) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code ec;
  // Default options: symlinks to directories are not followed, a directory we may not enter is
  // an error (reported below) rather than a silent hole in the corpus.
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink()) continue;  // checks the link itself, not its target
    if (entry.is_directory()) {
      if (!name.empty() && name.front() == '.') it.disable_recursion_pending();  // .git, ...
      continue;
    }
    if (!entry.is_regular_file()) continue;  // fifos, sockets, devices
    // generic_string: '/' between components on every system, so patterns are portable.
    const std::string relative = entry.path().lexically_relative(dir).generic_string();
    if (filter.include.empty() ? is_skipped_name(name) : !matches_any(relative, filter.include))
      continue;
    if (matches_any(relative, filter.exclude)) continue;
    files.emplace_back(relative, entry.path());
  }
  if (ec) throw std::runtime_error(prefix + "cannot list directory: " + ec.message());
  std::sort(files.begin(), files.end());  // by relative name: the same order on every machine
  return files;
}

// The files of a directory that read_directory reads; throws when the filter keeps none.
std::vector<std::pair<std::string, fs::path>> listed_documents(const fs::path& dir,
                                                               const CorpusFilter& filter,
                                                               const std::string& prefix) {
  auto files = list_files(dir, filter, prefix);
  const std::string patterns =
      "include " + list_text(filter.include) + ", exclude " + list_text(filter.exclude);
  if (files.empty()) {
    if (filter.include.empty())
      throw std::runtime_error(prefix + "directory contains no plain-text files (" + patterns +
                               "; skipped: *.dat, *.u8, hidden files, symlinks, files with NUL "
                               "bytes)");
    throw std::runtime_error(prefix + "no file matches the patterns (" + patterns +
                             "; globs are matched against the path relative to the directory, "
                             "and * also matches '/')");
  }
  return files;
}

// The documents of a directory (read_documents in corpus.hpp).
std::vector<Document> read_directory(const fs::path& dir, const CorpusFilter& filter,
                                     const std::string& prefix) {
  const auto files = listed_documents(dir, filter, prefix);

  std::vector<Document> documents;
  int text_files = 0;
  for (const auto& [relative, file] : files) {
    std::vector<std::uint8_t> bytes = read_file_bytes(file, prefix);
    if (contains_nul(bytes)) {
      if (filter.include.empty()) continue;  // a binary file that escaped the name rules
      throw std::runtime_error(prefix + "included file '" + relative +
                               "' is binary (it contains a NUL byte); exclude it or narrow "
                               "data.include");
    }
    ++text_files;
    if (bytes.empty()) continue;  // no text, and in "file" mode it would leave a lone separator
    documents.push_back(Document{relative, std::move(bytes)});
  }
  if (text_files == 0) {
    throw std::runtime_error(prefix + "directory contains no plain-text files (skipped: *.dat, "
                             "*.u8, hidden files, symlinks, files with NUL bytes)");
  }
  if (documents.empty())
    throw std::runtime_error(prefix + "corpus is empty (0 bytes): every file it keeps is empty");
  return documents;
}

// Fractions in [0, 1), summing below 1, so that train keeps something.
void check_fractions(double valid_fraction, double test_fraction) {
  auto in_range = [](double f) { return f >= 0.0 && f < 1.0; };
  if (!in_range(valid_fraction))
    throw std::runtime_error("valid_fraction must lie in [0, 1), got " +
                             std::to_string(valid_fraction));
  if (!in_range(test_fraction))
    throw std::runtime_error("test_fraction must lie in [0, 1), got " +
                             std::to_string(test_fraction));
  if (!(valid_fraction + test_fraction < 1.0))
    throw std::runtime_error("valid_fraction (" + std::to_string(valid_fraction) +
                             ") + test_fraction (" + std::to_string(test_fraction) +
                             ") must be below 1: the rest is the train split");
}

// A split that should hold tokens but holds none: say which, and what to change.
void check_not_empty(const CorpusSplit& split, double valid_fraction, double test_fraction,
                     const std::string& how) {
  if (split.train.empty())
    throw std::runtime_error("the train split is empty (" + how +
                             "); lower data.valid_fraction / data.test_fraction or use a larger "
                             "corpus");
  if (valid_fraction > 0 && split.valid.empty())
    throw std::runtime_error("the validation split is empty although data.valid_fraction = " +
                             std::to_string(valid_fraction) + " (" + how +
                             "); raise data.valid_fraction, lower data.test_fraction or use a "
                             "larger corpus");
  if (test_fraction > 0 && split.test.empty())
    throw std::runtime_error("the test split is empty although data.test_fraction = " +
                             std::to_string(test_fraction) + " (" + how +
                             "); raise data.test_fraction or use a larger corpus");
}

// FNV-1a, 64 bits: a fixed hash of the relative path, the same on every machine and compiler
// (std::hash promises neither), so "file" mode deals the same files everywhere.
std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ull;  // offset basis
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;  // FNV prime
  }
  return hash;
}

// "9.10 MB", "455.1 kB", "812 B" (decimal units).
std::string size_text(std::int64_t bytes) {
  char text[32];
  if (bytes >= 1'000'000) std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1'000) std::snprintf(text, sizeof text, "%.1f kB", bytes / 1e3);
  else std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  return text;
}

}  // namespace

std::vector<Document> read_documents(const std::string& path, const CorpusFilter& filter) {
  const std::string prefix = corpus_prefix(path);
  const fs::path where(path);
  std::error_code ec;
  if (!fs::exists(where, ec)) throw std::runtime_error(prefix + "does not exist");
  if (fs::is_directory(where, ec)) return read_directory(where, filter, prefix);
  if (!fs::is_regular_file(where, ec))
    throw std::runtime_error(prefix + "is neither a file nor a directory");
  std::vector<std::uint8_t> bytes = read_file_bytes(where, prefix);
  if (bytes.empty()) throw std::runtime_error(prefix + "corpus is empty (0 bytes)");
  return {Document{where.filename().string(), std::move(bytes)}};
}

void check_corpus_lists_files(const std::string& path, const CorpusFilter& filter) {
  std::error_code ec;
  if (fs::is_directory(fs::path(path), ec))
    listed_documents(fs::path(path), filter, corpus_prefix(path));
}

std::vector<std::uint8_t> read_corpus(const std::string& path) {
  std::vector<std::uint8_t> corpus;
  for (const Document& d : read_documents(path))
    corpus.insert(corpus.end(), d.bytes.begin(), d.bytes.end());
  return corpus;
}

CorpusSplit split_corpus(const std::vector<std::uint8_t>& bytes, double valid_fraction,
                         double test_fraction) {
  check_fractions(valid_fraction, test_fraction);
  const std::size_t n = bytes.size();
  auto share = [n](double fraction) {
    return static_cast<std::size_t>(std::llround(static_cast<double>(n) * fraction));
  };
  const std::size_t n_test = share(test_fraction);
  const std::size_t n_valid = share(valid_fraction);
  // [ train | valid | test ]: with n_test = 0 this is the split of earlier versions exactly.
  const std::size_t n_train = n - std::min(n, n_valid + n_test);
  const auto at = [&bytes](std::size_t i) { return bytes.begin() + static_cast<std::ptrdiff_t>(i); };

  // A byte is its own token: uint8_t -> int32_t keeps the value 0..255 (no sign extension).
  CorpusSplit split;
  split.train.assign(at(0), at(n_train));
  split.valid.assign(at(n_train), at(std::min(n, n_train + n_valid)));
  split.test.assign(at(std::min(n, n_train + n_valid)), bytes.end());
  split.train_stats.bytes = static_cast<std::int64_t>(split.train.size());
  split.valid_stats.bytes = static_cast<std::int64_t>(split.valid.size());
  split.test_stats.bytes = static_cast<std::int64_t>(split.test.size());
  check_not_empty(split, valid_fraction, test_fraction,
                  "position split of " + std::to_string(n) + " bytes");
  return split;
}

CorpusSplit split_by_position(const std::vector<Document>& documents, double valid_fraction,
                              double test_fraction) {
  std::vector<std::uint8_t> bytes;
  for (const Document& d : documents) bytes.insert(bytes.end(), d.bytes.begin(), d.bytes.end());
  CorpusSplit split = split_corpus(bytes, valid_fraction, test_fraction);
  split.files = static_cast<std::int64_t>(documents.size());

  // Document d covers bytes [begin, end); it counts in every split it reaches into.
  const std::int64_t valid_begin = split.train_stats.bytes;
  const std::int64_t test_begin = valid_begin + split.valid_stats.bytes;
  std::int64_t begin = 0;
  for (const Document& d : documents) {
    const std::int64_t end = begin + static_cast<std::int64_t>(d.bytes.size());
    if (begin < valid_begin) ++split.train_stats.files;
    if (begin < test_begin && end > valid_begin) ++split.valid_stats.files;
    if (end > test_begin) ++split.test_stats.files;
    begin = end;
  }
  return split;
}

CorpusSplit split_by_file(const std::vector<Document>& documents, double valid_fraction,
                          double test_fraction, const std::string& separator) {
  check_fractions(valid_fraction, test_fraction);

  // The deal order: a fixed shuffle by hash of the relative path (name breaks ties).
  std::vector<std::size_t> order(documents.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&documents](std::size_t a, std::size_t b) {
    const std::string &x = documents[a].name, &y = documents[b].name;
    return std::make_pair(fnv1a(x), x) < std::make_pair(fnv1a(y), y);
  });

  double total = 0;
  for (const Document& d : documents) total += static_cast<double>(d.bytes.size());

  // Test takes files until it holds test_fraction of the bytes, then valid until valid_fraction;
  // each overshoots its share by less than one file. The rest is train.
  std::vector<std::size_t> test, valid, train;
  std::size_t next = 0;
  auto take = [&](std::vector<std::size_t>& into, double fraction) {
    double taken = 0;
    while (next < order.size() && taken < fraction * total) {
      taken += static_cast<double>(documents[order[next]].bytes.size());
      into.push_back(order[next++]);
    }
  };
  take(test, test_fraction);
  take(valid, valid_fraction);
  while (next < order.size()) train.push_back(order[next++]);

  // A split's tokens: its documents in relative-path order, the separator between two of them.
  // The separator as bytes, so that a char >= 0x80 becomes token 128..255, not a negative one.
  const std::vector<std::uint8_t> separator_bytes(separator.begin(), separator.end());
  auto join = [&](std::vector<std::size_t>& members, std::vector<std::int32_t>& tokens,
                  SplitStats& stats) {
    std::sort(members.begin(), members.end(), [&documents](std::size_t a, std::size_t b) {
      return documents[a].name < documents[b].name;
    });
    std::size_t size = 0;
    for (std::size_t i = 0; i < members.size(); ++i)
      size += (i > 0 ? separator_bytes.size() : 0) + documents[members[i]].bytes.size();
    tokens.reserve(size);
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i > 0) tokens.insert(tokens.end(), separator_bytes.begin(), separator_bytes.end());
      const auto& bytes = documents[members[i]].bytes;
      tokens.insert(tokens.end(), bytes.begin(), bytes.end());
    }
    stats.files = static_cast<std::int64_t>(members.size());
    stats.bytes = static_cast<std::int64_t>(tokens.size());
  };
  CorpusSplit split;
  split.method = "file";
  split.files = static_cast<std::int64_t>(documents.size());
  join(train, split.train, split.train_stats);
  join(valid, split.valid, split.valid_stats);
  join(test, split.test, split.test_stats);
  check_not_empty(split, valid_fraction, test_fraction,
                  "file split of " + std::to_string(documents.size()) +
                      " documents: test took " + std::to_string(test.size()) + ", validation " +
                      std::to_string(valid.size()) + ", train " + std::to_string(train.size()));
  return split;
}

CorpusSplit load_corpus(const DataConfig& data) {
  const std::vector<Document> documents =
      read_documents(data.path, CorpusFilter{data.include, data.exclude});
  CorpusSplit split;
  try {
    if (data.split == "position") {
      split = split_by_position(documents, data.valid_fraction, data.test_fraction);
    } else if (data.split == "file") {
      split = split_by_file(documents, data.valid_fraction, data.test_fraction, data.separator);
    } else {
      throw std::runtime_error("unknown data.split '" + data.split +
                               "' (expected \"position\" or \"file\")");
    }
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(corpus_prefix(data.path) + e.what());
  }
  split.source = data.path;
  return split;
}

std::string describe_corpus(const CorpusSplit& split) {
  const std::int64_t total =
      split.train_stats.bytes + split.valid_stats.bytes + split.test_stats.bytes;
  auto part = [](const char* name, const SplitStats& s) {
    return std::string(name) + " " + std::to_string(s.files) + " files " + size_text(s.bytes);
  };
  std::string out = "corpus " + (split.source.empty() ? std::string("(bytes)") : split.source) +
                    " (split by " + split.method + "): " + std::to_string(split.files) +
                    " files, " + size_text(total) + "; " + part("train", split.train_stats) +
                    ", " + part("valid", split.valid_stats);
  if (!split.test.empty()) out += ", " + part("test", split.test_stats);
  return out;
}

double unigram_cross_entropy(const std::vector<std::int32_t>& train,
                             const std::vector<std::int32_t>& valid, int vocab) {
  if (vocab <= 0) throw std::runtime_error("unigram_cross_entropy: vocab must be positive");
  if (valid.empty()) throw std::runtime_error("unigram_cross_entropy: validation set is empty");
  auto check_token = [vocab](std::int32_t token) {
    if (token < 0 || token >= vocab) {
      throw std::runtime_error("unigram_cross_entropy: token " + std::to_string(token) +
                               " outside [0, " + std::to_string(vocab) + ")");
    }
  };

  // count_train(v) + 1 for every v: the "+1" is the add-one smoothing, so an unseen token
  // still has a finite loss.
  std::vector<double> smoothed_count(static_cast<std::size_t>(vocab), 1.0);
  for (std::int32_t token : train) {
    check_token(token);
    smoothed_count[static_cast<std::size_t>(token)] += 1.0;
  }
  const double total = static_cast<double>(train.size()) + vocab;  // |train| + vocab

  // H = -(1/|valid|) sum_i log p(valid_i),  p(v) = smoothed_count(v) / total
  double sum_log_p = 0.0;
  for (std::int32_t token : valid) {
    check_token(token);
    sum_log_p += std::log(smoothed_count[static_cast<std::size_t>(token)] / total);
  }
  return -sum_log_p / static_cast<double>(valid.size());
}

StreamBatcher::StreamBatcher(std::shared_ptr<const std::vector<std::int32_t>> tokens, int batch,
                             int len)
    : tokens_(std::move(tokens)), batch_(batch), len_(len) {
  if (!tokens_) throw std::runtime_error("StreamBatcher: no tokens (null pointer)");
  if (batch_ <= 0 || len_ <= 0) {
    throw std::runtime_error("StreamBatcher: B and L must be positive, got B=" +
                             std::to_string(batch_) + ", L=" + std::to_string(len_));
  }
  const auto n = static_cast<std::int64_t>(tokens_->size());
  stream_length_ = n / batch_;                    // S
  batches_per_pass_ = (stream_length_ - 1) / len_;  // each batch needs L + 1 tokens per stream
  if (stream_length_ < std::int64_t(len_) + 1) {  // in 64 bits: L = 2^31 - 1 must not wrap
    const std::int64_t needed = static_cast<std::int64_t>(batch_) * (std::int64_t(len_) + 1);
    throw std::runtime_error("StreamBatcher: corpus of " + std::to_string(n) +
                             " tokens is too small for one batch of B=" + std::to_string(batch_) +
                             " streams x L=" + std::to_string(len_) +
                             " tokens (each stream needs L+1 tokens, so at least " +
                             std::to_string(needed) + " tokens)");
  }
}

bool StreamBatcher::next(Batch& out) {
  const auto rows = static_cast<std::size_t>(batch_);
  const auto cols = static_cast<std::size_t>(len_);
  out.resize(batch_, len_, false);  // every target is scored: no weights

  const std::int64_t start = next_index_ * len_;  // t * L
  out.start = start;
  out.first_of_pass = (next_index_ == 0);

  for (std::size_t b = 0; b < rows; ++b) {
    // Row b of the batch: stream b, columns [t*L, t*L + L), and the token after each.
    const std::int32_t* row = tokens_->data() + static_cast<std::int64_t>(b) * stream_length_ + start;
    std::int32_t* inputs = out.inputs.data() + b * cols;
    std::int32_t* targets = out.targets.data() + b * cols;
    for (std::size_t i = 0; i < cols; ++i) {
      inputs[i] = row[i];
      targets[i] = row[i + 1];  // next token; i + 1 <= L <= S - 1 - t*L stays inside stream b
    }
  }

  ++next_index_;
  if (next_index_ == batches_per_pass_) next_index_ = 0;  // wrap: the next batch starts a pass
  return true;
}

}  // namespace poslab
