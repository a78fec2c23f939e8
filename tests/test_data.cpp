// Tests for the data loader (src/data/corpus.hpp). Every expected value below comes from the
// definitions in corpus.hpp or from a hand computation written out next to it.
#include <catch2/catch.hpp>

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "data/corpus.hpp"
#include "train/registered_choices.hpp"

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

void write_bytes(const fs::path& file, const std::string& content) {
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
  write_bytes(dir.path() / "one.txt", content);
  CHECK(poslab::read_corpus((dir.path() / "one.txt").string()) == bytes_of(content));
}

TEST_CASE("read_corpus concatenates a directory's text files in relative-path order", "[data]") {
  TempDir dir;
  write_bytes(dir.path() / "c", "CCC");
  write_bytes(dir.path() / "a", "A");
  write_bytes(dir.path() / "b.txt", "BB");
  // Everything below must be skipped.
  write_bytes(dir.path() / "a.dat", "index");                  // strfile index
  write_bytes(dir.path() / "b.u8", "utf8 copy");               // *.u8 even as a regular file
  fs::create_symlink(dir.path() / "c", dir.path() / "c.u8");  // *.u8 symlink (fortunes layout)
  fs::create_symlink(dir.path() / "a", dir.path() / "link");  // any other symlink
  write_bytes(dir.path() / ".hidden", "hidden");
  write_bytes(dir.path() / "bin", std::string("x\0y", 3));     // contains a NUL byte
  // Subdirectories are read too (recursively), after "c" because "c" < "sub/inner".
  fs::create_directory(dir.path() / "sub");
  write_bytes(dir.path() / "sub" / "inner", "inner");
  write_bytes(dir.path() / "sub" / "x.dat", "index");          // skipped at any depth

  CHECK(poslab::read_corpus(dir.path().string()) == bytes_of("ABBCCCinner"));
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
    write_bytes(empty, "");
    CHECK_THROWS_WITH(poslab::read_corpus(empty), Contains(empty) && Contains("empty"));
  }
  SECTION("a directory with only skipped files") {
    write_bytes(dir.path() / "x.dat", "index");
    write_bytes(dir.path() / ".hidden", "hidden");
    CHECK_THROWS_WITH(poslab::read_corpus(dir.path().string()),
                      Contains(dir.path().string()) && Contains("no plain-text files"));
  }
  SECTION("a directory whose text files are all empty") {
    write_bytes(dir.path() / "a", "");
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

TEST_CASE("split_corpus with a test fraction: [train | valid | test]", "[data]") {
  // 20 bytes 0..19: test = the last round(20 * 0.1) = 2, valid the round(20 * 0.25) = 5 before.
  std::vector<std::uint8_t> bytes(20);
  std::iota(bytes.begin(), bytes.end(), std::uint8_t{0});
  const poslab::CorpusSplit split = poslab::split_corpus(bytes, 0.25, 0.1);
  CHECK(split.train == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  CHECK(split.valid == std::vector<std::int32_t>{13, 14, 15, 16, 17});
  CHECK(split.test == std::vector<std::int32_t>{18, 19});
  CHECK(split.test_stats.bytes == 2);
}

// ---------------------------------------------------------------- documents and globs

namespace {

// A small tree shaped like a Python library:
//   a.py  b.txt  pkg/c.py  pkg/tests/t.py  test/u.py  encodings/cp1.py  .git/config
//   pkg/.hidden.py
void write_library(const fs::path& root) {
  fs::create_directories(root / "pkg" / "tests");
  fs::create_directories(root / "test");
  fs::create_directories(root / "encodings");
  fs::create_directories(root / ".git");
  write_bytes(root / "a.py", "A");
  write_bytes(root / "b.txt", "B");
  write_bytes(root / "pkg" / "c.py", "C");
  write_bytes(root / "pkg" / "tests" / "t.py", "T");
  write_bytes(root / "test" / "u.py", "U");
  write_bytes(root / "encodings" / "cp1.py", "E");
  write_bytes(root / ".git" / "config", "G");
  write_bytes(root / "pkg" / ".hidden.py", "H");
}

std::vector<std::string> names_of(const std::vector<poslab::Document>& documents) {
  std::vector<std::string> names;
  for (const auto& d : documents) names.push_back(d.name);
  return names;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("read_documents walks a directory tree; globs choose the files", "[data]") {
  TempDir dir;
  write_library(dir.path());
  const std::string root = dir.path().string();

  // No include: every plain-text file at any depth, but no hidden file or hidden directory.
  CHECK(names_of(poslab::read_documents(root)) ==
        Names{"a.py", "b.txt", "encodings/cp1.py", "pkg/c.py", "pkg/tests/t.py", "test/u.py"});

  // "*.py" matches at any depth because * also matches '/'. An include takes hidden files it
  // names (.hidden.py), but hidden directories (.git) are never entered.
  CHECK(names_of(poslab::read_documents(root, {.include = {"*.py"}})) ==
        Names{"a.py", "encodings/cp1.py", "pkg/.hidden.py", "pkg/c.py", "pkg/tests/t.py",
              "test/u.py"});

  // Exclude wins over include; "test/*" is anchored at the top, "*/tests/*" finds nested ones.
  const poslab::CorpusFilter python{.include = {"*.py"},
                                    .exclude = {"test/*", "*/tests/*", "encodings/*", ".*",
                                                "*/.*"}};
  const auto documents = poslab::read_documents(root, python);
  CHECK(names_of(documents) == Names{"a.py", "pkg/c.py"});
  CHECK(documents[1].bytes == bytes_of("C"));

  // Exclude alone, without include: the default rules plus the excludes.
  CHECK(names_of(poslab::read_documents(root, {.exclude = {"*.py"}})) == Names{"b.txt"});
}

TEST_CASE("read_documents explains bad patterns and bad included files", "[data]") {
  TempDir dir;
  write_library(dir.path());
  const std::string root = dir.path().string();

  SECTION("no file matches: the message names the directory and the patterns") {
    CHECK_THROWS_WITH(poslab::read_documents(root, {.include = {"*.rs"}, .exclude = {"x/*"}}),
                      Contains(root) && Contains("no file matches") && Contains("\"*.rs\"") &&
                          Contains("\"x/*\""));
    CHECK_THROWS_WITH(poslab::read_documents(root, {.include = {"*.py"}, .exclude = {"*"}}),
                      Contains(root) && Contains("no file matches"));
  }
  SECTION("an included binary file is an error naming the file") {
    write_bytes(dir.path() / "pkg" / "blob.py", std::string("ab\0cd", 5));
    CHECK_THROWS_WITH(poslab::read_documents(root, {.include = {"*.py"}}),
                      Contains(root) && Contains("pkg/blob.py") && Contains("NUL"));
    // Without include the same file is skipped silently, as before.
    CHECK_NOTHROW(poslab::read_documents(root));
  }
  SECTION("an included unreadable file is an error naming the file") {
    const fs::path locked = dir.path() / "pkg" / "locked.py";
    write_bytes(locked, "secret");
    fs::permissions(locked, fs::perms::none);
    if (std::ifstream(locked).good()) {
      WARN("running as root: a file without permissions is still readable; check skipped");
    } else {
      CHECK_THROWS_WITH(poslab::read_documents(root, {.include = {"*.py"}}),
                        Contains(root) && Contains("locked.py") && Contains("cannot open"));
    }
  }
}

// ---------------------------------------------------------------- splitting by file

namespace {

// n documents "doc_i.txt" of about `size` bytes each (sizes vary so that shares are uneven).
std::vector<poslab::Document> many_documents(int n, int size) {
  std::vector<poslab::Document> documents;
  for (int i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "dir%d/doc_%03d.txt", i % 3, i);
    const int length = size + (i * 37) % size;  // size .. 2 size - 1
    std::string text(static_cast<std::size_t>(length), static_cast<char>('a' + i % 26));
    documents.push_back({name, bytes_of(text)});
  }
  std::sort(documents.begin(), documents.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return documents;
}

// The documents of a split, recovered from its tokens: cut at the separator.
std::vector<std::string> texts_of(const std::vector<std::int32_t>& tokens, const std::string& sep) {
  const std::string all(tokens.begin(), tokens.end());
  std::vector<std::string> texts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = all.find(sep, begin);
    texts.push_back(all.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + sep.size();
  }
  return texts;
}

}  // namespace

TEST_CASE("split_by_file deals whole documents: disjoint, complete, deterministic", "[data]") {
  const auto documents = many_documents(200, 100);  // about 30 kB
  std::int64_t total = 0;
  for (const auto& d : documents) total += static_cast<std::int64_t>(d.bytes.size());

  const std::string sep = "\n\n";
  const poslab::CorpusSplit split = poslab::split_by_file(documents, 0.1, 0.2, sep);
  CHECK(split.method == "file");
  CHECK(split.files == 200);

  // Each split's tokens are whole documents joined by the separator; together they are every
  // document exactly once.
  std::vector<std::string> all;
  for (const auto* tokens : {&split.train, &split.valid, &split.test}) {
    const auto texts = texts_of(*tokens, sep);
    all.insert(all.end(), texts.begin(), texts.end());
  }
  std::vector<std::string> expected;
  for (const auto& d : documents) expected.emplace_back(d.bytes.begin(), d.bytes.end());
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  CHECK(all == expected);

  // Statistics: files per split add up; bytes are the token counts, separators included.
  CHECK(split.train_stats.files + split.valid_stats.files + split.test_stats.files == 200);
  CHECK(split.test_stats.bytes == static_cast<std::int64_t>(split.test.size()));
  CHECK(split.train_stats.bytes + split.valid_stats.bytes + split.test_stats.bytes ==
        total + 2 * (200 - 3));  // one separator between neighbours, three splits

  // Shares: each split overshoots its target by less than one document (< 200 bytes).
  const double test_share = double(split.test_stats.bytes) / double(total);
  const double valid_share = double(split.valid_stats.bytes) / double(total);
  CHECK(test_share >= 0.2);
  CHECK(test_share < 0.2 + 0.02);
  CHECK(valid_share >= 0.1);
  CHECK(valid_share < 0.1 + 0.02);

  // Deterministic: the same input, the same split, token for token.
  const poslab::CorpusSplit again = poslab::split_by_file(documents, 0.1, 0.2, sep);
  CHECK(again.train == split.train);
  CHECK(again.valid == split.valid);
  CHECK(again.test == split.test);

  // The order of the input does not matter: the deal depends on names only.
  auto reversed = documents;
  std::reverse(reversed.begin(), reversed.end());
  CHECK(poslab::split_by_file(reversed, 0.1, 0.2, sep).test == split.test);

  // The hash shuffles: test is not simply the last documents in name order, which is what a
  // position split would hold.
  const std::size_t k = static_cast<std::size_t>(split.test_stats.files);
  std::vector<std::string> last_k;
  for (std::size_t i = documents.size() - k; i < documents.size(); ++i)
    last_k.emplace_back(documents[i].bytes.begin(), documents[i].bytes.end());
  CHECK(texts_of(split.test, sep) != last_k);
}

TEST_CASE("split_by_file writes a split in relative-path order with the separator", "[data]") {
  // Two documents, no held-out split: train is both, in name order, joined by the separator.
  const std::vector<poslab::Document> documents = {{"b/z.py", bytes_of("zz")},
                                                   {"a.py", bytes_of("a\xE9")}};
  const poslab::CorpusSplit split = poslab::split_by_file(documents, 0.0, 0.0, "<|>");
  CHECK(split.train == std::vector<std::int32_t>{'a', 0xE9, '<', '|', '>', 'z', 'z'});
  CHECK(split.valid.empty());
  CHECK(split.test.empty());
}

TEST_CASE("split_by_file and split_corpus name the empty split and the fix", "[data]") {
  // One document cannot feed both test and train.
  const std::vector<poslab::Document> one = {{"only.py", bytes_of("print(1)\n")}};
  CHECK_THROWS_WITH(poslab::split_by_file(one, 0.0, 0.5, "\n\n"),
                    Contains("train split is empty") && Contains("data.test_fraction"));
  // Two documents, both asked for: test takes one, valid the other, train nothing.
  const std::vector<poslab::Document> two = {{"a", bytes_of("aaaa")}, {"b", bytes_of("bbbb")}};
  CHECK_THROWS_WITH(poslab::split_by_file(two, 0.3, 0.3, "\n\n"),
                    Contains("train split is empty"));
  // Three documents, one held out for test: fine, the others train.
  const std::vector<poslab::Document> three = {{"a", bytes_of(std::string(100, 'a'))},
                                               {"b", bytes_of(std::string(100, 'b'))},
                                               {"c", bytes_of("c")}};
  poslab::CorpusSplit ok = poslab::split_by_file(three, 0.0, 0.3, "");
  CHECK(ok.test_stats.files >= 1);
  // Fractions summing to 1 or more.
  CHECK_THROWS_WITH(poslab::split_by_file(three, 0.5, 0.5, ""),
                    Contains("valid_fraction") && Contains("test_fraction") &&
                        Contains("below 1"));
  CHECK_THROWS_WITH(poslab::split_corpus(bytes_of("0123456789"), 0.6, 0.4), Contains("below 1"));
  // Position mode: a positive fraction that rounds to no byte at all.
  CHECK_THROWS_WITH(poslab::split_corpus(bytes_of("0123456789"), 0.01),
                    Contains("validation split is empty") && Contains("data.valid_fraction"));
  CHECK_THROWS_WITH(poslab::split_corpus(bytes_of("0123456789"), 0.1, 0.01),
                    Contains("test split is empty") && Contains("data.test_fraction"));
}

// ---------------------------------------------------------------- load_corpus: the config

TEST_CASE("load_corpus in position mode is the split of earlier versions", "[data]") {
  TempDir dir;
  write_library(dir.path());
  poslab::DataConfig data;
  data.path = dir.path().string();
  data.valid_fraction = 0.5;  // 6 one-byte documents: the last 3 bytes are validation

  // What poslab did before data.split existed: read_corpus, then split_corpus(bytes, valid).
  const poslab::CorpusSplit before = poslab::split_corpus(poslab::read_corpus(data.path), 0.5);
  const poslab::CorpusSplit now = poslab::load_corpus(data);
  CHECK(now.train == before.train);
  CHECK(now.valid == before.valid);
  CHECK(now.test.empty());
  // a.py b.txt encodings/cp1.py pkg/c.py pkg/tests/t.py test/u.py, no separator.
  CHECK(now.train == std::vector<std::int32_t>{'A', 'B', 'E'});
  CHECK(now.valid == std::vector<std::int32_t>{'C', 'T', 'U'});
  CHECK(now.files == 6);
  CHECK(now.train_stats.files == 3);
  CHECK(now.valid_stats.files == 3);
  CHECK(poslab::describe_corpus(now) ==
        "corpus " + data.path + " (split by position): 6 files, 6 B; train 3 files 3 B, "
        "valid 3 files 3 B");

  // The default fortunes corpus: the same bytes as read_corpus + split_corpus.
  poslab::DataConfig fortunes;
  if (fs::exists(fortunes.path)) {
    const auto old = poslab::split_corpus(poslab::read_corpus(fortunes.path),
                                          fortunes.valid_fraction);
    const auto got = poslab::load_corpus(fortunes);
    CHECK(got.train == old.train);
    CHECK(got.valid == old.valid);
  }
}

TEST_CASE("load_corpus by file with patterns; errors name the corpus", "[data]") {
  TempDir dir;
  write_library(dir.path());
  for (int i = 0; i < 40; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "m%02d.py", i);
    write_bytes(dir.path() / "pkg" / name, std::string(50, 'm'));
  }
  poslab::DataConfig data;
  data.path = dir.path().string();
  data.include = {"*.py"};
  data.exclude = {"test/*", "*/tests/*", "encodings/*"};
  data.split = "file";
  data.valid_fraction = 0.1;
  data.test_fraction = 0.1;
  const poslab::CorpusSplit split = poslab::load_corpus(data);
  CHECK(split.files == 43);  // a.py, pkg/.hidden.py, pkg/c.py, 40 x pkg/m*.py
  CHECK(split.train_stats.files + split.valid_stats.files + split.test_stats.files == 43);
  CHECK(split.valid_stats.files >= 1);
  CHECK(split.test_stats.files >= 1);
  CHECK_THAT(poslab::describe_corpus(split),
             Contains("corpus " + data.path + " (split by file): 43 files") &&
                 Contains("test " + std::to_string(split.test_stats.files) + " files"));

  // Too few documents for the fractions: the message names the corpus and the split.
  data.include = {"a.py"};
  CHECK_THROWS_WITH(poslab::load_corpus(data),
                    Contains("corpus '" + data.path + "'") && Contains("split is empty"));
  data.include = {"*.nothing"};
  CHECK_THROWS_WITH(poslab::load_corpus(data),
                    Contains(data.path) && Contains("\"*.nothing\""));
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

TEST_CASE("StreamBatcher shares its tokens: the corpus is not copied per batcher", "[data]") {
  // Training, validation reads and the passkey curve each make a batcher of the cached split;
  // a copy each cost 4 bytes per token (35 MB of a 77 MB run with the context-extension corpus).
  const auto tokens = std::make_shared<const std::vector<std::int32_t>>(positions(100));
  poslab::StreamBatcher shared(tokens, 2, 8);
  CHECK(tokens.use_count() == 2);
  poslab::StreamBatcher copied(positions(100), 2, 8);  // the same tokens, its own vector
  poslab::Batch a, b;
  for (int step = 0; step < 13; ++step) {  // crosses a pass boundary
    shared.next(a);
    copied.next(b);
    CHECK(a.inputs == b.inputs);
    CHECK(a.targets == b.targets);
    CHECK(a.first_of_pass == b.first_of_pass);
  }
  CHECK_THROWS_WITH(poslab::StreamBatcher(std::shared_ptr<const std::vector<std::int32_t>>(), 2, 8),
                    Contains("no tokens"));
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

// ---------------------------------------------------------------- the Python corpus

TEST_CASE("experiments/python_corpus.toml: held-out modules, no tests or codec tables",
          "[data][python]") {
  // Debian's Python standard library (libpython3.11-stdlib, installed by scripts/setup.sh).
  const poslab::Config cfg =
      poslab::load_config(std::string(POSLAB_SOURCE_DIR) + "/experiments/python_corpus.toml",
                          poslab::registered_choices());
  REQUIRE(fs::is_directory(cfg.data.path));
  const poslab::CorpusFilter filter{cfg.data.include, cfg.data.exclude};
  const auto documents = poslab::read_documents(cfg.data.path, filter);
  for (const auto& d : documents) {
    INFO(d.name);
    CHECK(d.name.size() > 3);
    CHECK(d.name.substr(d.name.size() - 3) == ".py");
    CHECK(d.name.rfind("test/", 0) != 0);
    CHECK(d.name.find("/tests/") == std::string::npos);
    CHECK(d.name.rfind("encodings/", 0) != 0);
    CHECK(d.name != "pydoc_data/topics.py");
  }
  const poslab::CorpusSplit split = poslab::load_corpus(cfg.data);
  // The sizes quoted in the config's comment.
  std::int64_t document_bytes = 0;
  for (const auto& d : documents) document_bytes += static_cast<std::int64_t>(d.bytes.size());
  WARN(poslab::describe_corpus(split) << "\n" << documents.size() << " documents, "
       << document_bytes << " bytes; tokens: train " << split.train_stats.bytes << ", valid "
       << split.valid_stats.bytes << ", test " << split.test_stats.bytes);
  CHECK(split.files > 400);
  CHECK(split.test_stats.bytes >= 256 * 1024);
  CHECK(split.test_stats.files >= 20);
  CHECK(split.valid_stats.files >= 20);
}
