// Reading the corpus, splitting it, the unigram baseline and the stream batcher.
// The what and why of each piece is in corpus.hpp; this file is the how.
#include "data/corpus.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace poslab {

namespace fs = std::filesystem;

namespace {

// The whole file as bytes. Throws if it cannot be opened or read.
std::vector<std::uint8_t> read_file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("read_corpus: cannot open '" + file.string() + "'");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("read_corpus: error while reading '" + file.string() + "'");
  return bytes;
}

// Names in a directory that are never corpus text (see read_corpus in corpus.hpp).
bool is_skipped_name(const std::string& name) {
  if (name.empty() || name.front() == '.') return true;  // hidden file
  const fs::path as_path(name);
  return as_path.extension() == ".dat" || as_path.extension() == ".u8";
}

bool contains_nul(const std::vector<std::uint8_t>& bytes) {
  return std::find(bytes.begin(), bytes.end(), std::uint8_t{0}) != bytes.end();
}

// The plain-text files of `dir`, concatenated in file-name order.
std::vector<std::uint8_t> read_directory(const fs::path& dir) {
  // Collect candidate files first, so the order is by name and not by directory layout.
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (is_skipped_name(name)) continue;
    if (entry.is_symlink()) continue;          // checks the link itself, not its target
    if (!entry.is_regular_file()) continue;    // subdirectories, fifos, sockets, devices
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });

  std::vector<std::uint8_t> corpus;
  int text_files = 0;
  for (const fs::path& file : files) {
    const std::vector<std::uint8_t> bytes = read_file_bytes(file);
    if (contains_nul(bytes)) continue;  // a binary file that escaped the name rules
    corpus.insert(corpus.end(), bytes.begin(), bytes.end());
    ++text_files;
  }
  if (text_files == 0) {
    throw std::runtime_error("read_corpus: directory '" + dir.string() +
                             "' contains no plain-text files (skipped: *.dat, *.u8, hidden "
                             "files, symlinks, subdirectories, files with NUL bytes)");
  }
  return corpus;
}

}  // namespace

std::vector<std::uint8_t> read_corpus(const std::string& path) {
  const fs::path where(path);
  if (!fs::exists(where)) {
    throw std::runtime_error("read_corpus: '" + path + "' does not exist");
  }
  std::vector<std::uint8_t> corpus;
  if (fs::is_directory(where)) {
    corpus = read_directory(where);
  } else if (fs::is_regular_file(where)) {
    corpus = read_file_bytes(where);
  } else {
    throw std::runtime_error("read_corpus: '" + path + "' is neither a file nor a directory");
  }
  if (corpus.empty()) {
    throw std::runtime_error("read_corpus: corpus at '" + path + "' is empty (0 bytes)");
  }
  return corpus;
}

CorpusSplit split_corpus(const std::vector<std::uint8_t>& bytes, double valid_fraction) {
  if (!(valid_fraction >= 0.0 && valid_fraction < 1.0)) {
    throw std::runtime_error("split_corpus: valid_fraction must lie in [0, 1), got " +
                             std::to_string(valid_fraction));
  }
  const std::size_t n = bytes.size();
  const auto n_valid = static_cast<std::size_t>(std::llround(static_cast<double>(n) * valid_fraction));
  const std::size_t n_train = n - n_valid;

  // A byte is its own token: uint8_t -> int32_t keeps the value 0..255 (no sign extension).
  CorpusSplit split;
  split.train.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n_train));
  split.valid.assign(bytes.begin() + static_cast<std::ptrdiff_t>(n_train), bytes.end());
  return split;
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

StreamBatcher::StreamBatcher(std::vector<std::int32_t> tokens, int batch, int len)
    : tokens_(std::move(tokens)), batch_(batch), len_(len) {
  if (batch_ <= 0 || len_ <= 0) {
    throw std::runtime_error("StreamBatcher: B and L must be positive, got B=" +
                             std::to_string(batch_) + ", L=" + std::to_string(len_));
  }
  const auto n = static_cast<std::int64_t>(tokens_.size());
  stream_length_ = n / batch_;                    // S
  batches_per_pass_ = (stream_length_ - 1) / len_;  // each batch needs L + 1 tokens per stream
  if (stream_length_ < len_ + 1) {
    const std::int64_t needed = static_cast<std::int64_t>(batch_) * (len_ + 1);
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
    const std::int32_t* row = tokens_.data() + static_cast<std::int64_t>(b) * stream_length_ + start;
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
