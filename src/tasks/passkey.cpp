// Writing one passkey instance; the layout and its reasons are in passkey.hpp.
#include "tasks/passkey.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace poslab {

namespace {

std::string str(long x) { return std::to_string(x); }

const char* format_name(PasskeyFormat format) {
  return format == PasskeyFormat::compact ? "compact" : "paper";
}

// Appends `text` at t[at], returns the index after it.
int put(std::int32_t* t, int at, const std::string& text) {
  for (unsigned char c : text) t[at++] = c;
  return at;
}

// Byte i of the paper's filler: " ".join([sentence] * many), i.e. the sentence and a space,
// again and again.
constexpr std::int64_t kSentencePeriod = sizeof(kPasskeyFillerSentence);  // n bytes + the space

std::int32_t sentence_filler_byte(std::int64_t i) {
  constexpr std::int64_t n = kSentencePeriod - 1;
  const std::int64_t at = i % kSentencePeriod;
  return at == n ? ' ' : static_cast<unsigned char>(kPasskeyFillerSentence[at]);
}

}  // namespace

PasskeyFormat passkey_format_from_name(const std::string& name) {
  if (name == "paper") return PasskeyFormat::paper;
  if (name == "compact") return PasskeyFormat::compact;
  throw std::invalid_argument("passkey format must be \"paper\" or \"compact\", got \"" + name +
                              "\"");
}

std::string passkey_key_line(const std::string& digits, PasskeyFormat format) {
  if (format == PasskeyFormat::compact) return "key is " + digits + ".";
  return "The pass key is " + digits + ". Remember it. " + digits + " is the pass key.";
}

std::string passkey_question(PasskeyFormat format) {
  return format == PasskeyFormat::compact ? kPasskeyQuestionCompact : kPasskeyQuestionPaper;
}

int passkey_fixed_bytes(PasskeyFormat format) {
  const int newlines = 3;  // after `before`, after the key line, after `after`
  return newlines + int(passkey_key_line(std::string(kPasskeyDigits, '0'), format).size()) +
         int(passkey_question(format).size()) + kPasskeyAnswer;
}

int passkey_min_length(PasskeyFormat format) { return passkey_fixed_bytes(format) - 1; }

PasskeyFiller passkey_filler_from_name(const std::string& name) {
  if (name == "sentence") return PasskeyFiller::sentence;
  if (name == "corpus") return PasskeyFiller::corpus;
  if (name == "sentence_shifted") return PasskeyFiller::sentence_shifted;
  throw std::invalid_argument(
      "passkey filler must be \"corpus\", \"sentence\" or \"sentence_shifted\", got \"" + name +
      "\"");
}

PasskeyGenerator::PasskeyGenerator(PasskeyFiller filler,
                                   std::shared_ptr<const std::vector<std::int32_t>> corpus,
                                   std::string what, PasskeyFormat format)
    : filler_(filler), format_(format), corpus_(std::move(corpus)), what_(std::move(what)) {
  if (filler_ == PasskeyFiller::corpus && !corpus_)
    throw std::invalid_argument("the corpus filler of a passkey instance needs a corpus");
}

void PasskeyGenerator::check_length(int L) const {
  const int shortest = passkey_min_length(format_);
  if (L < shortest)
    throw std::invalid_argument(
        "a passkey instance (" + std::string(format_name(format_)) +
        " format) needs a length of at least " + str(shortest) +
        " bytes (key line, question and answer, with no filler), got " + str(L));
  const std::int64_t F = std::int64_t(L) + 1 - passkey_fixed_bytes(format_);
  if (filler_ == PasskeyFiller::corpus && std::int64_t(corpus_->size()) < F)
    throw std::invalid_argument("the passkey filler of a length-" + str(L) + " instance is " +
                                str(F) + " bytes of " + what_ + ", which holds only " +
                                str(long(corpus_->size())) +
                                " (use a larger split or eval.passkey_filler = \"sentence\")");
}

int PasskeyGenerator::filler_bytes(int L) const {
  return L + 1 - passkey_fixed_bytes(format_);
}

PasskeyInstance PasskeyGenerator::generate(int L, double depth, Rng& rng,
                                           std::int32_t* text) const {
  check_length(L);
  if (!(depth >= 0.0 && depth <= 1.0))
    throw std::invalid_argument("a passkey depth must lie in [0, 1], got " + std::to_string(depth));
  const int F = filler_bytes(L);
  return generate_after_filler(L, int(std::lround(depth * F)), rng, text);  // round(d F)
}

PasskeyInstance PasskeyGenerator::generate_after_filler(int L, int filler_before, Rng& rng,
                                                        std::int32_t* text) const {
  check_length(L);
  const int F = filler_bytes(L);
  if (filler_before < 0 || filler_before > F)
    throw std::invalid_argument("a passkey instance of length " + str(L) + " has " + str(F) +
                                " filler bytes, so the key line cannot follow " +
                                str(filler_before) + " of them");

  PasskeyInstance where;
  where.digits = std::to_string(10000 + rng.below(90000));  // 5 digits, first one 1..9
  where.filler_before = filler_before;
  where.filler_after = F - where.filler_before;

  // The filler's bytes: the sentence's head, or a corpus window [start, start + F), or the
  // sentence from a random offset (before and after each their own).
  std::int64_t start = 0, shift_before = 0, shift_after = 0;
  if (filler_ == PasskeyFiller::corpus)
    start = std::int64_t(rng.below(std::uint64_t(corpus_->size()) - F + 1));
  if (filler_ == PasskeyFiller::sentence_shifted) {
    shift_before = std::int64_t(rng.below(kSentencePeriod));
    shift_after = std::int64_t(rng.below(kSentencePeriod));
  }
  auto filler = [&](std::int64_t i) {  // byte i of the window; the sentence restarts for `after`
    return filler_ == PasskeyFiller::corpus ? (*corpus_)[start + i] : sentence_filler_byte(i);
  };

  int at = 0;
  for (int i = 0; i < where.filler_before; ++i) text[at++] = filler(shift_before + i);
  text[at++] = '\n';
  where.key_line_begin = at;
  at = put(text, at, passkey_key_line(where.digits, format_));
  text[at++] = '\n';
  const std::int64_t after_from =
      filler_ == PasskeyFiller::corpus ? where.filler_before : shift_after;
  for (int i = 0; i < where.filler_after; ++i) text[at++] = filler(after_from + i);
  text[at++] = '\n';
  at = put(text, at, passkey_question(format_));
  where.answer_begin = at;
  at = put(text, at, " " + where.digits);
  if (at != L + 1) throw std::logic_error("passkey instance of " + str(at) + " bytes, not L + 1");
  return where;
}

}  // namespace poslab
