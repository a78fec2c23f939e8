// Passkey retrieval (Mohtashami & Jaggi 2023, "Landmark Attention", section 4.2; the test that
// Position Interpolation and YaRN report per context length): a random 5-digit key hidden at a
// chosen depth inside filler text, then a question whose answer is the key.
//
// One instance is TEXT of exactly L + 1 bytes, for a model that reads L of them. Two prompts
// (PasskeyFormat, eval.passkey_format), with the same parts in the same order:
//
//   paper:
//   before \n The pass key is NNNNN. Remember it. NNNNN is the pass key. \n after \n
//   What is the pass key? The pass key is␣NNNNN
//   |<------------------------------ L + 1 bytes ------------------------------>|
//
//   compact:
//   before \n key is NNNNN. \n after \n key is␣NNNNN
//   |<------------------- L + 1 bytes ----------------->|
//
// "paper" is the paper's prompt, whose lines are joined by "\n" (its leading task description,
// "There is an important info hidden inside a lot of irrelevant text...", is left out: 145 bytes
// a byte-level model with a context of a few hundred bytes cannot spare). Its fixed part takes
// 104 bytes, so it fits only L >= 103 and leaves filler only from L = 128 on.
//
// "compact" keeps the paper's structure (a key line, filler, a question that ends with the very
// words that come before the key in the key line, so that the answer is one copy away) in 28
// fixed bytes, so that an instance at L = 64 is more than half filler (37 of 65 bytes):
//
//   byte count   part
//   round(d F)   filler before
//   1            \n
//   13           key is NNNNN.        (the key line: "key is ", five digits, ".")
//   1            \n
//   F - round(dF) filler after
//   1            \n
//   6            key is               (the question)
//   6            ␣NNNNN               (the answer: a space and the five digits)
//   -----
//   28 + F = L + 1
//
// Both formats: the model reads inputs = text[0, L) and is scored on targets = text[1, L], of
// which the last six are the answer: a space, then the five digits (kPasskeyAnswer).
//
//   filler F = L + 1 - passkey_fixed_bytes(format) bytes, split at the depth d in [0, 1]:
//     before = the first round(d * F) bytes, after = the other F - round(d * F)
//   d = 0: the key line comes first; d = 1: it is the line just before the question.
//
// The filler (PasskeyFiller):
//   sentence  the paper's "The grass is green. The sky is blue. The sun is yellow. Here we go.
//             There and back again." repeated (joined by a space); before and after are both
//             cut from its beginning, as in the paper's code. The key is the only randomness.
//   sentence_shifted  the same repeated sentence, but before and after each start at their own
//             uniformly random offset into it (one of its n + 1 bytes, the joining space
//             included). With "sentence", the byte after the key line is always the 'T' of
//             "The grass": a landmark a model can learn to find the key by, and at depth 1 (no
//             filler after) the landmark is gone. Shifted, nothing but the key line itself marks
//             where the key is.
//   corpus    a window of F consecutive bytes of a corpus split (the evaluated split for an
//             evaluation, the train split for training data), at a uniformly random start; the
//             key line is inserted into it at the depth. The model's own kind of text, so the
//             key line is the only thing out of distribution.
//
// The key: uniform in 10000..99999 (five digits, no leading zero). An instance draws from its
// Rng, in this order: the key, then (corpus) the window's start, or (sentence_shifted) the offset
// of before, then the offset of after. The format draws nothing, so
// the two formats with the same Rng hide the same keys in the same windows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"

namespace poslab {

enum class PasskeyFormat { paper, compact };
// "paper" / "compact" -> the format; throws std::invalid_argument for anything else.
PasskeyFormat passkey_format_from_name(const std::string& name);

inline constexpr char kPasskeyQuestionPaper[] = "What is the pass key? The pass key is";
inline constexpr char kPasskeyQuestionCompact[] = "key is";
inline constexpr char kPasskeyFillerSentence[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr int kPasskeyDigits = 5;
// The scored answer: " NNNNN", the space and the digits after "The pass key is".
constexpr int kPasskeyAnswer = kPasskeyDigits + 1;

// paper:   "The pass key is 12345. Remember it. 12345 is the pass key." (58 bytes for 5 digits)
// compact: "key is 12345." (13 bytes)
std::string passkey_key_line(const std::string& digits, PasskeyFormat format);
// The question, after which the answer " NNNNN" comes (kPasskeyQuestionPaper / ...Compact).
std::string passkey_question(PasskeyFormat format);

// Bytes of an instance that are not filler: three line breaks, the key line, the question, the
// answer (paper: 3 + 58 + 37 + 6 = 104; compact: 3 + 13 + 6 + 6 = 28).
int passkey_fixed_bytes(PasskeyFormat format);
// The shortest input length L an instance fits in: passkey_fixed_bytes() - 1 (no filler at all):
// 103 (paper), 27 (compact).
int passkey_min_length(PasskeyFormat format);

enum class PasskeyFiller { sentence, corpus, sentence_shifted };
// "sentence" / "corpus" / "sentence_shifted" -> the filler; throws std::invalid_argument for anything else.
PasskeyFiller passkey_filler_from_name(const std::string& name);

// Where the parts of one instance lie in its text (indices into text[0, L + 1)).
struct PasskeyInstance {
  std::string digits;      // the key, "12345"
  int filler_before = 0;   // round(depth * F): filler bytes before the key line
  int filler_after = 0;    // F - filler_before
  int key_line_begin = 0;  // the 'T' of "The pass key is ..."
  int answer_begin = 0;    // the space before the digits: text[answer_begin + 1 + k] = digit k
};

class PasskeyGenerator {
 public:
  // corpus: the split the filler is cut from (shared, not copied); unused (may be null) for the
  // sentence filler. `what` names the split in messages ("the test split of data.path").
  PasskeyGenerator(PasskeyFiller filler, std::shared_ptr<const std::vector<std::int32_t>> corpus,
                   std::string what = "the corpus", PasskeyFormat format = PasskeyFormat::paper);

  // Writes one instance of input length L (L + 1 bytes) with the key line at `depth` into
  // text[0, L + 1). Throws std::invalid_argument when L < passkey_min_length(format), depth is
  // not in [0, 1], or (corpus) the split holds fewer bytes than the filler needs.
  PasskeyInstance generate(int L, double depth, Rng& rng, std::int32_t* text) const;
  // The same with the key line after exactly `filler_before` filler bytes (0..F): what
  // generate(L, depth) does with round(depth * F). The training mix draws this number uniformly,
  // so that each of the F + 1 positions is equally likely (rounding a uniform depth would give
  // the two ends half the weight of the others). Throws std::invalid_argument outside 0..F.
  PasskeyInstance generate_after_filler(int L, int filler_before, Rng& rng,
                                        std::int32_t* text) const;
  // F = L + 1 - passkey_fixed_bytes(format): the filler bytes of an instance of input length L.
  int filler_bytes(int L) const;

  // Throws the error generate() would throw for this L (checked before a run starts).
  void check_length(int L) const;

  PasskeyFormat format() const { return format_; }

 private:
  PasskeyFiller filler_;
  PasskeyFormat format_;
  std::shared_ptr<const std::vector<std::int32_t>> corpus_;
  std::string what_;
};

}  // namespace poslab
