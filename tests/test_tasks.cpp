// The generated tasks (src/tasks): determinism, the batch layout every task shares, and for each
// task an independent re-derivation of its answers from its inputs. The checks below never reuse
// the generators' code: they parse the printed rows ("^cab|cab....") the way a person would.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "tasks/instance_batcher.hpp"
#include "tasks/make_source.hpp"
#include "tasks/task.hpp"
#include "tasks/tokens.hpp"

using namespace poslab;
using Catch::Contains;

namespace {

const std::vector<std::string> kInstanceTasks = {"copy", "reverse", "assoc_recall", "induction",
                                                 "parity"};
const std::vector<std::string> kGeneratedTasks = {"copy",      "reverse", "assoc_recall",
                                                  "induction", "parity",  "long_range"};

TaskSetup setup(int batch, int len, int train_len, Split split, std::uint64_t seed = 7) {
  TaskSetup s;
  s.batch = batch;
  s.len = len;
  s.train_len = train_len;
  s.split = split;
  s.seed = seed;
  return s;
}

std::unique_ptr<BatchSource> make(const std::string& name, const TaskSetup& s,
                                  std::map<std::string, OptionValue> options = {}) {
  const TaskInfo* task = find_task(name);
  REQUIRE(task != nullptr);
  return task->make(Options(std::move(options)), s);
}

std::vector<Batch> read(BatchSource& source, int n) {
  std::vector<Batch> batches(n);
  for (auto& b : batches) REQUIRE(source.next(b));
  return batches;
}

bool same(const Batch& a, const Batch& b) {
  return a.batch == b.batch && a.len == b.len && a.inputs == b.inputs && a.targets == b.targets &&
         a.weights == b.weights && a.start == b.start && a.first_of_pass == b.first_of_pass;
}

// Row b of a batch as text, and its weights as a string of '0'/'1'.
std::string row_text(const Batch& batch, int b) {
  return decode(batch.inputs.data() + std::size_t(b) * batch.len, batch.len);
}
std::string row_weights(const Batch& batch, int b) {
  std::string w;
  for (int i = 0; i < batch.len; ++i) w += batch.weights[std::size_t(b) * batch.len + i] ? '1' : '0';
  return w;
}

// The instance of a row: its text up to the first PAD.
std::string instance_of(const Batch& batch, int b) {
  const std::string text = row_text(batch, b);
  return text.substr(0, std::min(text.find('.'), text.size()));
}

// Weights an instance should have: 1 on target i exactly when token i + 1 is an answer.
std::string weights_for(const std::string& instance, int len, const std::vector<bool>& answer) {
  std::string w(len, '0');
  for (int i = 0; i + 1 < int(instance.size()); ++i)
    if (answer[i + 1]) w[i] = '1';
  return w;
}

// The layout every task of independent sequences shares (instance_batcher.hpp).
void check_instance_layout(const Batch& batch) {
  const int B = batch.batch, L = batch.len;
  REQUIRE(batch.inputs.size() == std::size_t(B) * L);
  REQUIRE(batch.targets.size() == std::size_t(B) * L);
  REQUIRE(batch.weights.size() == std::size_t(B) * L);
  CHECK(batch.first_of_pass);
  CHECK(batch.start == 0);
  for (int b = 0; b < B; ++b) {
    const std::int32_t* in = batch.inputs.data() + std::size_t(b) * L;
    const std::int32_t* tgt = batch.targets.data() + std::size_t(b) * L;
    const float* w = batch.weights.data() + std::size_t(b) * L;
    const std::string instance = instance_of(batch, b);
    INFO("row " << b << ": " << row_text(batch, b));
    CHECK(in[0] == kBos);
    CHECK(std::count(instance.begin(), instance.end(), '^') == 1);  // BOS only at the start
    int scored = 0;
    for (int i = 0; i < L; ++i) {
      if (i >= int(instance.size())) CHECK(in[i] == kPad);           // padding to the end
      CHECK(tgt[i] == (i + 1 < L ? in[i + 1] : kPad));               // targets = inputs shifted
      CHECK((w[i] == 0.0f || w[i] == 1.0f));
      if (tgt[i] == kPad) CHECK(w[i] == 0.0f);                       // padding never scored
      scored += w[i] != 0.0f;
    }
    CHECK(scored >= 1);  // every instance has an answer
  }
}

bool is_data_symbol(char c, int alphabet) {
  const std::string symbols(kSymbols, alphabet);
  return symbols.find(c) != std::string::npos;
}

// Every row of 4 training batches of `task` (16 rows of length L): the layout all instances share
// (check_instance_layout), then answers(s, w), the task's own checks of the instance s and the
// row's weights w, which returns the tokens of s that are answers; w must mark exactly those.
template <class Answers>
void check_each_instance(const std::string& task, int L, Answers&& answers,
                         std::map<std::string, OptionValue> options = {}) {
  auto source = make(task, setup(16, L, L, Split::train), std::move(options));
  for (const Batch& batch : read(*source, 4)) {
    check_instance_layout(batch);
    for (int b = 0; b < batch.batch; ++b) {
      const std::string s = instance_of(batch, b);
      const std::string w = row_weights(batch, b);
      INFO(row_text(batch, b) << "\n" << w);
      const std::vector<bool> is_answer = answers(s, w);
      CHECK(w == weights_for(s, batch.len, is_answer));
    }
  }
}

// The position of the separator in an instance (REQUIREd to be there).
std::size_t separator_of(const std::string& s) {
  const auto sep = s.find('|');
  REQUIRE(sep != std::string::npos);
  return sep;
}


// The instances of the first `batches` batches of an evaluation set, one per row; an empty row
// (the band ran out of unseen instances) is "" and must have nothing scored.
std::vector<std::string> instances_of(BatchSource& source, int batches) {
  std::vector<std::string> instances;
  for (const Batch& batch : read(source, batches))
    for (int b = 0; b < batch.batch; ++b) {
      instances.push_back(instance_of(batch, b));
      if (instances.back().empty()) CHECK(row_weights(batch, b) == std::string(batch.len, '0'));
    }
  return instances;
}

// The non-empty instances of a set are pairwise different.
bool all_distinct(const std::vector<std::string>& instances) {
  std::set<std::string> seen;
  for (const auto& s : instances)
    if (!s.empty() && !seen.insert(s).second) return false;
  return true;
}

// Every (non-empty) instance of `longer` is longer than every instance of `shorter`.
bool all_longer(const std::vector<std::string>& longer, const std::vector<std::string>& shorter) {
  std::size_t shortest = SIZE_MAX, longest = 0;
  for (const auto& s : longer)
    if (!s.empty()) shortest = std::min(shortest, s.size());
  for (const auto& s : shorter) longest = std::max(longest, s.size());
  return shortest > longest;
}

// FNV-1a (64 bit) over the inputs and weights of the next `n` batches, each value as its 4
// little-endian bytes (weights as their float bit pattern): a fingerprint of a stream of batches.
std::uint64_t fingerprint(BatchSource& source, int n) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint32_t x) {
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (x >> (8 * byte)) & 0xFF;
      h *= 1099511628211ULL;
    }
  };
  Batch b;
  for (int t = 0; t < n; ++t) {
    source.next(b);
    for (std::int32_t x : b.inputs) mix(std::uint32_t(x));
    for (float w : b.weights) {
      std::uint32_t bits;
      std::memcpy(&bits, &w, 4);
      mix(bits);
    }
  }
  return h;
}

// The instance sizes a source of independent sequences draws from (instance_batcher.hpp).
std::vector<int> sizes_of(BatchSource& source) {
  auto* batcher = dynamic_cast<InstanceBatcher*>(&source);
  REQUIRE(batcher != nullptr);
  return batcher->sizes();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------------

TEST_CASE("the task registry lists every task, lm first", "[tasks]") {
  std::vector<std::string> names;
  for (const auto& t : registered_tasks()) {
    names.push_back(t.name);
    CHECK_FALSE(t.description.empty());
    CHECK_FALSE(t.layout.empty());
  }
  CHECK(names == std::vector<std::string>{"lm", "copy", "reverse", "assoc_recall", "induction",
                                          "parity", "long_range", "sort"});
  CHECK(find_task("copy") != nullptr);
  CHECK(find_task("cpy") == nullptr);
  // lm is the corpus: its registry factory refuses and points at make_batch_source.
  CHECK_THROWS_WITH(make("lm", setup(2, 8, 8, Split::train)), Contains("make_batch_source"));
}

TEST_CASE("missing options take their defaults; options change the task", "[tasks]") {
  // alphabet = 2: only 'a' and 'b' as data.
  auto source = make("copy", setup(8, 24, 24, Split::train), {{"alphabet", std::int64_t(2)}});
  for (const Batch& batch : read(*source, 4))
    for (int b = 0; b < batch.batch; ++b)
      for (char c : instance_of(batch, b)) CHECK((c == '^' || c == '|' || c == 'a' || c == 'b'));
}

// ---------------------------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------------------------

TEST_CASE("same seed -> identical batches, another seed -> different ones", "[tasks]") {
  for (const auto& name : kGeneratedTasks) {
    INFO(name);
    for (Split split : {Split::train, Split::valid}) {
      auto a = make(name, setup(4, 32, 32, split, 11));
      auto b = make(name, setup(4, 32, 32, split, 11));
      auto c = make(name, setup(4, 32, 32, split, 12));
      const auto ba = read(*a, 5), bb = read(*b, 5), bc = read(*c, 5);
      for (int t = 0; t < 5; ++t) CHECK(same(ba[t], bb[t]));
      CHECK_FALSE(same(ba[0], bc[0]));
    }
    // Training and evaluation batches from the same seed are different draws.
    auto train = make(name, setup(4, 32, 32, Split::train, 11));
    auto eval = make(name, setup(4, 32, 32, Split::valid, 11));
    CHECK_FALSE(same(read(*train, 1)[0], read(*eval, 1)[0]));
  }
}

TEST_CASE("an evaluation set is fixed: reset() and reading past its end repeat it", "[tasks]") {
  for (const auto& name : kGeneratedTasks) {
    INFO(name);
    auto source = make(name, setup(3, 32, 32, Split::valid));
    CHECK(source->batches_per_pass() == kTaskEvalBatches);
    const auto first = read(*source, int(kTaskEvalBatches));
    const auto wrapped = read(*source, 2);  // batches 16 and 17 are batches 0 and 1 again
    CHECK(same(wrapped[0], first[0]));
    CHECK(same(wrapped[1], first[1]));
    read(*source, 5);
    source->reset();
    const auto again = read(*source, int(kTaskEvalBatches));
    for (int t = 0; t < int(kTaskEvalBatches); ++t) CHECK(same(again[t], first[t]));
  }
}

TEST_CASE("a training source never repeats, also across reset()", "[tasks]") {
  for (const auto& name : kGeneratedTasks) {
    INFO(name);
    auto source = make(name, setup(3, 32, 32, Split::train));
    const auto first = read(*source, 3);
    source->reset();
    const auto after = read(*source, 3);
    CHECK(after[0].first_of_pass);  // a reset always starts afresh
    for (int t = 0; t < 3; ++t) CHECK_FALSE(same(after[t], first[t]));
  }
}

TEST_CASE("the batches of a fixed seed are the same on every machine", "[tasks]") {
  // mt19937_64 is fully specified by the standard and Rng uses only its raw output, so these
  // rows are a golden record: a change here changes every task run ever made.
  auto source = make("copy", setup(3, 12, 12, Split::train, 1));
  Batch batch;
  source->next(batch);
  const std::vector<std::string> expected = {"^kj|kj...... 000110000000",  // inputs, weights
                                             "^lg|lg...... 000110000000",
                                             "^o|o........ 001000000000"};
  for (int b = 0; b < 3; ++b) CHECK(row_text(batch, b) + " " + row_weights(batch, b) == expected[b]);
}

// ---------------------------------------------------------------------------------------------
// Each task, re-derived from its inputs
// ---------------------------------------------------------------------------------------------

TEST_CASE("copy: the answer is the question again, and only it is scored", "[tasks]") {
  // A small hand-checkable case: L = 8 holds n = 1..3, e.g. "^cab|cab" with weights 00001110.
  check_each_instance("copy", 8, [](const std::string& s, const std::string&) {
    const auto sep = separator_of(s);
    const std::string question = s.substr(1, sep - 1), answer = s.substr(sep + 1);
    const int n = int(question.size());
    CHECK(n >= 1);
    CHECK(answer == question);
    CHECK(int(s.size()) == 2 * n + 2);
    for (char c : question) CHECK(is_data_symbol(c, 16));
    std::vector<bool> is_answer(s.size(), false);
    for (int k = 0; k < n; ++k) is_answer[sep + 1 + k] = true;
    return is_answer;
  });
}

TEST_CASE("reverse: the answer is the question backwards", "[tasks]") {
  check_each_instance("reverse", 20, [](const std::string& s, const std::string&) {
    const auto sep = separator_of(s);
    std::string question = s.substr(1, sep - 1);
    const std::string answer = s.substr(sep + 1);
    std::reverse(question.begin(), question.end());
    CHECK(answer == question);
    std::vector<bool> is_answer(s.size(), false);
    for (std::size_t i = sep + 1; i < s.size(); ++i) is_answer[i] = true;
    return is_answer;
  });
}

TEST_CASE("assoc_recall: distinct keys, and the answer is the queried key's value", "[tasks]") {
  check_each_instance("assoc_recall", 40, [](const std::string& s, const std::string&) {
    const auto sep = separator_of(s);
    REQUIRE(s.size() == sep + 3);  // | kq vq
    std::map<char, char> value_of;
    for (std::size_t i = 1; i + 1 < sep; i += 2) {
      CHECK(std::isalpha(static_cast<unsigned char>(s[i])));
      CHECK(std::isdigit(static_cast<unsigned char>(s[i + 1])));
      CHECK(value_of.count(s[i]) == 0);  // keys are distinct
      value_of[s[i]] = s[i + 1];
    }
    CHECK((sep - 1) % 2 == 0);
    const char query = s[sep + 1], answer = s[sep + 2];
    REQUIRE(value_of.count(query) == 1);
    CHECK(answer == value_of[query]);
    std::vector<bool> is_answer(s.size(), false);
    is_answer[sep + 2] = true;  // the value only, not the query key
    return is_answer;
  });
}

TEST_CASE("induction: the block that ends the instance occurred before", "[tasks]") {
  std::set<int> blocks;
  check_each_instance("induction", 40, [&](const std::string& s, const std::string& w) {
    const int T = int(s.size());
    // The scored targets are one run: tokens T-m+1 .. T-1, i.e. targets T-m .. T-2.
    const int m = int(std::count(w.begin(), w.end(), '1')) + 1;
    CHECK((m >= 4 && m <= 8));
    blocks.insert(m);
    // The repeated block X (the last m tokens) occurs earlier, wholly before the repeat.
    const std::string block = s.substr(T - m);
    const auto first = s.find(block, 1);
    CHECK(first != std::string::npos);
    CHECK(int(first) <= T - 2 * m);
    for (char c : s.substr(1)) CHECK(is_data_symbol(c, 16));
    std::vector<bool> is_answer(s.size(), false);
    for (int i = T - m + 1; i < T; ++i) is_answer[i] = true;
    return is_answer;
  });
  CHECK(blocks == std::set<int>{4, 5, 6, 7, 8});  // block = 0: every length in 4..8
  // A fixed block length.
  auto fixed = make("induction", setup(8, 30, 30, Split::train), {{"block", std::int64_t(3)}});
  for (const Batch& batch : read(*fixed, 2))
    for (int b = 0; b < batch.batch; ++b) {
      const std::string w = row_weights(batch, b);
      CHECK(std::count(w.begin(), w.end(), '1') == 2);
    }
}

TEST_CASE("parity: the answer is the xor of the bits", "[tasks]") {
  std::set<char> answers;
  check_each_instance("parity", 20, [&](const std::string& s, const std::string&) {
    const auto sep = separator_of(s);
    REQUIRE(s.size() == sep + 2);
    const std::string bits = s.substr(1, sep - 1);
    CHECK(bits.find_first_not_of("01") == std::string::npos);
    const auto ones = std::count(bits.begin(), bits.end(), '1');
    CHECK(s.back() == (ones % 2 ? '1' : '0'));
    answers.insert(s.back());
    std::vector<bool> is_answer(s.size(), false);
    is_answer[sep + 1] = true;
    return is_answer;
  });
  CHECK(answers == std::set<char>{'0', '1'});
}

TEST_CASE("assoc_recall, key_len 2: keys are distinct letter pairs", "[tasks]") {
  check_each_instance(
      "assoc_recall", 40,
      [](const std::string& s, const std::string&) {
        const auto sep = separator_of(s);
        REQUIRE(s.size() == sep + 4);  // | kq (2 letters) vq
        CHECK((sep - 1) % 3 == 0);     // ^, then pairs of key_len + 1 = 3 tokens
        CHECK(int(s.size()) == 3 * int((sep - 1) / 3) + 5);  // length (n + 1)(key_len + 1) + 2
        std::map<std::string, char> value_of;
        for (std::size_t i = 1; i + 2 < sep + 1; i += 3) {
          const std::string key = s.substr(i, 2);
          for (char c : key) CHECK(std::isalpha(static_cast<unsigned char>(c)));
          CHECK(std::isdigit(static_cast<unsigned char>(s[i + 2])));
          CHECK(value_of.count(key) == 0);  // keys are distinct
          value_of[key] = s[i + 2];
        }
        const std::string query = s.substr(sep + 1, 2);
        REQUIRE(value_of.count(query) == 1);
        CHECK(s[sep + 3] == value_of[query]);
        std::vector<bool> is_answer(s.size(), false);
        is_answer[sep + 3] = true;  // the value only
        return is_answer;
      },
      {{"key_len", std::int64_t(2)}});
}

TEST_CASE("assoc_recall: key_len 1 keeps the single-letter layout (2n + 4)", "[tasks]") {
  auto source = make("assoc_recall", setup(4, 108, 108, Split::train));
  CHECK(sizes_of(*source).back() == 52);  // 52 distinct letters: at most 52 pairs, 108 tokens
  auto two =
      make("assoc_recall", setup(4, 300, 300, Split::train), {{"key_len", std::int64_t(2)}});
  CHECK(sizes_of(*two).back() == 98);     // 3n + 5 <= 300; 52^2 = 2704 keys would allow more
}

TEST_CASE("sort: the answer is the question sorted (a..z A..Z 0..9), all scored", "[tasks]") {
  // Order by position in the symbol table, not by byte value ('A' < 'a' in ASCII).
  const std::string order(kSymbols, kSymbolCount);
  auto rank = [&](char c) { return order.find(c); };
  for (std::int64_t alphabet : {std::int64_t(4), std::int64_t(62)}) {
    check_each_instance(
        "sort", 40,
        [&](const std::string& s, const std::string&) {
          const auto sep = separator_of(s);
          const std::string question = s.substr(1, sep - 1), answer = s.substr(sep + 1);
          CHECK(int(s.size()) == 2 * int(question.size()) + 2);
          for (char c : question) CHECK(is_data_symbol(c, int(alphabet)));
          // Sorted, and the same multiset of symbols as the question.
          for (std::size_t k = 1; k < answer.size(); ++k)
            CHECK(rank(answer[k - 1]) <= rank(answer[k]));
          std::string a = answer, q = question;
          std::sort(a.begin(), a.end());
          std::sort(q.begin(), q.end());
          CHECK(a == q);
          std::vector<bool> is_answer(s.size(), false);
          for (std::size_t i = sep + 1; i < s.size(); ++i) is_answer[i] = true;
          return is_answer;
        },
        {{"alphabet", alphabet}});
  }
}

// ---------------------------------------------------------------------------------------------
// Instance sizes: training sees every length that fits, evaluation beyond it only unseen ones
// ---------------------------------------------------------------------------------------------

TEST_CASE("training draws every size that fits in L", "[tasks]") {
  // copy at L = 32: n = 1..15 (2n + 2 <= 32).
  auto source = make("copy", setup(16, 32, 32, Split::train));
  std::set<std::size_t> lengths;
  for (const Batch& batch : read(*source, 16))
    for (int b = 0; b < batch.batch; ++b) lengths.insert(instance_of(batch, b).size());
  std::set<std::size_t> expected;
  for (int n = 1; n <= 15; ++n) expected.insert(2 * n + 2);
  CHECK(lengths == expected);
}

TEST_CASE("evaluation at 2x the training length uses only unseen lengths", "[tasks]") {
  for (const auto& name : kInstanceTasks) {
    INFO(name);
    auto source = make(name, setup(16, 64, 32, Split::valid));
    std::set<std::size_t> lengths;
    for (const Batch& batch : read(*source, int(kTaskEvalBatches))) {
      check_instance_layout(batch);
      for (int b = 0; b < batch.batch; ++b) lengths.insert(instance_of(batch, b).size());
    }
    CHECK(*lengths.begin() > 32);   // none fits in the training length
    CHECK(*lengths.rbegin() <= 64);
    CHECK(lengths.size() >= 8);     // and they spread over the unseen range
  }
  // copy exactly: n = 16..31, all of them.
  auto copy = make("copy", setup(16, 64, 32, Split::valid));
  std::set<std::size_t> lengths;
  for (const Batch& batch : read(*copy, int(kTaskEvalBatches)))
    for (int b = 0; b < batch.batch; ++b) lengths.insert(instance_of(batch, b).size());
  std::set<std::size_t> expected;
  for (int n = 16; n <= 31; ++n) expected.insert(2 * n + 2);
  CHECK(lengths == expected);
}

TEST_CASE("evaluation at the training length draws as training does", "[tasks]") {
  auto source = make("parity", setup(16, 16, 16, Split::valid));
  std::set<std::size_t> lengths;
  for (const Batch& batch : read(*source, int(kTaskEvalBatches)))
    for (int b = 0; b < batch.batch; ++b) lengths.insert(instance_of(batch, b).size());
  CHECK(*lengths.begin() == 4);    // n = 1
  CHECK(*lengths.rbegin() == 16);  // n = 13
  CHECK(lengths.size() == 13);
}

TEST_CASE("a setup a task cannot make is refused with a clear message", "[tasks]") {
  CHECK_THROWS_WITH(make("copy", setup(2, 3, 3, Split::train)),
                    "task 'copy': no instance fits in a segment of 3 tokens: the smallest (size 1) "
                    "takes 4");
  // 4 keys: at most 12 tokens, all seen when training at 16: nothing unseen at 32.
  CHECK_THROWS_WITH(
      make("assoc_recall", setup(2, 32, 16, Split::valid), {{"keys", std::int64_t(4)}}),
                    Contains("task 'assoc_recall': evaluation at length 32 has no instance size "
                             "unseen in training (length 16)"));
  // One token longer than training: copy lengths are even, so nothing new fits.
  CHECK_THROWS_WITH(make("copy", setup(2, 33, 32, Split::valid)),
                    Contains("has no instance size unseen"));
  TaskSetup small_vocab = setup(2, 16, 16, Split::train);
  small_vocab.vocab_size = 100;
  CHECK_THROWS_WITH(make("copy", small_vocab), Contains("model.vocab_size must be at least 125"));
  CHECK_THROWS_WITH(
      make("induction", setup(2, 32, 32, Split::train), {{"block", std::int64_t(1)}}),
                    Contains("block must be 0 (4..8) or >= 2"));
  CHECK_THROWS_WITH(make("copy", setup(0, 16, 16, Split::train)),
                    Contains("batch must be >= 1"));
  // Options set in code (not through the config loader) are checked too.
  CHECK_THROWS_WITH(
      make("copy", setup(2, 16, 16, Split::train), {{"alphabet", std::int64_t(100)}}),
                    "task 'copy': option 'alphabet' = 100 is out of its range");
  CHECK_THROWS_WITH(
      make("copy", setup(2, 16, 16, Split::train), {{"alphabet", std::string("ab")}}),
                    "task 'copy': option 'alphabet' must be integer, got string");
  CHECK_THROWS_WITH(make("copy", setup(2, 16, 16, Split::train), {{"alphabt", std::int64_t(4)}}),
                    "task 'copy': has no option 'alphabt'");
}

// ---------------------------------------------------------------------------------------------
// Splits, length bands, the gate, distinct instances
// ---------------------------------------------------------------------------------------------

// The length-generalization tasks of the study, and the options that give each a length axis.
const std::vector<std::pair<std::string, std::map<std::string, OptionValue>>> kStudyTasks = {
    {"copy", {}},
    {"reverse", {}},
    {"assoc_recall", {{"key_len", std::int64_t(2)}}},
    {"sort", {}}};

TEST_CASE("training draws are those of the code before splits (golden records)", "[tasks]") {
  // Computed with the code of commit 4384017, before Split existed: TaskSetup{batch 8, len 32,
  // train_len 32, evaluation = false / true at len 64, seed 3}, default options, 6 batches.
  // Split::train must reproduce evaluation = false bit for bit (so training runs are unchanged),
  // and Split::valid evaluation = true (at 2x nothing repeats, so distinctness changes nothing).
  struct Golden {
    std::string task;
    Split split;
    std::uint64_t fingerprint;
  };
  const std::vector<Golden> golden = {
      {"copy", Split::train, 0xda65699630c9225aULL},
      {"copy", Split::valid, 0xdab13224a4aaef73ULL},
      {"reverse", Split::train, 0xb55e1564a7230cdaULL},
      {"reverse", Split::valid, 0xff724955834bf213ULL},
      {"assoc_recall", Split::train, 0x6cd3ffc564191656ULL},
      {"assoc_recall", Split::valid, 0x5edc73f9405e9e18ULL},
      {"induction", Split::train, 0x8f39cc5e1d525e41ULL},
      {"induction", Split::valid, 0x354c748844f8a766ULL},
      {"parity", Split::train, 0xa6cf76be5431637dULL},
      {"parity", Split::valid, 0x6382c83a7224bbd3ULL},
      {"long_range", Split::train, 0xa690bc661a140deeULL},
      {"long_range", Split::valid, 0x765d667fea5ed9a7ULL},
  };
  for (const auto& g : golden) {
    INFO(g.task << " " << split_name(g.split));
    const int len = g.split == Split::train ? 32 : 64;
    auto source = make(g.task, setup(8, len, 32, g.split, 3));
    CHECK(fingerprint(*source, 6) == g.fingerprint);
  }
}

TEST_CASE("train, valid and test are three different draws", "[tasks]") {
  CHECK(std::string(split_name(Split::train)) == "train");
  CHECK(std::string(split_name(Split::valid)) == "valid");
  CHECK(std::string(split_name(Split::test)) == "test");
  for (std::uint64_t seed : {1, 2, 1000}) {
    const std::set<std::uint64_t> seeds = {task_seed(seed, Split::train),
                                           task_seed(seed, Split::valid),
                                           task_seed(seed, Split::test)};
    CHECK(seeds.size() == 3);
  }
  for (const auto& name : kGeneratedTasks) {
    INFO(name);
    auto train = make(name, setup(4, 64, 32, Split::train));
    auto valid = make(name, setup(4, 64, 32, Split::valid));
    auto test = make(name, setup(4, 64, 32, Split::test));
    auto test_again = make(name, setup(4, 64, 32, Split::test));
    const Batch t = read(*train, 1)[0], v = read(*valid, 1)[0], x = read(*test, 1)[0];
    CHECK_FALSE(same(v, x));
    CHECK_FALSE(same(t, x));
    CHECK(same(x, read(*test_again, 1)[0]));  // and test is reproducible
  }
  // No instance is shared between the valid and test sets of a large band.
  auto valid = make("copy", setup(16, 64, 32, Split::valid));
  auto test = make("copy", setup(16, 64, 32, Split::test));
  std::set<std::string> in_valid;
  for (const auto& s : instances_of(*valid, 16)) in_valid.insert(s);
  for (const auto& s : instances_of(*test, 16)) CHECK(in_valid.count(s) == 0);
}

TEST_CASE("each length factor tests instances longer than the previous factor's", "[tasks]") {
  // The study: train.seq_len = 32, factors 1.5, 2, 4, 8 -> segments 48, 64, 128, 256, each with
  // longer_than = the previous factor's segment (32 for the first). 70 batches of 16 rows =
  // 1,120 rows per (task, factor): all of them distinct instances.
  const int train_len = 32;
  const std::vector<int> lens = {48, 64, 128, 256};
  for (const auto& [name, options] : kStudyTasks) {
    std::vector<std::string> previous;
    int longer_than = train_len;
    for (int len : lens) {
      INFO(name << " at " << len << ", longer than " << longer_than);
      TaskSetup s = setup(16, len, train_len, Split::valid);
      s.longer_than = longer_than;
      s.eval_batches = 70;
      auto source = make(name, s, options);
      CHECK(source->batches_per_pass() == 70);
      const auto instances = instances_of(*source, 70);
      CHECK(std::count(instances.begin(), instances.end(), "") == 0);  // no row ran out
      CHECK(all_distinct(instances));
      for (const auto& inst : instances) {
        CHECK(int(inst.size()) > longer_than);
        CHECK(int(inst.size()) <= len);
      }
      if (!previous.empty()) CHECK(all_longer(instances, previous));
      previous = instances;
      longer_than = len;
    }
  }
}

TEST_CASE("an evaluation set is never a repeat of itself; an exhausted band leaves rows empty",
          "[tasks]") {
  // copy, alphabet 2, L = 8: n = 1..3, only 2 + 4 + 8 = 14 different instances. A set of 32 rows
  // holds each at most once; the rows that found nothing new are empty (not scored).
  TaskSetup s = setup(16, 8, 8, Split::valid);
  s.eval_batches = 2;
  auto source = make("copy", s, {{"alphabet", std::int64_t(2)}});
  const auto instances = instances_of(*source, 2);
  CHECK(all_distinct(instances));
  const auto empty = std::count(instances.begin(), instances.end(), "");
  CHECK(empty >= 32 - 14);
  CHECK(empty <= 32 - 12);  // 64 redraws per row find (nearly) all of them
  // The set is fixed: the same rows again after reset() and after reading past its end.
  source->reset();
  CHECK(instances_of(*source, 2) == instances);
  CHECK(instances_of(*source, 2) == instances);
  // A repeat draws again rather than leaving the row empty while new instances remain: L = 14
  // holds n = 1..6, 126 instances, and 48 rows find 48 different ones although n = 1 and 2
  // (6 instances) are drawn about 16 times.
  TaskSetup roomy = setup(16, 14, 14, Split::valid);
  roomy.eval_batches = 3;
  auto redrawn = make("copy", roomy, {{"alphabet", std::int64_t(2)}});
  const auto found = instances_of(*redrawn, 3);
  CHECK(all_distinct(found));
  CHECK(std::count(found.begin(), found.end(), "") == 0);
  // Training from the same setup repeats instances freely (and never leaves a row empty).
  auto train = make("copy", setup(16, 8, 8, Split::train), {{"alphabet", std::int64_t(2)}});
  const auto drawn = instances_of(*train, 2);
  CHECK_FALSE(all_distinct(drawn));
  CHECK(std::count(drawn.begin(), drawn.end(), "") == 0);
}

TEST_CASE("eval_batches sets the size of an evaluation set, long_range too", "[tasks]") {
  for (const auto& name : kGeneratedTasks) {
    INFO(name);
    TaskSetup s = setup(2, 32, 32, Split::test);
    s.eval_batches = 5;
    auto source = make(name, s);
    CHECK(source->batches_per_pass() == 5);
    const auto first = read(*source, 5);
    const auto wrapped = read(*source, 1);  // batch 5 is batch 0 again
    CHECK(same(wrapped[0], first[0]));
  }
  TaskSetup none = setup(2, 32, 32, Split::valid);
  none.eval_batches = 0;
  CHECK_THROWS_WITH(make("copy", none), Contains("eval_batches >= 1"));
}

TEST_CASE("the gate set holds only the top quarter of the training sizes", "[tasks]") {
  for (const auto& [name, options] : kStudyTasks) {
    INFO(name);
    auto train = make(name, setup(16, 32, 32, Split::train), options);
    const std::vector<int> trained = sizes_of(*train);
    const std::size_t keep = (trained.size() + 3) / 4;
    const std::vector<int> top(trained.end() - keep, trained.end());
    for (int len : {32, 64}) {  // at the training length, or padded into a longer segment
      TaskSetup s = setup(16, len, 32, Split::test);
      s.gate = true;
      auto gate = make(name, s, options);
      CHECK(sizes_of(*gate) == top);
      for (const auto& inst : instances_of(*gate, 16)) CHECK(inst.size() <= 32);
    }
  }
  // copy at 32 trains on n = 1..15 (lengths 4..32): the gate is n = 12..15, ceil(15 / 4) = 4.
  TaskSetup s = setup(16, 32, 32, Split::valid);
  s.gate = true;
  auto gate = make("copy", s);
  std::set<std::size_t> lengths;
  for (const auto& inst : instances_of(*gate, 16)) lengths.insert(inst.size());
  CHECK(lengths == std::set<std::size_t>{26, 28, 30, 32});
  // At least one size: assoc_recall with 1 key trains on n = 1 only.
  auto one = make("assoc_recall", s, {{"keys", std::int64_t(1)}});
  CHECK(sizes_of(*one) == std::vector<int>{1});
}

TEST_CASE("bands that cannot work are refused, naming the lengths", "[tasks]") {
  TaskSetup gate = setup(2, 16, 32, Split::valid);
  gate.gate = true;
  CHECK_THROWS_WITH(make("copy", gate),
                    Contains("its segment must be at least that long, got 16"));
  TaskSetup band = setup(2, 64, 32, Split::valid);
  band.longer_than = 64;
  CHECK_THROWS_WITH(make("copy", band),
                    "task 'copy': evaluation at length 64 has no instance size longer than 64: "
                    "the smallest longer one (size 32) takes 66 tokens");
  band.longer_than = 16;
  CHECK_THROWS_WITH(make("copy", band),
                    Contains("longer_than = 16 is below the training length 32"));
  // key_len 1: at most 52 pairs (108 tokens), so 8x of 32 has nothing beyond 4x.
  band = setup(2, 256, 32, Split::valid);
  band.longer_than = 128;
  CHECK_THROWS_WITH(make("assoc_recall", band),
                    Contains("the largest instance (size 52) takes only 108 tokens"));
  // Training takes neither option; long_range (a stream) has no gate.
  TaskSetup train = setup(2, 32, 32, Split::train);
  train.gate = true;
  CHECK_THROWS_WITH(make("copy", train), Contains("a training source (split train)"));
  gate = setup(2, 32, 32, Split::valid);
  gate.gate = true;
  CHECK_THROWS_WITH(make("long_range", gate), Contains("no gate"));
}

TEST_CASE("the checks above can fail: they catch the old overlapping bands and repeats",
          "[tasks]") {
  // Planted bug: factor 2 WITHOUT the longer_than chain draws from (32, 64], which contains the
  // whole 1.5x band (32, 48]. all_longer must say no. And a training set, which repeats freely,
  // must fail all_distinct. If these passed, the checks above would prove nothing.
  auto at_1_5 = make("copy", setup(16, 48, 32, Split::valid));
  auto at_2 = make("copy", setup(16, 64, 32, Split::valid));  // longer_than = 0 -> train_len
  const auto shorter = instances_of(*at_1_5, 16), longer = instances_of(*at_2, 16);
  CHECK_FALSE(all_longer(longer, shorter));
  CHECK(all_longer(longer, {"^ab|ab"}));  // and it does say yes when it should
  auto train = make("sort", setup(16, 6, 6, Split::train), {{"alphabet", std::int64_t(2)}});
  CHECK_FALSE(all_distinct(instances_of(*train, 4)));
  // Golden fingerprints notice a single changed token.
  auto a = make("copy", setup(8, 32, 32, Split::train, 3));
  auto b = make("copy", setup(8, 32, 32, Split::train, 3));
  Batch first;
  a->next(first);
  b->next(first);
  CHECK(fingerprint(*a, 1) == fingerprint(*b, 1));
  CHECK(fingerprint(*a, 1) != fingerprint(*b, 2));
}

// ---------------------------------------------------------------------------------------------
// long_range: a stream whose answers lie G > L tokens back
// ---------------------------------------------------------------------------------------------

TEST_CASE("long_range: rows are streams continued across batches", "[tasks]") {
  const int B = 4, L = 16, T = 24;
  auto source = make("long_range", setup(B, L, L, Split::train));
  const auto batches = read(*source, T);
  for (int t = 0; t < T; ++t) {
    const Batch& batch = batches[t];
    CHECK(batch.first_of_pass == (t == 0));
    CHECK(batch.start == std::int64_t(t) * L);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i + 1 < L; ++i)
        CHECK(batch.targets[b * L + i] == batch.inputs[b * L + i + 1]);
    if (t + 1 < T)  // row b of batch t+1 starts with the last target of row b of batch t
      for (int b = 0; b < B; ++b)
        CHECK(batches[t + 1].inputs[b * L] == batch.targets[b * L + L - 1]);
  }
}

TEST_CASE("long_range: every answer is the token G > L positions earlier in the stream", "[tasks]") {
  const int B = 4, L = 16, batches_read = 40;
  for (std::int64_t gap_option : {std::int64_t(0), std::int64_t(21)}) {
    const int G = gap_option ? int(gap_option) : L * 3 / 2;  // default: 1.5 * train length
    INFO("G = " << G);
    CHECK(G > L);
    auto source = make("long_range", setup(B, L, L, Split::train), {{"gap", gap_option}});
    const auto batches = read(*source, batches_read);
    long answers = 0, filler = 0, filler_equal = 0;
    for (int b = 0; b < B; ++b) {
      // Row b's stream: token p of the stream is the input at column p mod L of batch p / L.
      std::vector<std::int32_t> stream;
      for (const Batch& batch : batches)
        stream.insert(stream.end(), batch.inputs.begin() + b * L, batch.inputs.begin() + b * L + L);
      for (int t = 0; t < batches_read; ++t) {
        for (int i = 0; i < L; ++i) {
          const std::int64_t p = std::int64_t(t) * L + i + 1;  // stream position of the target
          if (p >= std::int64_t(stream.size()) || p < G) continue;
          const Batch& batch = batches[t];
          const bool weighted = batch.weights[b * L + i] != 0.0f;
          const bool equal = batch.targets[b * L + i] == stream[p - G];
          if (weighted) {
            ++answers;
            CHECK(equal);
            CHECK(p - G < std::int64_t(t) * L);  // the source is in an earlier segment
          } else {
            ++filler;
            filler_equal += equal;
          }
        }
      }
    }
    CHECK(answers > 100);
    // Nothing but the answers is correlated at distance G: filler matches by chance (1 / 16).
    CHECK(double(filler_equal) / double(filler) < 0.15);
  }
}

TEST_CASE("long_range: a row's stream does not depend on the segment length", "[tasks]") {
  auto short_segments = make("long_range", setup(2, 16, 16, Split::valid));
  auto long_segments = make("long_range", setup(2, 32, 16, Split::valid));
  std::vector<std::int32_t> a, c;
  for (const Batch& batch : read(*short_segments, 4))
    a.insert(a.end(), batch.inputs.begin(), batch.inputs.begin() + 16);  // row 0
  for (const Batch& batch : read(*long_segments, 2))
    c.insert(c.end(), batch.inputs.begin(), batch.inputs.begin() + 32);
  CHECK(a == c);
}

TEST_CASE("long_range: a gap not longer than the training segment is refused", "[tasks]") {
  CHECK_THROWS_WITH(
      make("long_range", setup(2, 16, 16, Split::train), {{"gap", std::int64_t(16)}}),
                    Contains("gap (16) must be longer than the training segment (16)"));
  CHECK_THROWS_WITH(make("long_range", setup(2, 16, 16, Split::train),
                         {{"gap", std::int64_t(20)}, {"block", std::int64_t(30)}}),
                    Contains("block (30) must not exceed gap (20)"));
}

// ---------------------------------------------------------------------------------------------
// make_batch_source: a Config -> the corpus or a task
// ---------------------------------------------------------------------------------------------

TEST_CASE("make_batch_source: lm streams the train or validation split", "[tasks]") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("poslab-test-tasks-" + std::to_string(::getpid()) + ".txt");
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + i % 26);
  std::ofstream(path) << text;

  Config cfg;
  cfg.data.path = path.string();
  cfg.data.valid_fraction = 0.1;  // the last 100 bytes
  cfg.train.batch_size = 2;
  auto train = make_batch_source(cfg, {Split::train, 8});
  auto valid = make_batch_source(cfg, {Split::valid, 8});
  Batch t, v;
  train->next(t);
  valid->next(v);
  CHECK(t.weights.empty());  // every target scored
  CHECK(t.first_of_pass);
  CHECK(decode(t.inputs.data(), 8) == text.substr(0, 8));
  CHECK(decode(v.inputs.data(), 8) == text.substr(900, 8));
  CHECK(valid->batches_per_pass() == (50 - 1) / 8);  // 100 valid bytes in 2 streams of 50
  std::filesystem::remove(path);
  // The split is cached: the file is gone, the source can still be made.
  CHECK_NOTHROW(make_batch_source(cfg, {Split::valid, 8}));
  // The corpus has no test split yet.
  CHECK_THROWS_WITH(make_batch_source(cfg, {Split::test, 8}), Contains("data.test_fraction"));
}

TEST_CASE("make_batch_source: a generated task from the config", "[tasks]") {
  Config cfg;  // made by hand: task options left empty, defaults fill in
  cfg.task.name = "reverse";
  cfg.train.batch_size = 3;
  cfg.train.seq_len = 16;
  auto train = make_batch_source(cfg, {Split::train, 16});
  auto eval = make_batch_source(cfg, {Split::valid, 32});
  CHECK(train->batch() == 3);
  CHECK(eval->len() == 32);
  Batch batch;
  eval->next(batch);
  check_instance_layout(batch);
  for (int b = 0; b < 3; ++b) CHECK(instance_of(batch, b).size() > 16);  // train_len = 16

  cfg.task.options = Options({{"alphabet", OptionValue(std::int64_t(2))}});
  make_batch_source(cfg, {Split::train, 16})->next(batch);
  for (int b = 0; b < 3; ++b)
    for (char c : instance_of(batch, b)) CHECK(std::string("^|ab").find(c) != std::string::npos);

  // eval.batches sizes a task's evaluation set (0 -> 16); the spec's band and gate reach it.
  cfg.eval.batches = 70;
  CHECK(make_batch_source(cfg, {Split::test, 32})->batches_per_pass() == 70);
  cfg.eval.batches = 0;
  CHECK(make_batch_source(cfg, {Split::valid, 32})->batches_per_pass() == kTaskEvalBatches);
  auto band = make_batch_source(cfg, {Split::valid, 64, 32});
  for (const auto& inst : instances_of(*band, 4)) CHECK(inst.size() > 32);
  auto gate = make_batch_source(cfg, {Split::test, 16, 0, true});
  for (const auto& inst : instances_of(*gate, 4)) CHECK(inst.size() >= 14);  // n = 6, 7 of 1..7
  // Evaluation keeps the seed train.seed + 1: the valid split is the old evaluation set.
  TaskSetup old_eval = setup(3, 32, 16, Split::valid, cfg.train.seed + 1);
  auto reference = make("reverse", old_eval, {{"alphabet", std::int64_t(2)}});
  auto valid = make_batch_source(cfg, {Split::valid, 32});
  CHECK(same(read(*valid, 1)[0], read(*reference, 1)[0]));

  cfg.task.name = "xyzzy";
  CHECK_THROWS_WITH(make_batch_source(cfg, {Split::train, 16}),
                    Contains("unknown task 'xyzzy'"));
}
