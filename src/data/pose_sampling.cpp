// PoSE's draws: the formulas in pose_sampling.hpp, computed below.
#include "data/pose_sampling.hpp"

#include <stdexcept>

namespace poslab {

namespace {
// Uniform integer in {lo, ..., hi}, both included (Python's random.randint(lo, hi)).
std::int64_t randint(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return lo + std::int64_t(rng.below(std::uint64_t(hi - lo + 1)));
}
}  // namespace

PoseVariant pose_variant_from_name(const std::string& name) {
  if (name == "code") return PoseVariant::code;
  if (name == "paper") return PoseVariant::paper;
  throw std::invalid_argument("train.pose_variant must be \"code\" or \"paper\", got \"" + name +
                              "\"");
}

PoseSkips sample_pose_skips(Rng& rng, int L, std::int64_t target_len, PoseVariant variant) {
  if (L < 2 || target_len < L)
    throw std::invalid_argument("PoSE needs 2 <= L <= L' (L = " + std::to_string(L) +
                                ", L' = " + std::to_string(target_len) + ")");
  const std::int64_t max_skip = target_len - L;  // L' - L
  PoseSkips s;
  if (variant == PoseVariant::code) {
    s.chunk1_len = int(randint(rng, 1, (L + 1) / 2));  // r1 ~ U{1, (L+1)//2}
    s.skip1 = 0;                                       // lt = 0
    s.skip2 = randint(rng, 0, max_skip);               // rt ~ U{lt, L' - L}
  } else {
    s.chunk1_len = int(randint(rng, 1, L - 1));        // r1 ~ U{1, L-1}
    s.skip1 = randint(rng, 0, max_skip);               // u1 ~ U{0, L' - L}
    s.skip2 = randint(rng, s.skip1, max_skip);         // u2 ~ U{u1, L' - L}
  }
  return s;
}

PoseContent sample_pose_content(Rng& rng, int L, std::int64_t span, PoseVariant variant) {
  if (span < L)
    throw std::invalid_argument("PoSE: a window of " + std::to_string(span) +
                                " tokens cannot hold a row of " + std::to_string(L));
  PoseContent c;
  if (variant == PoseVariant::code) {
    c.offset1 = 0;                                     // chunk 1 = ids[0 : r1]
    c.offset2 = randint(rng, L, span) - L;             // r2 ~ U{L, span}, v2 = r2 - L
  } else {
    c.offset1 = randint(rng, 0, span - L);             // v1 ~ U{0, span - L}
    c.offset2 = randint(rng, c.offset1, span - L);     // v2 ~ U{v1, span - L}
  }
  return c;
}

void pose_position_ids(const PoseSkips& skips, int L, std::int64_t* positions) {
  for (int i = 0; i < L; ++i)
    positions[i] = i + (i < skips.chunk1_len ? skips.skip1 : skips.skip2);
}

}  // namespace poslab
