// The two position maps of Self-Extend, ReRoPE and leaky ReRoPE (rope's scaling = self_extend,
// rerope, leaky_rerope), in the form of the two-map score hook (two_map_scores.hpp):
// map 1 (near, t_i - t_j < window) is plain RoPE, t -> t on both sides; map 2 (far) is below.
// Notation: t_i, t_j the stream positions of query and key, r = t_i - t_j (docs/conventions.md,
// "Self-Extend" and "ReRoPE and leaky ReRoPE").
//
// Self-Extend (Jin et al. 2024; datamllab/LongLM self_extend_patch/Llama.py), G = group_size,
// W = neighbor_window:
//   query at floor(t_i / G) + W - W / G,   key at floor(t_j / G)
//   so the far distance is floor(t_i / G) - floor(t_j / G) + W - W / G.
//   Integer (floor) division, as t // G in the official code: positions stay integers, i.e.
//   trained rotations, and with G | W every far distance is >= W (floor(t_i/G) - floor(t_j/G)
//   >= floor(r / G) >= W / G when r >= W), so the map is monotone in r, with plateaus of
//   width G. The official Llama.py writes the shift W - W / G in TRUE division (a later
//   "Fix group query position calculation" made it W // G); the two differ only when G does not
//   divide W, which the config refuses (rope_scaling.cpp), e.g. W = 10, G = 4: 10 - 2.5 = 7.5
//   (a half-integer, untrained position offset) against 10 - 2 = 8. Dividing the positions
//   themselves by G in true division would be linear interpolation (PI) by G for far keys,
//   t_i / G - t_j / G = r / G + ..., fractional angles instead of grouped integer ones.
//   (Applying the shift only once the largest query position reaches W, as the official code
//   does, changes nothing here: below W every pair is near.)
//
// ReRoPE (Su 2023; bojone/rerope rerope_patch.py), w = rerope_window:
//   query at w, key at 0 (the key unrotated): the far distance is w for every r >= w,
//   i.e. r' = min(r, w).
//
// Leaky ReRoPE (leaky_rerope_patch.py), k = leaky_factor: linearly scaled RoPE (positions / k)
// with the query at t_i + w (k - 1) and the key at t_j:
//   query at (t_i + w (k - 1)) / k, key at t_j / k, so r' = w + (r - w) / k for r >= w.
#pragma once

#include "encodings/rope_scaling.hpp"
#include "encodings/two_map_scores.hpp"

namespace poslab {

inline TwoMapRule rope_two_map_rule(const RopeScaling& s) {
  TwoMapRule rule;  // near: identity maps (AxisMap's defaults: group 1, slope 1, offset 0)
  switch (s.method) {
    case RopeScalingMethod::self_extend: {
      const std::int64_t G = s.group_size, W = s.neighbor_window;
      rule.window = W;
      rule.far.query = {G, 1.0, double(W - W / G)};  // floor(t / G) + W - W // G
      rule.far.key = {G, 1.0, 0.0};                  // floor(t / G)
      break;
    }
    case RopeScalingMethod::rerope: {
      const double w = double(s.rerope_window);
      rule.window = s.rerope_window;
      rule.far.query = {1, 0.0, w};  // w
      rule.far.key = {1, 0.0, 0.0};  // 0
      break;
    }
    case RopeScalingMethod::leaky_rerope: {
      const double w = double(s.rerope_window), k = s.leaky_factor;
      rule.window = s.rerope_window;
      rule.far.query = {1, 1.0 / k, w * (k - 1.0) / k};  // (t + w (k - 1)) / k
      rule.far.key = {1, 1.0 / k, 0.0};                  // t / k
      break;
    }
    default:
      break;  // one map: never used
  }
  return rule;
}

}  // namespace poslab
