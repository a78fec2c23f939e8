#include "eval/copy_distance.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

namespace poslab {

std::vector<CopyMatch> match_copies(const std::int32_t* inputs, const std::int32_t* targets,
                                    int L, int min_match) {
  if (min_match < 1) throw std::invalid_argument("match_copies: min_match must be >= 1");
  const int k = min_match;
  // s[0..L-1] = inputs, as a string whose k-grams can be hashed and compared exactly.
  const std::u32string s(inputs, inputs + L);
  const std::u32string_view view(s);
  std::unordered_map<std::u32string_view, int> last_end;  // k-gram -> e, where it last ended
  last_end.reserve(std::size_t(L));
  std::vector<CopyMatch> matches(static_cast<std::size_t>(L));  // [L]: target i is s[t], t = i + 1
  for (int i = k - 1; i < L; ++i) {
    const std::u32string_view g = view.substr(std::size_t(i - k + 1), std::size_t(k));  // s[t-k..t-1]
    if (const auto found = last_end.find(g); found != last_end.end()) {
      const int e = found->second;  // e < i = t - 1: inserted on an earlier step
      const bool copies = inputs[e + 1] == targets[i];  // s[e+1] == s[t]
      matches[std::size_t(i)] = {copies ? CopyClass::copy : CopyClass::mismatch, i - e};  // d = t - (e+1)
    }
    last_end[g] = i;  // the most recent occurrence wins
  }
  return matches;
}

int copy_distance_bucket(int distance) {
  return int(std::bit_width(unsigned(distance))) - 1;  // floor(log2 d), d >= 1
}

CopyDistanceLoss::CopyDistanceLoss(int k, int L) : min_match(k) {
  const int buckets = L >= 2 ? copy_distance_bucket(L - 1) + 1 : 1;
  bucket_loss.assign(std::size_t(buckets), 0.0);
  bucket_tokens.assign(std::size_t(buckets), 0.0);
}

void CopyDistanceLoss::add_row(const std::int32_t* inputs, const std::int32_t* targets,
                               const float* loss, const float* weights, int L) {
  const std::vector<CopyMatch> matches = match_copies(inputs, targets, L, min_match);
  for (int i = 0; i < L; ++i) {
    const double w = weights ? weights[i] : 1.0;
    if (w == 0) continue;
    const CopyMatch& m = matches[std::size_t(i)];
    switch (m.kind) {
      case CopyClass::copy: {
        const std::size_t b = std::size_t(copy_distance_bucket(m.distance));
        if (b >= bucket_loss.size())  // a row longer than the one the buckets were made for
          throw std::logic_error("CopyDistanceLoss: distance " + std::to_string(m.distance) +
                                 " beyond the buckets of length " +
                                 std::to_string(1 << bucket_loss.size()));
        bucket_loss[b] += w * loss[i];
        bucket_tokens[b] += w;
        break;
      }
      case CopyClass::mismatch:
        mismatch_loss += w * loss[i];
        mismatch_tokens += w;
        break;
      case CopyClass::no_match:
        no_match_loss += w * loss[i];
        no_match_tokens += w;
        break;
    }
  }
}

nlohmann::json copy_distance_json(const CopyDistanceLoss& c, int seq_len) {
  auto mean = [](double sum, double n) { return n > 0 ? nlohmann::json(sum / n) : nlohmann::json(); };
  nlohmann::json low = nlohmann::json::array(), high = nlohmann::json::array(),
                 tokens = nlohmann::json::array(), loss = nlohmann::json::array();
  for (std::size_t b = 0; b < c.bucket_loss.size(); ++b) {
    low.push_back(1L << b);
    high.push_back(std::min(2L << b, long(seq_len)));  // exclusive
    tokens.push_back(long(c.bucket_tokens[b]));
    loss.push_back(mean(c.bucket_loss[b], c.bucket_tokens[b]));
  }
  return {{"min_match", c.min_match},
          {"distance_low", low},
          {"distance_high", high},
          {"tokens", tokens},
          {"loss", loss},
          {"mismatch_tokens", long(c.mismatch_tokens)},
          {"mismatch_loss", mean(c.mismatch_loss, c.mismatch_tokens)},
          {"no_match_tokens", long(c.no_match_tokens)},
          {"no_match_loss", mean(c.no_match_loss, c.no_match_tokens)}};
}

}  // namespace poslab
