// Loss by copy distance (eval.copy_distance; docs/06): does a language model use its distant
// context? A byte that continues a string seen d bytes earlier can be predicted by copying; if
// the model's loss on such bytes stays low as d grows, it reads that far back; where the loss
// rises to that of bytes with nothing to copy, it has stopped using its distant tokens.
//
// Definition. One evaluation row is the string s[0..L] (s[j] = inputs[j] for j < L, s[L] =
// targets[L-1]); target i (0 <= i < L) is the byte s[t] at t = i + 1, predicted from s[0..i].
// With k = eval.copy_min_match:
//   - the k-gram before t is g = s[t-k..t-1] (needs t >= k);
//   - its most recent earlier occurrence ends at e, the largest e < t - 1 with
//     s[e-k+1..e] = g (so it starts at p = e - k + 1 >= 0, and its continuation s[e+1] is
//     visible: e + 1 <= t - 1);
//   - the copy distance is d = t - (e + 1) = i - e >= 1: how far back the byte to copy lies.
// Every scored target falls in exactly one class:
//   copy      a match exists and its continuation is the target, s[e+1] = s[t]: copying the
//             most recent match predicts it. Bucketed by d.
//   mismatch  a match exists but s[e+1] != s[t]: copying would be wrong. One number.
//   no match  no earlier occurrence of g (or t < k): the reference, bytes with nothing to copy.
// Only copy bytes are bucketed, so a bucket's loss measures copying and nothing else; a
// mismatched continuation would mix in bytes where using the context correctly means *not*
// copying. Matches are looked for in the row only (the segment the model reads at once), not in
// a Transformer-XL memory.
//
// Buckets: powers of two, bucket b holds 2^b <= d < 2^(b+1); the last bucket of a row of L
// bytes holds d up to L - 1. O(L k) per row: a hash map from each k-gram to where it last ended.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace poslab {

// What one target is, for the loss-by-copy-distance measure.
enum class CopyClass : std::uint8_t { no_match, copy, mismatch };

struct CopyMatch {
  CopyClass kind = CopyClass::no_match;
  int distance = 0;  // d = i - e (copy and mismatch); 0 for no_match
};

// The class of every target of one row: inputs [L], targets [L] (targets[i] = s[i+1]).
// Returns [L]. min_match = k >= 1.
std::vector<CopyMatch> match_copies(const std::int32_t* inputs, const std::int32_t* targets,
                                    int L, int min_match);

// The bucket of a copy distance d >= 1: floor(log2 d).
int copy_distance_bucket(int distance);

// Sums of loss and counts per class and bucket, accumulated over rows.
struct CopyDistanceLoss {
  int min_match = 0;
  std::vector<double> bucket_loss;     // [buckets] sum of weighted losses of copy bytes
  std::vector<double> bucket_tokens;   // [buckets] their weight (count when unweighted)
  double mismatch_loss = 0, mismatch_tokens = 0;
  double no_match_loss = 0, no_match_tokens = 0;

  // For rows of up to L bytes: buckets 0 .. copy_distance_bucket(L - 1).
  CopyDistanceLoss(int min_match, int L);
  // Adds one row: its targets' losses [L] and weights [L] (nullptr = all 1).
  void add_row(const std::int32_t* inputs, const std::int32_t* targets, const float* loss,
               const float* weights, int L);
};

// The loss by copy distance of one setting, as eval.json holds it: per bucket b its distances
// [2^b, 2^(b+1)) as distance_low/distance_high (the last bucket ends at the segment length
// seq_len), the scored copy bytes in it (`tokens`) and their mean loss (nats/byte, null when
// there are none); the same two numbers for bytes whose match continues otherwise (mismatch)
// and for bytes with no match (the reference).
nlohmann::json copy_distance_json(const CopyDistanceLoss& c, int seq_len);

}  // namespace poslab
