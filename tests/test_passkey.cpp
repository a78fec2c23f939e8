// Passkey retrieval (tasks/passkey.hpp, tasks/passkey_mix.hpp, eval/passkey_eval.hpp): the
// instances are read back as text, the way a person would check them; the scoring is checked on
// planted model outputs; greedy decoding is done step by step with real models and compared
// with the one-pass rule of passkey_eval.hpp; the config rules say what is wrong and where.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "config/load.hpp"
#include "encodings/registry.hpp"
#include "model/transformer.hpp"
#include "tasks/make_source.hpp"
#include "tasks/passkey.hpp"
#include "tasks/passkey_mix.hpp"
#include "tasks/task.hpp"
#include "eval/passkey_eval.hpp"
#include "train/registered_choices.hpp"

using namespace poslab;
using Catch::Contains;

namespace {

const std::string kFillerUnit =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

// One instance of input length L as text (L + 1 characters). A guard after the text must stay.
std::string instance_text(const PasskeyGenerator& g, int L, double depth, Rng& rng,
                          PasskeyInstance* where = nullptr) {
  std::vector<std::int32_t> t(std::size_t(L) + 2, -7);
  const PasskeyInstance w = g.generate(L, depth, rng, t.data());
  REQUIRE(t[L + 1] == -7);  // nothing written past L + 1 bytes
  std::string s;
  for (int i = 0; i <= L; ++i) {
    REQUIRE(t[i] >= 0);  // every byte written
    REQUIRE(t[i] < 256);
    s += char(t[i]);
  }
  if (where) *where = w;
  return s;
}

// A corpus file of three bands, so a filler byte says which split it came from under the
// position split [train | valid | test] with valid_fraction = test_fraction = 0.1:
// train 'a'..'j' repeating, valid 'V', test 'T'.
struct BandedCorpus {
  std::string path;
  BandedCorpus() {
    path = (std::filesystem::temp_directory_path() /
            ("poslab_passkey_" + std::to_string(::getpid()) + ".txt")).string();
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 8000; ++i) out << char('a' + i % 10);
    out << std::string(1000, 'V') << std::string(1000, 'T');
  }
  ~BandedCorpus() { std::filesystem::remove(path); }
};

Config lm_config(const std::string& corpus) {
  Config c;
  c.data.path = corpus;
  c.data.valid_fraction = 0.1;
  c.data.test_fraction = 0.1;
  c.train.seq_len = 128;
  c.train.batch_size = 4;
  return c;
}

Config tiny_passkey_config(const std::string& encoding) {
  Config c;
  c.model.d_model = 16;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.d_inner = 32;
  c.encoding.type = encoding;
  c.encoding.options = Options::defaults(find_encoding(encoding)->options);
  if (encoding == "learned") c.encoding.options.set("max_len", std::int64_t(512));
  return c;
}

Config load_pk(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return config_from_string(text, "pk.toml", registered_choices(), overrides);
}

}  // namespace

// --- The instance ---------------------------------------------------------------------------

TEST_CASE("passkey: the key line and the fixed part are the paper's, 104 bytes", "[passkey]") {
  const PasskeyFormat paper = PasskeyFormat::paper;
  CHECK(passkey_key_line("12345", paper) ==
        "The pass key is 12345. Remember it. 12345 is the pass key.");
  CHECK(passkey_question(paper) == "What is the pass key? The pass key is");
  // 3 line breaks + 58 (key line) + 37 (question) + 6 (" NNNNN")
  CHECK(passkey_fixed_bytes(paper) == 104);
  CHECK(passkey_min_length(paper) == 103);
  CHECK(passkey_format_from_name("paper") == paper);
}

TEST_CASE("passkey: the compact prompt takes 28 bytes, so an instance at L = 64 is half filler",
          "[passkey]") {
  const PasskeyFormat compact = PasskeyFormat::compact;
  CHECK(passkey_format_from_name("compact") == compact);
  CHECK_THROWS_WITH(passkey_format_from_name("short"), Contains("\"short\""));
  CHECK(passkey_key_line("12345", compact) == "key is 12345.");
  CHECK(passkey_question(compact) == "key is");
  // 3 line breaks + 13 (key line) + 6 (question) + 6 (" NNNNN")
  CHECK(passkey_fixed_bytes(compact) == 28);
  CHECK(passkey_min_length(compact) == 27);
  CHECK(passkey_fixed_bytes(compact) <= 64 / 2);

  // The instance read back as text, byte by byte as the layout in passkey.hpp says.
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr, "the sentence", compact);
  for (int L : {27, 64, 128})
    for (double depth : {0.0, 0.5, 1.0}) {
      INFO("L = " << L << ", depth " << depth);
      Rng rng(11);
      PasskeyInstance w;
      const std::string text = instance_text(g, L, depth, rng, &w);
      const int F = L + 1 - 28;
      const long before = std::lround(depth * F);
      std::string repeated;
      while (repeated.size() < std::size_t(F)) repeated += kFillerUnit;
      const std::string expected = repeated.substr(0, before) + "\nkey is " + w.digits + ".\n" +
                                   repeated.substr(0, F - before) + "\nkey is " + w.digits;
      CHECK(text == expected);
      CHECK(w.filler_before == before);
      CHECK(w.key_line_begin == before + 1);
      CHECK(w.answer_begin == L + 1 - 6);
      CHECK(text.substr(w.answer_begin) == " " + w.digits);
    }
  // At L = 64 with the key line in the middle: the whole instance, 65 bytes, 37 of filler.
  Rng rng(11);
  const std::string at64 = instance_text(g, 64, 0.5, rng);
  CHECK(at64.size() == 65);
  const std::string key = at64.substr(at64.size() - 5);
  // F = 37: round(0.5 * 37) = 19 bytes before the key line, 18 after.
  CHECK(at64 == "The grass is green." + std::string("\nkey is ") + key +
                    ".\nThe grass is green\nkey is " + key);
  // The same Rng hides the same key in both formats (the format draws nothing).
  const PasskeyGenerator paper(PasskeyFiller::sentence, nullptr);
  Rng a(9), b(9);
  PasskeyInstance wa, wb;
  instance_text(g, 200, 0.5, a, &wa);
  instance_text(paper, 200, 0.5, b, &wb);
  CHECK(wa.digits == wb.digits);
}

TEST_CASE("passkey: an instance is L + 1 bytes: filler, key line at the depth, question, key",
          "[passkey]") {
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr);
  for (int L : {103, 128, 250, 1000})
    for (double depth : {0.0, 0.1, 0.25, 0.5, 0.75, 1.0}) {
      INFO("L = " << L << ", depth " << depth);
      Rng rng(11);
      PasskeyInstance w;
      const std::string text = instance_text(g, L, depth, rng, &w);
      const int F = L + 1 - 104;
      // The key: five digits, no leading zero.
      REQUIRE(w.digits.size() == 5);
      CHECK(std::all_of(w.digits.begin(), w.digits.end(), ::isdigit));
      CHECK(w.digits[0] != '0');
      // Parsed from the text: "\n<key line>\n" after exactly round(depth * F) filler bytes.
      const std::string key_line = "The pass key is " + w.digits + ". Remember it. " + w.digits +
                                   " is the pass key.";
      const std::size_t key_at = text.find("\n" + key_line + "\n");
      REQUIRE(key_at != std::string::npos);
      CHECK(long(key_at) == std::lround(depth * F));
      CHECK(int(key_at) + 1 == w.key_line_begin);
      CHECK(w.filler_before == int(key_at));
      CHECK(w.filler_before + w.filler_after == F);
      // The end: "\nWhat is the pass key? The pass key is NNNNN", the answer the last 6 bytes.
      const std::string tail = "\nWhat is the pass key? The pass key is " + w.digits;
      REQUIRE(text.size() >= tail.size());
      CHECK(text.substr(text.size() - tail.size()) == tail);
      CHECK(w.answer_begin == L + 1 - 6);
      CHECK(text.substr(w.answer_begin) == " " + w.digits);
      // The filler: the paper's sentence repeated, before and after both cut from its start.
      const std::string after = text.substr(key_at + 1 + key_line.size() + 1, F - key_at);
      std::string repeated;
      while (repeated.size() < std::size_t(F)) repeated += kFillerUnit;
      CHECK(text.substr(0, key_at) == repeated.substr(0, key_at));
      CHECK(after == repeated.substr(0, F - key_at));
    }
}

TEST_CASE("passkey: the same seed gives the same instance, another seed another key",
          "[passkey]") {
  auto corpus = std::make_shared<std::vector<std::int32_t>>();
  for (int i = 0; i < 5000; ++i) corpus->push_back('a' + (i * 7919) % 26);
  for (PasskeyFiller filler :
       {PasskeyFiller::sentence, PasskeyFiller::corpus, PasskeyFiller::sentence_shifted}) {
    const PasskeyGenerator g(filler, corpus);
    Rng a(5), b(5), c(6);
    std::set<std::string> keys;
    for (int i = 0; i < 20; ++i) {
      PasskeyInstance wa, wb, wc;
      const std::string ta = instance_text(g, 300, 0.5, a, &wa);
      CHECK(ta == instance_text(g, 300, 0.5, b, &wb));
      instance_text(g, 300, 0.5, c, &wc);
      keys.insert(wa.digits);
      if (i == 0) CHECK(wa.digits != wc.digits);
    }
    CHECK(keys.size() >= 19);  // 20 draws from 90,000 keys
  }
}

TEST_CASE("passkey: the corpus filler is one window of the split, the key line inserted into it",
          "[passkey]") {
  auto corpus = std::make_shared<std::vector<std::int32_t>>();
  std::string as_text;
  for (int i = 0; i < 3000; ++i) {  // no window repeats: a 3-letter code per position
    const char c = char('a' + (i / 26 / 26) % 26), d = char('a' + (i / 26) % 26),
               e = char('a' + i % 26);
    for (char x : {c, d, e}) corpus->push_back(x), as_text += x;
  }
  const PasskeyGenerator g(PasskeyFiller::corpus, corpus);
  Rng rng(3);
  std::set<std::size_t> starts;
  for (int i = 0; i < 10; ++i) {
    PasskeyInstance w;
    const std::string text = instance_text(g, 400, 0.3, rng, &w);
    const int F = 400 + 1 - 104;
    const std::string before = text.substr(0, w.filler_before);
    const std::string after =
        text.substr(w.key_line_begin + 58 + 1, std::size_t(w.filler_after));
    const std::size_t at = as_text.find(before + after);
    REQUIRE(at != std::string::npos);  // contiguous in the corpus
    CHECK(int(before.size() + after.size()) == F);
    starts.insert(at);
  }
  CHECK(starts.size() > 1);  // the window's start is drawn
}

TEST_CASE("passkey: the corpus filler comes from the evaluated split, training's from train",
          "[passkey]") {
  const BandedCorpus file;
  Config c = lm_config(file.path);
  for (const auto& [split, letters] :
       std::vector<std::pair<Split, std::string>>{{Split::valid, "V"}, {Split::test, "T"},
                                                   {Split::train, "abcdefghij"}}) {
    INFO(split_name(split));
    const PasskeyGenerator g = make_passkey_generator(c, split);
    Rng rng(1);
    for (double depth : {0.0, 0.5, 1.0}) {
      PasskeyInstance w;
      const std::string text = instance_text(g, 500, depth, rng, &w);
      const std::string filler =
          text.substr(0, w.filler_before) +
          text.substr(w.key_line_begin + 59, std::size_t(w.filler_after));
      REQUIRE(filler.size() == std::size_t(501 - 104));
      CHECK(filler.find_first_not_of(letters) == std::string::npos);
    }
  }
  // The training mix cuts its filler from the train split too.
  c.train.passkey_fraction = 1.0;
  auto train = make_batch_source(c, SourceSpec{.split = Split::train, .len = 128});
  Batch b;
  train->next(b);
  for (int row = 0; row < b.batch; ++row) {
    std::string text(b.inputs.begin() + row * 128, b.inputs.begin() + (row + 1) * 128);
    text += char(b.targets[row * 128 + 127]);  // the instance's L + 1 bytes
    const std::size_t key_at = text.find("\nThe pass key is ");
    REQUIRE(key_at != std::string::npos);
    const std::string filler = text.substr(0, key_at) +
                               text.substr(key_at + 60, text.size() - 44 - (key_at + 60));
    CHECK(filler.size() == std::size_t(129 - 104));
    CHECK(filler.find_first_not_of("abcdefghij") == std::string::npos);
  }
  // The sentence filler reads no corpus at all.
  c.eval.passkey_filler = "sentence";
  c.data.path = "/nonexistent/corpus";
  CHECK_NOTHROW(make_passkey_generator(c, Split::test));
}

TEST_CASE("passkey: lengths, depths and corpora that cannot make an instance are refused",
          "[passkey]") {
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr);
  std::vector<std::int32_t> t(2000);
  Rng rng(1);
  CHECK_THROWS_WITH(g.generate(102, 0.5, rng, t.data()),
                    Contains("(paper format) needs a length of at least 103 bytes") &&
                        Contains("got 102"));
  CHECK_NOTHROW(g.generate(103, 0.5, rng, t.data()));
  const PasskeyGenerator compact(PasskeyFiller::sentence, nullptr, "", PasskeyFormat::compact);
  CHECK_THROWS_WITH(compact.generate(26, 0.5, rng, t.data()),
                    Contains("(compact format) needs a length of at least 27 bytes") &&
                        Contains("got 26"));
  CHECK_NOTHROW(compact.generate(27, 0.5, rng, t.data()));
  CHECK_THROWS_WITH(g.generate(200, 1.5, rng, t.data()), Contains("depth must lie in [0, 1]"));
  CHECK_THROWS_WITH(g.generate(200, -0.1, rng, t.data()), Contains("depth must lie in [0, 1]"));
  CHECK_THROWS_WITH(g.generate(200, std::nan(""), rng, t.data()), Contains("depth"));
  auto small = std::make_shared<std::vector<std::int32_t>>(50, 'x');
  const PasskeyGenerator from_small(PasskeyFiller::corpus, small, "the test split of tiny.txt");
  CHECK_THROWS_WITH(from_small.generate(200, 0.5, rng, t.data()),
                    Contains("97 bytes of the test split of tiny.txt, which holds only 50"));
  CHECK_THROWS_WITH(passkey_filler_from_name("lorem"), Contains("\"lorem\""));
}

TEST_CASE("passkey: the shifted sentence filler cuts before and after from random offsets",
          "[passkey]") {
  // Written from the rule: filler byte i of a run starting at offset s is
  // S[(s + i) mod (n + 1)], where S is the sentence followed by one space (n + 1 bytes).
  const std::string S = std::string(kPasskeyFillerSentence) + " ";
  const int period = int(S.size());
  const PasskeyGenerator shifted(PasskeyFiller::sentence_shifted, nullptr, "the sentence",
                                 PasskeyFormat::compact);
  const PasskeyGenerator plain(PasskeyFiller::sentence, nullptr, "the sentence",
                               PasskeyFormat::compact);
  std::set<char> after_key_line;  // the byte right after the key line's "\n"
  std::set<int> before_offsets;
  for (int n = 0; n < 200; ++n) {
    Rng rng(n), plain_rng(n);  // the same seed: the same first draw, the key
    PasskeyInstance w, wp;
    const std::string t = instance_text(shifted, 64, 0.5, rng, &w);
    const std::string tp = instance_text(plain, 64, 0.5, plain_rng, &wp);
    CHECK(w.digits == wp.digits);  // the key is drawn first, as with "sentence"
    CHECK(w.filler_before == wp.filler_before);
    const std::string before = t.substr(0, w.filler_before);
    const int after_at = w.key_line_begin + 13 + 1;  // "key is NNNNN." then "\n"
    const std::string after = t.substr(after_at, w.filler_after);
    // Each run is a contiguous piece of the endless sentence: find its offset.
    auto offset_of = [&](const std::string& run) {
      for (int s = 0; s < period; ++s) {
        bool ok = true;
        for (std::size_t i = 0; i < run.size() && ok; ++i) ok = run[i] == S[(s + i) % period];
        if (ok) return s;
      }
      return -1;
    };
    const int sb = offset_of(before), sa = offset_of(after);
    REQUIRE(sb >= 0);
    REQUIRE(sa >= 0);
    before_offsets.insert(sb);
    after_key_line.insert(after[0]);
    CHECK(tp.substr(after_at, 1) == "T");  // the plain sentence: always "The grass..."
  }
  CHECK(after_key_line.size() >= 10);  // no landmark: many different bytes follow the key line
  CHECK(before_offsets.size() >= 30);
  CHECK(passkey_filler_from_name("sentence_shifted") == PasskeyFiller::sentence_shifted);
}

// --- Scoring --------------------------------------------------------------------------------

TEST_CASE("passkey scoring: an oracle scores 1, a wrong model 0, a missed space only greedy",
          "[passkey]") {
  const int L = 150, V = 256;
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr);
  std::vector<std::int32_t> text(L + 1);
  Rng rng(2);
  g.generate(L, 0.5, rng, text.data());
  // Planted logits [L, V]: 5 at the byte `pick(p)` says, 0 elsewhere.
  auto planted = [&](auto pick) {
    std::vector<float> z(std::size_t(L) * V, 0.0f);
    for (int p = 0; p < L; ++p) z[std::size_t(p) * V + pick(p)] = 5.0f;
    return z;
  };
  const auto oracle = planted([&](int p) { return text[p + 1]; });
  PasskeyRowScore s = score_passkey_row(oracle.data(), L, V, text.data());
  CHECK(s.digits_right == 5);
  CHECK(s.space_right);
  CHECK(s.exact());
  CHECK(s.greedy());
  // -log softmax at the right byte: log(e^5 + 255) - 5, for each of 5 digits.
  CHECK(s.digit_loss == Approx(5 * (std::log(std::exp(5.0) + 255) - 5)).epsilon(1e-6));

  const auto wrong = planted([&](int p) { return text[p + 1] == '7' ? '8' : '7'; });
  s = score_passkey_row(wrong.data(), L, V, text.data());
  CHECK(s.digits_right == 0);
  CHECK(!s.exact());
  CHECK(!s.greedy());

  const int space_at = L - 6;  // predicts text[L - 5] = ' '
  REQUIRE(text[space_at + 1] == ' ');
  const auto no_space = planted([&](int p) { return p == space_at ? int('x') : text[p + 1]; });
  s = score_passkey_row(no_space.data(), L, V, text.data());
  CHECK(s.exact());
  CHECK(!s.greedy());

  const auto one_digit_off = planted([&](int p) { return p == L - 3 ? int('x') : text[p + 1]; });
  s = score_passkey_row(one_digit_off.data(), L, V, text.data());
  CHECK(s.digits_right == 4);
  CHECK(!s.exact());
  CHECK(!s.greedy());
}

TEST_CASE("passkey: one-pass greedy equals greedy decoding byte by byte, with real models",
          "[passkey]") {
  // Decode 6 bytes after "The pass key is" one forward pass per byte (the bytes not yet written
  // hold '.'). Scored against its own output as the answer, the one-pass rule must call it
  // right; with one byte changed, wrong. This is the causality the rule rests on.
  const int L = 140;
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr);
  for (const std::string encoding : {"none", "sinusoidal", "learned", "rope", "alibi",
                                     "transformer_xl", "t5_bias", "shaw"}) {
    INFO(encoding);
    const Config c = tiny_passkey_config(encoding);
    TransformerLM<float> model(c.model, c.encoding, c.memory);
    model.init(3);
    model.set_inference_only(true);
    std::vector<std::int32_t> text(L + 1);
    Rng rng(4);
    g.generate(L, 0.25, rng, text.data());
    const int prompt = L + 1 - kPasskeyAnswer;  // bytes before " NNNNN"
    std::vector<std::int32_t> inputs(text.begin(), text.begin() + L), targets(L, '.');
    for (int i = prompt; i < L; ++i) inputs[i] = '.';
    std::vector<std::int32_t> decoded;
    const int V = c.model.vocab_size;
    for (int k = 0; k < kPasskeyAnswer; ++k) {
      model.reset_memory();
      model.forward(inputs.data(), targets.data(), nullptr, 1, L, 0, false);
      const float* z = model.logits().data() + std::size_t(prompt - 1 + k) * V;
      const std::int32_t byte = std::int32_t(std::max_element(z, z + V) - z);
      decoded.push_back(byte);
      if (prompt + k < L) inputs[prompt + k] = byte;
    }
    std::vector<std::int32_t> own(text.begin(), text.begin() + prompt);
    own.insert(own.end(), decoded.begin(), decoded.end());  // [L + 1]
    std::vector<std::int32_t> in(own.begin(), own.begin() + L), tgt(own.begin() + 1, own.end());
    model.reset_memory();
    model.forward(in.data(), tgt.data(), nullptr, 1, L, 0, false);
    PasskeyRowScore s = score_passkey_row(model.logits().data(), L, V, own.data());
    CHECK(s.space_right);
    CHECK(s.digits_right == kPasskeyDigits);
    CHECK(s.greedy());
    own[prompt + 3] = own[prompt + 3] == 'q' ? 'r' : 'q';  // not what greedy wrote
    in.assign(own.begin(), own.begin() + L);
    tgt.assign(own.begin() + 1, own.end());
    model.reset_memory();
    model.forward(in.data(), tgt.data(), nullptr, 1, L, 0, false);
    s = score_passkey_row(model.logits().data(), L, V, own.data());
    CHECK(s.space_right);
    CHECK(!s.greedy());
  }
}

TEST_CASE("passkey evaluation: a cell is deterministic, its scores consistent, memory restored",
          "[passkey]") {
  Config c = tiny_passkey_config("rope");
  c.memory.mem_len = 16;
  TransformerLM<float> model(c.model, c.encoding, c.memory);
  model.init(1);
  const PasskeyGenerator g(PasskeyFiller::sentence, nullptr);
  const PasskeyCell cell{1.0, 120, 0.5};
  const PasskeyCellResult a = evaluate_passkey_cell(model, g, cell, 7, 3, 9, Split::test);
  const PasskeyCellResult b = evaluate_passkey_cell(model, g, cell, 7, 3, 9, Split::test);
  CHECK(a.instances == 7);
  CHECK(a.loss == b.loss);  // bit-identical, also with a last batch of 1 row
  CHECK(a.digit_accuracy == b.digit_accuracy);
  CHECK(a.loss > 0);
  CHECK(a.greedy_exact_match <= a.exact_match);
  CHECK(model.mem_len() == 16);
  // Rows per pass do not change the result (each instance is its own row).
  const PasskeyCellResult one_row = evaluate_passkey_cell(model, g, cell, 7, 1, 9, Split::test);
  CHECK(one_row.loss == Approx(a.loss).epsilon(1e-5));
  // Another split (or seed) draws other instances.
  const PasskeyCellResult valid = evaluate_passkey_cell(model, g, cell, 7, 3, 9, Split::valid);
  CHECK(valid.loss != a.loss);
}

TEST_CASE("passkey cells: factors sorted, depths as configured, lengths rounded", "[passkey]") {
  Config c;
  c.train.seq_len = 100;
  c.eval.passkey_length_factors = {4, 1.5};
  c.eval.passkey_depths = {1, 0};
  const std::vector<PasskeyCell> cells = passkey_cells(c);
  REQUIRE(cells.size() == 4);
  CHECK(cells[0].seq_len == 150);
  CHECK(cells[0].depth == 1);
  CHECK(cells[1].depth == 0);
  CHECK(cells[3].seq_len == 400);
}

// --- The training mix -----------------------------------------------------------------------

TEST_CASE("passkey mix: a seeded fraction of the rows, the rest untouched", "[passkey]") {
  const BandedCorpus file;
  Config c = lm_config(file.path);
  c.train.batch_size = 8;
  auto plain = make_batch_source(c, SourceSpec{.split = Split::train, .len = 128});
  c.train.passkey_fraction = 0.25;
  auto mixed = make_batch_source(c, SourceSpec{.split = Split::train, .len = 128});
  auto again = make_batch_source(c, SourceSpec{.split = Split::train, .len = 128});
  const auto* mix = dynamic_cast<const PasskeyMix*>(mixed.get());
  REQUIRE(mix != nullptr);
  CHECK(dynamic_cast<const PasskeyMix*>(plain.get()) == nullptr);  // fraction 0: no wrapper
  long rows = 0, replaced = 0;
  for (int t = 0; t < 50; ++t) {
    Batch p, m, a;
    plain->next(p);
    mixed->next(m);
    again->next(a);
    CHECK(m.inputs == a.inputs);  // the same seed: the same rows and instances
    CHECK(m.first_of_pass == p.first_of_pass);
    CHECK(m.start == p.start);
    for (int row = 0; row < 8; ++row, ++rows) {
      const auto from = std::size_t(row) * 128;
      const std::string in(m.inputs.begin() + from, m.inputs.begin() + from + 128);
      const std::string tgt(m.targets.begin() + from, m.targets.begin() + from + 128);
      CHECK(in.substr(1) == tgt.substr(0, 127));  // targets are the next bytes
      if (std::equal(m.inputs.begin() + from, m.inputs.begin() + from + 128,
                     p.inputs.begin() + from))
        continue;
      ++replaced;
      CHECK(in.find("Remember it.") != std::string::npos);
      const std::size_t key_at = tgt.find("The pass key is ");
      REQUIRE(key_at != std::string::npos);
      // The answer: a space and the key. (Compared in two parts: `" " + std::string` here made
      // GCC 12 print a false -Wrestrict warning in every first build.)
      CHECK(tgt[tgt.size() - 6] == ' ');
      CHECK(tgt.substr(tgt.size() - 5) == tgt.substr(key_at + 16, 5));
      CHECK(tgt.find("What is the pass key? The pass key is ") != std::string::npos);
    }
  }
  CHECK(replaced == mix->rows_replaced());
  CHECK(replaced > rows * 0.15);
  CHECK(replaced < rows * 0.35);
}

TEST_CASE("passkey mix: the compact prompt fits training rows of 64 bytes", "[passkey]") {
  const BandedCorpus file;
  Config c = lm_config(file.path);
  c.train.seq_len = 64;
  c.train.batch_size = 8;
  c.train.passkey_fraction = 0.5;
  c.eval.passkey_format = "compact";
  auto mixed = make_batch_source(c, SourceSpec{.split = Split::train, .len = 64});
  long rows = 0, replaced = 0;
  for (int t = 0; t < 20; ++t) {
    Batch m;
    mixed->next(m);
    for (int row = 0; row < 8; ++row, ++rows) {
      // The row's L + 1 bytes: its inputs and its last target.
      std::string text(m.inputs.begin() + row * 64, m.inputs.begin() + (row + 1) * 64);
      text += char(m.targets[row * 64 + 63]);
      if (text.find_first_not_of("abcdefghij") == std::string::npos) continue;  // plain text
      ++replaced;
      const std::string key = text.substr(60);  // the last five bytes
      const std::size_t key_at = text.find("\nkey is " + key + ".\n");
      REQUIRE(key_at != std::string::npos);
      CHECK(text.substr(65 - 13) == "\nkey is " + key);  // the question and the answer
      // The rest is 37 bytes of filler from the train split.
      const std::string filler = text.substr(0, key_at) + text.substr(key_at + 15, 65 - 13 -
                                                                                       (key_at + 15));
      CHECK(filler.size() == 37u);
      CHECK(filler.find_first_not_of("abcdefghij") == std::string::npos);
    }
  }
  CHECK(replaced > rows * 0.35);
  CHECK(replaced < rows * 0.65);
}

TEST_CASE("passkey mix with PoSE: the instance rows take the batch's skipping ids", "[passkey]") {
  // PoSE (train.pose_target_len) trains at L with ids that skip to cover L'. With the mix, an
  // instance row is read at the batch's ids like the text rows beside it, so its question can
  // lie up to L' - 1 positions after its key line. The loader used to refuse the pair.
  const BandedCorpus file;
  CHECK(load_pk("[train]\nseq_len = 64\npose_target_len = 256\npasskey_fraction = 0.5\n"
                "[encoding]\ntype = \"rope\"\n[eval]\npasskey_format = \"compact\"\n")
            .train.passkey_fraction == 0.5);
  Config c = lm_config(file.path);
  c.train.seq_len = 64;
  c.train.batch_size = 8;
  c.train.pose_target_len = 256;
  c.eval.passkey_format = "compact";
  auto pose = make_batch_source(c, SourceSpec{.split = Split::train, .len = 64});
  c.train.passkey_fraction = 0.5;
  auto mixed = make_batch_source(c, SourceSpec{.split = Split::train, .len = 64});
  REQUIRE(dynamic_cast<const PasskeyMix*>(mixed.get()) != nullptr);
  long replaced = 0, skipped = 0;
  for (int t = 0; t < 20; ++t) {
    Batch p, m;
    pose->next(p);
    mixed->next(m);
    // The same PoSE draws with and without the mix: the ids, and every row not replaced.
    REQUIRE(m.positions.size() == 64u);
    CHECK(m.positions == p.positions);
    CHECK(m.positions.back() < 256);
    if (m.positions.back() > 63) ++skipped;
    for (int row = 0; row < 8; ++row) {
      const auto from = std::size_t(row) * 64;
      if (std::equal(m.inputs.begin() + from, m.inputs.begin() + from + 64,
                     p.inputs.begin() + from))
        continue;
      ++replaced;
      std::string text(m.inputs.begin() + from, m.inputs.begin() + from + 64);
      text += char(m.targets[from + 63]);
      // The key line "\nkey is NNNNN.\n" somewhere, the question "\nkey is" and the key last.
      const std::size_t key_at = text.find("\nkey is ");
      REQUIRE(key_at < 52u);
      CHECK(text.compare(key_at + 8, 5, text, 60, 5) == 0);
      CHECK(text.compare(52, 8, "\nkey is ") == 0);
    }
  }
  CHECK(replaced > 20 * 8 * 0.35);
  CHECK(replaced < 20 * 8 * 0.65);
  CHECK(skipped > 0);  // some batches do skip (u ~ U[0, 192] is 0 with probability 1/193)
}

TEST_CASE("passkey mix: the key line at each of the F + 1 positions equally often, laid out as "
          "the evaluation's instances", "[passkey]") {
  // At L = 64 the compact instance has F = 37 filler bytes, so the key line can follow 0..37 of
  // them: 38 positions. Each should come with probability 1/38; drawing the depth uniformly in
  // [0, 1) and rounding round(d F) gave the two ends (0 and 37) half of that (0.5/37 each).
  const BandedCorpus file;
  Config c = lm_config(file.path);
  c.train.seq_len = 64;
  c.train.batch_size = 16;
  c.train.passkey_fraction = 1.0;  // every row an instance
  c.eval.passkey_format = "compact";
  c.eval.passkey_filler = "sentence";
  auto mixed = make_batch_source(c, SourceSpec{.split = Split::train, .len = 64});
  const PasskeyGenerator eval_generator(PasskeyFiller::sentence, nullptr, "the sentence",
                                        PasskeyFormat::compact);
  constexpr int F = 37, kBatches = 38 * 25;  // 15,200 rows: 400 expected at each position
  std::vector<long> at_position(F + 1, 0);
  int compared_at_0 = 0, compared_at_1 = 0;
  for (int t = 0; t < kBatches; ++t) {
    Batch m;
    mixed->next(m);
    for (int row = 0; row < 16; ++row) {
      std::string text(m.inputs.begin() + row * 64, m.inputs.begin() + (row + 1) * 64);
      text += char(m.targets[row * 64 + 63]);  // the row's L + 1 bytes
      const std::size_t key_at = text.find("\nkey is ");  // the filler never says "key is"
      REQUIRE(key_at <= std::size_t(F));
      ++at_position[key_at];
      // The ends, byte for byte the evaluation's instance at depth 0 or 1 with the same key.
      if ((key_at == 0 && compared_at_0 < 3) || (key_at == std::size_t(F) && compared_at_1 < 3)) {
        Rng rng(5);
        const double depth = key_at == 0 ? 0.0 : 1.0;
        std::string expected = instance_text(eval_generator, 64, depth, rng);
        const std::string key = text.substr(60), eval_key = expected.substr(60);
        for (std::size_t at = expected.find(eval_key); at != std::string::npos;
             at = expected.find(eval_key, at + 5))
          expected.replace(at, 5, key);
        CHECK(text == expected);
        ++(key_at == 0 ? compared_at_0 : compared_at_1);
      }
    }
  }
  CHECK(compared_at_0 == 3);
  CHECK(compared_at_1 == 3);
  std::vector<std::int32_t> text(65);
  Rng rng(3);
  CHECK_THROWS_WITH(eval_generator.generate_after_filler(64, F + 1, rng, text.data()),
                    Contains("37 filler bytes, so the key line cannot follow 38"));
  CHECK_THROWS_WITH(eval_generator.generate_after_filler(64, -1, rng, text.data()),
                    Contains("cannot follow -1"));
  // 400 expected per position, standard deviation about 20: the ends at half weight (about 205)
  // fall far outside 320..480, as does anything else that is not uniform.
  for (int k = 0; k <= F; ++k) {
    INFO("rows with " << k << " filler bytes before the key line");
    CHECK(at_position[k] >= 320);
    CHECK(at_position[k] <= 480);
  }
}

// --- The config -----------------------------------------------------------------------------

TEST_CASE("passkey config: defaults off, keys round-trip, bad values named with their key",
          "[passkey]") {
  const Config d = load_pk("");
  CHECK(d.eval.passkey_length_factors.empty());
  CHECK(d.train.passkey_fraction == 0);
  CHECK(d.eval.passkey_depths == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(d.eval.passkey_instances == 100);
  CHECK(d.eval.passkey_filler == "corpus");
  CHECK(d.eval.passkey_format == "paper");

  const std::string grid = "[train]\nseq_len = 128\n[eval]\npasskey_length_factors = [1, 2]\n";
  const Config c = load_pk(grid, {"eval.passkey_filler=sentence", "eval.passkey_instances=5",
                               "train.passkey_fraction=0.02"});
  CHECK(c.eval.passkey_length_factors == std::vector<double>{1, 2});
  CHECK(load_pk(config_to_toml(c)).eval.passkey_filler == "sentence");
  CHECK(experiment_difference(load_pk(config_to_toml(c)), c).empty());

  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_depths=[0, 1.5]"}),
                    Contains("eval.passkey_depths[1] must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_depths=[]"}),
                    Contains("eval.passkey_depths is empty"));
  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_length_factors=[0.5]"}),
                    Contains("--set eval.passkey_length_factors=[0.5]: ") &&
                        Contains("train.seq_len (128) x 0.5 = 64 bytes is "
                                                    "shorter than a passkey instance") &&
                        Contains("103 bytes"));
  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_length_factors=[0]"}),
                    Contains("eval.passkey_length_factors[0] must be > 0"));
  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_filler=lorem"}),
                    Contains("eval.passkey_filler must be one of corpus, sentence, sentence_shifted"));
  CHECK_THROWS_WITH(load_pk(grid, {"eval.passkey_instances=0"}),
                    Contains("eval.passkey_instances must be >= 1"));
  CHECK_THROWS_WITH(load_pk(grid, {"train.passkey_fraction=1.5"}),
                    Contains("train.passkey_fraction must be in [0, 1]"));
  CHECK_THROWS_WITH(load_pk("", {"train.passkey_fraction=0.1"}),
                    Contains("train.passkey_fraction: train.seq_len (64) is shorter"));
  CHECK_THROWS_WITH(load_pk(grid + "[task]\nname = \"copy\"\n"),
                    Contains("pk.toml:4") && Contains("for language models") &&
                        Contains("not task 'copy'"));
}

TEST_CASE("passkey config: the compact format at L = 64, and what cannot fit it", "[passkey]") {
  // The paper's prompt cannot be mixed into rows of 64 bytes; the compact one can, at 1x too.
  const std::string at64 = "[train]\nseq_len = 64\npasskey_fraction = 0.5\n"
                           "[eval]\npasskey_length_factors = [1]\n";
  CHECK_THROWS_WITH(load_pk(at64), Contains("pk.toml:5") && Contains("103 bytes in the paper"));
  const Config c = load_pk(at64 + "passkey_format = \"compact\"\n");
  CHECK(c.eval.passkey_format == "compact");
  CHECK(load_pk(config_to_toml(c)).eval.passkey_format == "compact");
  CHECK(experiment_difference(load_pk(config_to_toml(c)), c).empty());
  // A run made with the other prompt is another experiment (the runner calls it stale); a
  // config without the key is the paper's, so runs made before the key existed stay done.
  const std::string at128 = "[train]\nseq_len = 128\n[eval]\npasskey_length_factors = [1]\n";
  CHECK(experiment_difference(load_pk(at128), load_pk(at128 + "passkey_format = \"compact\"\n")) ==
        "in [eval]: the run has passkey_format = \"paper\", the study gives passkey_format = "
        "\"compact\"");
  CHECK(experiment_difference(load_pk(at128), load_pk(at128 + "passkey_format = \"paper\"\n")).empty());
  // Bad values: the key, the file and the line.
  CHECK_THROWS_WITH(load_pk(at64 + "passkey_format = \"short\"\n"),
                    Contains("pk.toml:6") &&
                        Contains("eval.passkey_format must be one of paper, compact"));
  CHECK_THROWS_WITH(load_pk("[train]\nseq_len = 16\npasskey_fraction = 0.5\n[eval]\n"
                         "passkey_format = \"compact\"\n"),
                    Contains("pk.toml:3") &&
                        Contains("train.passkey_fraction: train.seq_len (16) is shorter") &&
                        Contains("27 bytes in the compact format"));
  CHECK_THROWS_WITH(load_pk("[train]\nseq_len = 64\n[eval]\npasskey_format = \"compact\"\n"
                         "passkey_length_factors = [0.25]\n"),
                    Contains("pk.toml:5") && Contains("x 0.25 = 16 bytes is shorter") &&
                        Contains("27 bytes in the compact format"));
  CHECK_THROWS_WITH(load_pk("[train]\npasskey_fraction = 0.5\n[eval]\npasskey_format = "
                         "\"compact\"\n[task]\nname = \"copy\"\n"),
                    Contains("pk.toml:2") && Contains("for language models") &&
                        Contains("not task 'copy'"));
}
