// PoSE, positional skip-wise training (Zhu et al. 2023): train at length L, yet meet every
// relative distance of a target length L' > L, by giving the L tokens of a row position ids
// that skip. The row is cut into two chunks; each chunk is contiguous text with contiguous
// positions, and the second chunk's positions jump ahead:
//
//   chunk 1: tokens 0 .. r1-1    positions u1 + 0 .. u1 + r1 - 1
//   chunk 2: tokens r1 .. L-1    positions u2 + r1 .. u2 + L - 1        (u1 <= u2 <= L' - L)
//
// so every id is below L' (max id = u2 + L - 1 <= L' - 1) and the ids strictly increase. The
// content skips as well: chunk c reads the text at offset v_c + (its first token index) of a
// window of `span` tokens, so the two chunks need not be neighbours in the text either.
//
// Two ways to draw (r1, u1, u2, v1, v2), both uniform over integers, bounds included:
//
//   code  (default; dwzhu-pku/PoSE src/train_pose.py, train_preprocess_function_pose, master):
//         r1 ~ U{1, ..., (L + 1) // 2}     chunk 1 is at most half the row
//         u1 = 0                           "lt = 0": chunk 1 starts at position 0
//         u2 ~ U{0, ..., L' - L}
//         v1 = 0                           chunk 1 = the window's first r1 tokens
//         r2 ~ U{L, ..., span}, v2 = r2 - L  chunk 2 = the L - r1 tokens that end at r2
//   paper (Zhu et al. §3.2, N = 2; also the first released commit's positions):
//         r1 ~ U{1, ..., L - 1}            a random division into two non-empty chunks
//         u1 ~ U{0, ..., L' - L},  u2 ~ U{u1, ..., L' - L}
//         v1 ~ U{0, ..., span - L}, v2 ~ U{v1, ..., span - L}
//
// The code reads a document's first 5L tokens (`max_length = model_max_position_embeddings * 5`);
// poslab reads a window of span = kPoseSpanFactor * L tokens of the training stream
// (data/pose_batcher.hpp). L' = int(L * factor) there; here L' is train.pose_target_len.
#pragma once

#include <cstdint>
#include <string>

#include "core/rng.hpp"

namespace poslab {

// How many segments of text a PoSE window spans (the released code: 5 L tokens per document).
inline constexpr int kPoseSpanFactor = 5;

enum class PoseVariant { code, paper };

// "code" or "paper"; throws std::invalid_argument for anything else.
PoseVariant pose_variant_from_name(const std::string& name);

// The position draw of one row (poslab: of one batch, see pose_batcher.hpp).
struct PoseSkips {
  int chunk1_len = 0;       // r1: tokens 0 .. r1-1 form chunk 1, r1 .. L-1 chunk 2
  std::int64_t skip1 = 0;   // u1: added to the positions of chunk 1
  std::int64_t skip2 = 0;   // u2: added to the positions of chunk 2
};

// The content draw of one row: chunk c reads window[offset_c + i] for its token indices i.
struct PoseContent {
  std::int64_t offset1 = 0;  // v1
  std::int64_t offset2 = 0;  // v2 (= r2 - L in the code's terms)
};

// Draws (r1, u1, u2) for a row of L >= 2 tokens and target L' >= L.
PoseSkips sample_pose_skips(Rng& rng, int L, std::int64_t target_len, PoseVariant variant);

// Draws (v1, v2) for a row of L tokens read from a window of span >= L tokens (variant code
// reads only v2, paper both).
PoseContent sample_pose_content(Rng& rng, int L, std::int64_t span, PoseVariant variant);

// positions[i] = i + (i < r1 ? u1 : u2), i in [0, L).   positions: [L]
void pose_position_ids(const PoseSkips& skips, int L, std::int64_t* positions);

}  // namespace poslab
