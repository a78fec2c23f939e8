// The generated tasks (src/tasks): determinism, the batch layout every task shares, and for each
// task an independent re-derivation of its answers from its inputs. The checks below never reuse
// the generators' code: they parse the printed rows ("^cab|cab....") the way a person would.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

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
void check_each_instance(const std::string& task, int L, Answers&& answers) {
  auto source = make(task, setup(16, L, L, Split::train));
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
  CHECK_THROWS_WITH(make("assoc_recall", setup(2, 32, 16, Split::valid), {{"keys", std::int64_t(4)}}),
                    Contains("task 'assoc_recall': evaluation at length 32 has no instance size "
                             "unseen in training (length 16)"));
  // One token longer than training: copy lengths are even, so nothing new fits.
  CHECK_THROWS_WITH(make("copy", setup(2, 33, 32, Split::valid)), Contains("has no instance size unseen"));
  TaskSetup small_vocab = setup(2, 16, 16, Split::train);
  small_vocab.vocab_size = 100;
  CHECK_THROWS_WITH(make("copy", small_vocab), Contains("model.vocab_size must be at least 125"));
  CHECK_THROWS_WITH(make("induction", setup(2, 32, 32, Split::train), {{"block", std::int64_t(1)}}),
                    Contains("block must be 0 (4..8) or >= 2"));
  CHECK_THROWS_WITH(make("copy", setup(0, 16, 16, Split::train)), Contains("batch must be >= 1"));
  // Options set in code (not through the config loader) are checked too.
  CHECK_THROWS_WITH(make("copy", setup(2, 16, 16, Split::train), {{"alphabet", std::int64_t(100)}}),
                    "task 'copy': option 'alphabet' = 100 is out of its range");
  CHECK_THROWS_WITH(make("copy", setup(2, 16, 16, Split::train), {{"alphabet", std::string("ab")}}),
                    "task 'copy': option 'alphabet' must be integer, got string");
  CHECK_THROWS_WITH(make("copy", setup(2, 16, 16, Split::train), {{"alphabt", std::int64_t(4)}}),
                    "task 'copy': has no option 'alphabt'");
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
  CHECK_THROWS_WITH(make("long_range", setup(2, 16, 16, Split::train), {{"gap", std::int64_t(16)}}),
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

  cfg.task.name = "xyzzy";
  CHECK_THROWS_WITH(make_batch_source(cfg, {Split::train, 16}), Contains("unknown task 'xyzzy'"));
}
