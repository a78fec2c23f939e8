// Tests for the data loader (src/data/corpus.hpp). Every expected value below comes from the
// definitions in corpus.hpp or from a hand computation written out next to it.
#include <catch2/catch.hpp>

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "data/corpus.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

// A fresh, empty directory under the system temp dir, removed with everything in it at the end
// of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "poslab_test_data_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& file, const std::string& content) {
  std::ofstream out(file, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

// Tokens whose value is their position: then every batch entry tells where it came from.
std::vector<std::int32_t> positions(int n) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 0);
  return tokens;
}

}  // namespace

// ---------------------------------------------------------------- read_corpus

TEST_CASE("read_corpus returns the bytes of a single file", "[data]") {
  TempDir dir;
  // Includes a byte >= 128 and a NUL: a file named directly is read as it is.
  const std::string content = std::string("Hello,\nworld\n") + '\xE9' + '\0' + "end";
  write_file(dir.path() / "one.txt", content);
  CHECK(poslab::read_corpus((dir.path() / "one.txt").string()) == bytes_of(content));
}

TEST_CASE("read_corpus concatenates a directory's text files in name order", "[data]") {
  TempDir dir;
  write_file(dir.path() / "c", "CCC");
  write_file(dir.path() / "a", "A");
  write_file(dir.path() / "b.txt", "BB");
  // Everything below must be skipped.
  write_file(dir.path() / "a.dat", "index");                  // strfile index
  write_file(dir.path() / "b.u8", "utf8 copy");               // *.u8 even as a regular file
  fs::create_symlink(dir.path() / "c", dir.path() / "c.u8");  // *.u8 symlink (fortunes layout)
  fs::create_symlink(dir.path() / "a", dir.path() / "link");  // any other symlink
  write_file(dir.path() / ".hidden", "hidden");
  fs::create_directory(dir.path() / "sub");
  write_file(dir.path() / "sub" / "inner", "inner");
  write_file(dir.path() / "bin", std::string("x\0y", 3));     // contains a NUL byte

  CHECK(poslab::read_corpus(dir.path().string()) == bytes_of("ABBCCC"));
}

TEST_CASE("read_corpus reads the default fortunes corpus", "[data][fortunes]") {
  // The `fortunes` package is installed by scripts/setup.sh. Its first file in name order is
  // `art`, and none of the text files contains a NUL byte (the *.dat indexes do).
  const std::string dir = "/usr/share/games/fortunes";
  const std::vector<std::uint8_t> corpus = poslab::read_corpus(dir);
  CHECK(corpus.size() > 1'000'000);
  CHECK(std::find(corpus.begin(), corpus.end(), std::uint8_t{0}) == corpus.end());

  std::ifstream art(dir + "/art", std::ios::binary);
  REQUIRE(art);
  std::string head(64, '\0');
  art.read(head.data(), static_cast<std::streamsize>(head.size()));
  REQUIRE(art.gcount() == 64);
  CHECK(std::vector<std::uint8_t>(corpus.begin(), corpus.begin() + 64) == bytes_of(head));
}

TEST_CASE("read_corpus explains what is wrong", "[data]") {
  TempDir dir;

  SECTION("a missing path") {
    const std::string missing = (dir.path() / "no_such_corpus").string();
    CHECK_THROWS_WITH(poslab::read_corpus(missing),
                      Contains(missing) && Contains("does not exist"));
  }
  SECTION("an empty file") {
    const std::string empty = (dir.path() / "empty.txt").string();
    write_file(empty, "");
    CHECK_THROWS_WITH(poslab::read_corpus(empty), Contains(empty) && Contains("empty"));
  }
  SECTION("a directory with only skipped files") {
    write_file(dir.path() / "x.dat", "index");
    write_file(dir.path() / ".hidden", "hidden");
    CHECK_THROWS_WITH(poslab::read_corpus(dir.path().string()),
                      Contains(dir.path().string()) && Contains("no plain-text files"));
  }
  SECTION("a directory whose text files are all empty") {
    write_file(dir.path() / "a", "");
    CHECK_THROWS_WITH(poslab::read_corpus(dir.path().string()),
                      Contains(dir.path().string()) && Contains("empty"));
  }
}

// ---------------------------------------------------------------- split_corpus

TEST_CASE("split_corpus puts the last fraction in validation", "[data]") {
  // 10 bytes, one of them >= 128 to check that tokens are 0..255 and not sign-extended.
  const std::vector<std::uint8_t> bytes = {1, 2, 3, 4, 5, 6, 7, 8, 200, 255};

  const poslab::CorpusSplit split = poslab::split_corpus(bytes, 0.2);
  CHECK(split.train == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(split.valid == std::vector<std::int32_t>{200, 255});

  const poslab::CorpusSplit no_valid = poslab::split_corpus(bytes, 0.0);
  CHECK(no_valid.train.size() == 10);
  CHECK(no_valid.valid.empty());

  // 10 * 0.25 = 2.5 rounds to 3 validation tokens (round half away from zero).
  const poslab::CorpusSplit rounded = poslab::split_corpus(bytes, 0.25);
  CHECK(rounded.train.size() == 7);
  CHECK(rounded.valid.size() == 3);

  CHECK_THROWS_WITH(poslab::split_corpus(bytes, 1.0), Contains("valid_fraction"));
  CHECK_THROWS_WITH(poslab::split_corpus(bytes, -0.1), Contains("valid_fraction"));
}

// ---------------------------------------------------------------- unigram baseline

TEST_CASE("unigram_cross_entropy matches a hand computation", "[data]") {
  // vocab 3, train = {0, 0, 1}: counts 2, 1, 0; smoothed 3, 2, 1 over 3 + 3 = 6.
  // valid = {0, 2}: p = 3/6 and 1/6, so H = -(ln(1/2) + ln(1/6)) / 2 = ln(12) / 2.
  const double h = poslab::unigram_cross_entropy({0, 0, 1}, {0, 2}, 3);
  CHECK(h == Approx(std::log(12.0) / 2.0).epsilon(1e-12));

  // With an empty train set every token has probability 1/vocab: H = ln(vocab).
  CHECK(poslab::unigram_cross_entropy({}, {5, 7, 7}, 256) == Approx(std::log(256.0)));

  CHECK_THROWS_WITH(poslab::unigram_cross_entropy({0, 3}, {0}, 3), Contains("outside"));
  CHECK_THROWS_WITH(poslab::unigram_cross_entropy({0}, {}, 3), Contains("empty"));
}

// ---------------------------------------------------------------- StreamBatcher

TEST_CASE("StreamBatcher batches follow the stream layout", "[data]") {
  // n = 32 tokens, B = 3, L = 4: S = 32 / 3 = 10 (2 tokens dropped), and a pass has
  // (10 - 1) / 4 = 2 batches. Stream b is tokens [10 b, 10 b + 10).
  const int B = 3, L = 4, S = 10;
  poslab::StreamBatcher batcher(positions(32), B, L);
  REQUIRE(batcher.stream_length() == S);
  REQUIRE(batcher.batches_per_pass() == 2);

  poslab::Batch batch;
  for (int t = 0; t < 2; ++t) {
    REQUIRE(batcher.next(batch));
    CHECK(batch.batch == B);
    CHECK(batch.len == L);
    CHECK(batch.start == t * L);
    CHECK(batch.first_of_pass == (t == 0));
    REQUIRE(batch.inputs.size() == static_cast<std::size_t>(B * L));
    REQUIRE(batch.targets.size() == static_cast<std::size_t>(B * L));
    for (int b = 0; b < B; ++b) {
      for (int i = 0; i < L; ++i) {
        // token value == its position in the corpus
        CHECK(batch.inputs[b * L + i] == b * S + t * L + i);
        CHECK(batch.targets[b * L + i] == b * S + t * L + i + 1);
      }
    }
  }
  // Spot-check one batch written out in full: batch 1 is columns [4, 8) of each stream.
  CHECK(batch.inputs == std::vector<std::int32_t>{4, 5, 6, 7, 14, 15, 16, 17, 24, 25, 26, 27});
  CHECK(batch.targets == std::vector<std::int32_t>{5, 6, 7, 8, 15, 16, 17, 18, 25, 26, 27, 28});
}

TEST_CASE("StreamBatcher continues each row where the previous batch ended", "[data]") {
  // Arbitrary (non-positional) tokens: continuity must hold for the values themselves.
  std::vector<std::int32_t> tokens(200);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % 256);
  const int B = 4, L = 5;
  poslab::StreamBatcher batcher(tokens, B, L);
  // S = 50, (50 - 1) / 5 = 9 batches per pass.
  REQUIRE(batcher.batches_per_pass() == 9);

  poslab::Batch previous, current;
  batcher.next(previous);
  for (int t = 1; t < 9; ++t) {
    batcher.next(current);
    CHECK_FALSE(current.first_of_pass);
    CHECK(current.start == previous.start + L);
    for (int b = 0; b < B; ++b) {
      // Targets are the inputs shifted by one...
      for (int i = 0; i + 1 < L; ++i) CHECK(current.targets[b * L + i] == current.inputs[b * L + i + 1]);
      // ...and the row starts with the token that followed the previous row's last input,
      // so a memory cached from `previous` is the exact left context of `current`.
      CHECK(current.inputs[b * L] == previous.targets[b * L + L - 1]);
      // Against the definition: row b of batch t is stream b = tokens[b*S, (b+1)*S).
      CHECK(current.inputs[b * L] == tokens[static_cast<std::size_t>(b * 50 + t * L)]);
    }
    previous = current;
  }
}

TEST_CASE("StreamBatcher wraps around and marks the first batch of a pass", "[data]") {
  const int B = 2, L = 3;
  poslab::StreamBatcher batcher(positions(20), B, L);  // S = 10, (10 - 1) / 3 = 3 batches
  REQUIRE(batcher.batches_per_pass() == 3);

  poslab::Batch batch;
  std::vector<std::int64_t> starts;
  std::vector<bool> firsts;
  for (int step = 0; step < 7; ++step) {
    batcher.next(batch);
    starts.push_back(batch.start);
    firsts.push_back(batch.first_of_pass);
  }
  CHECK(starts == std::vector<std::int64_t>{0, 3, 6, 0, 3, 6, 0});
  CHECK(firsts == std::vector<bool>{true, false, false, true, false, false, true});
  // After wrapping, batch 0 is the same as the first time: row 1 starts at stream 1 = token 10.
  CHECK(batch.inputs == std::vector<std::int32_t>{0, 1, 2, 10, 11, 12});

  // reset() goes back to batch 0 mid-pass.
  batcher.next(batch);
  CHECK(batch.start == 3);
  batcher.reset();
  batcher.next(batch);
  CHECK(batch.start == 0);
  CHECK(batch.first_of_pass);
}

TEST_CASE("StreamBatcher refills a batch without reallocating", "[data]") {
  poslab::StreamBatcher batcher(positions(100), 2, 8);
  poslab::Batch batch;
  batcher.next(batch);
  const std::int32_t* inputs = batch.inputs.data();
  const std::int32_t* targets = batch.targets.data();
  for (int step = 0; step < 20; ++step) batcher.next(batch);  // crosses several pass boundaries
  CHECK(batch.inputs.data() == inputs);
  CHECK(batch.targets.data() == targets);
}

TEST_CASE("StreamBatcher needs B * (L + 1) tokens for one batch", "[data]") {
  // B = 4, L = 8: each stream needs 9 tokens, so 36 tokens is the minimum.
  CHECK_NOTHROW(poslab::StreamBatcher(positions(36), 4, 8));
  CHECK(poslab::StreamBatcher(positions(36), 4, 8).batches_per_pass() == 1);
  CHECK_THROWS_WITH(poslab::StreamBatcher(positions(35), 4, 8),
                    Contains("B=4") && Contains("L=8") && Contains("35 tokens") &&
                        Contains("too small"));
  CHECK_THROWS_WITH(poslab::StreamBatcher(positions(100), 0, 8), Contains("B=0"));
  CHECK_THROWS_WITH(poslab::StreamBatcher(positions(100), 4, 0), Contains("L=0"));
}
