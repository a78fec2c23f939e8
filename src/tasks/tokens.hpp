// The token alphabet of the generated tasks.
//
// poslab models bytes (vocab 256), so a task token is a byte. We only use printable ASCII, so any
// batch can be printed and read by a person:
//
//   '^'  BOS   begins every instance (and nothing else)
//   '|'  SEP   separates the question from the answer
//   '.'  PAD   fills a row after its instance; never scored
//   data symbols, in this order:  a b c ... z  A B C ... Z  0 1 ... 9   (62 symbols)
//
// A task with `alphabet = 16` draws its data from the first 16 symbols, 'a'..'p'. Parity writes
// its bits as '0' and '1'; associative recall writes keys as letters and values as digits.
//
// Example rows (L = 12) of `copy` and `reverse`, answers under the carets:
//   ^cab|cab....       ^cab|bac....
//        ^^^                ^^^
#pragma once

#include <cstdint>
#include <string>

#include "config/options.hpp"

namespace poslab {

constexpr std::int32_t kBos = '^';
constexpr std::int32_t kSep = '|';
constexpr std::int32_t kPad = '.';

// The largest byte value any task writes ('|' = 124): a model needs vocab_size > this.
constexpr std::int32_t kLargestTaskToken = '|';

inline constexpr char kSymbols[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
constexpr int kSymbolCount = sizeof(kSymbols) - 1;  // 62
constexpr int kLetterCount = 52;                    // a..z A..Z, the first 52 symbols

// Data symbol number i (0-based): 0 -> 'a', 25 -> 'z', 26 -> 'A', 52 -> '0'.
inline std::int32_t symbol(int i) { return static_cast<unsigned char>(kSymbols[i]); }

// Tokens as text, one character per token (non-printable bytes as '?'), for tests and debugging.
inline std::string decode(const std::int32_t* tokens, int n) {
  std::string text(static_cast<std::size_t>(n), '?');
  for (int i = 0; i < n; ++i)
    if (tokens[i] >= 32 && tokens[i] < 127) text[i] = static_cast<char>(tokens[i]);
  return text;
}

// The `alphabet` option shared by the tasks that draw random data symbols.
inline OptionSpec alphabet_option(std::int64_t default_size = 16) {
  return {"alphabet", default_size,
          "number of data symbols, taken in order from a..z A..Z 0..9 (16 = 'a'..'p')", 2,
          kSymbolCount};
}

}  // namespace poslab
