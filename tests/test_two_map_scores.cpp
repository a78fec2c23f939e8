// Self-Extend, ReRoPE and leaky ReRoPE (rope scaling = self_extend, rerope, leaky_rerope):
// the merged scores against the formulas of docs/conventions.md, "Self-Extend" and
// "ReRoPE and leaky ReRoPE", written here from the formulas (a plain RoPE dot product at the positions
// the formula names), not from two_map_scores.hpp:
//
//   Self-Extend   r = i - j < W: <R(i) q, R(j) k>;  else <R(i // G + W - W // G) q, R(j // G) k>
//   ReRoPE        r < w: <R(i) q, R(j) k>;  else <R(w) q, k>            (distance w)
//   leaky ReRoPE  r < w: as above;          else the distance w + (r - w) / k
//
// The boundaries r = W - 1, W and r = w - 1, w are included, and the integer division is
// checked against the official Llama.py's true division where they differ. Also: the config
// refuses bad combinations with the key, file and line. Cheap: a few milliseconds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config_test_helpers.hpp"
#include "encodings/rope_position_maps.hpp"
#include "encodings/two_map_scores.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Matchers::Contains;

namespace {

constexpr int kMapHeads = 1, kMapDh = 8, kMapPairs = 4;  // one head, 4 pairs, base 10000
constexpr double kBase = 10000;

double theta(int p) { return std::pow(kBase, -2.0 * p / kMapDh); }

// <R(a) q, R(b) k> with adjacent pairs (2p, 2p+1) turned by angle x theta_p: the formula, by hand.
double rope_dot(const double* q, const double* k, double a, double b) {
  double s = 0;
  for (int p = 0; p < kMapPairs; ++p) {
    const double ca = std::cos(a * theta(p)), sa = std::sin(a * theta(p));
    const double cb = std::cos(b * theta(p)), sb = std::sin(b * theta(p));
    const double q0 = ca * q[2 * p] - sa * q[2 * p + 1], q1 = sa * q[2 * p] + ca * q[2 * p + 1];
    const double k0 = cb * k[2 * p] - sb * k[2 * p + 1], k1 = sb * k[2 * p] + cb * k[2 * p + 1];
    s += q0 * k0 + q1 * k1;
  }
  return s;
}

struct Scores {
  int n;
  std::vector<double> q, k, S;  // q, k [n, d_h], S [n, n] (scale 1)
};

// The efficient path's scores over positions 0 .. n - 1 (one batch row, one head).
Scores merged_scores(const RopeScaling& s, int n) {
  Scores out{n, std::vector<double>(n * kMapDh), std::vector<double>(n * kMapDh),
             std::vector<double>(n * n, 0.0)};
  for (int x = 0; x < n * kMapDh; ++x) {
    out.q[x] = std::sin(1.3 * x + 0.2);
    out.k[x] = std::cos(0.7 * x - 0.4);
  }
  std::vector<std::int64_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  AttentionGeometry g;
  g.batch = 1;
  g.q_len = g.k_len = n;
  g.n_heads = kMapHeads;
  g.d_head = kMapDh;
  g.q_pos = g.k_pos = pos.data();
  std::vector<double> th(kMapPairs);
  for (int p = 0; p < kMapPairs; ++p) th[p] = theta(p);
  TwoMapScores<double> hook(rope_two_map_rule(s), th, kMapHeads, kMapDh);
  hook.forward(g, out.q.data(), out.k.data(), 1.0, out.S.data());
  return out;
}

RopeScaling self_extend(std::int64_t G, std::int64_t W) {
  RopeScaling s;
  s.method = RopeScalingMethod::self_extend;
  s.group_size = G;
  s.neighbor_window = W;
  return s;
}

}  // namespace

TEST_CASE("self_extend: near keys plain RoPE, far keys i // G + W - W // G and j // G",
          "[two_map][self_extend]") {
  const std::int64_t G = 4, W = 8;
  const Scores r = merged_scores(self_extend(G, W), 40);
  for (int i = 0; i < r.n; ++i)
    for (int j = 0; j <= i; ++j) {
      const double* q = &r.q[i * kMapDh];
      const double* k = &r.k[j * kMapDh];
      const double expected = i - j < W ? rope_dot(q, k, i, j)
                                        : rope_dot(q, k, double(i / G + W - W / G), double(j / G));
      INFO("i = " << i << ", j = " << j);
      CHECK(r.S[i * r.n + j] == Approx(expected).margin(1e-12));
    }
  // Spot checks: i = 19, j = 8 (r = 11 >= W) reads 19 // 4 - 8 // 4 + 8 - 2 = 8, not 11;
  // i = 18, j = 11 (r = 7 = W - 1) is still the neighbour map.
  const double* q19 = &r.q[19 * kMapDh];
  const double* k8 = &r.k[8 * kMapDh];
  CHECK(r.S[19 * r.n + 8] == Approx(rope_dot(q19, k8, 8, 0)).margin(1e-12));  // distance 8
  CHECK(std::abs(r.S[19 * r.n + 8] - rope_dot(q19, k8, 19, 8)) > 1e-3);        // not 11
  const double* q18 = &r.q[18 * kMapDh];
  const double* k11 = &r.k[11 * kMapDh];
  CHECK(r.S[18 * r.n + 11] == Approx(rope_dot(q18, k11, 7, 0)).margin(1e-12));  // r = W - 1: plain
}

TEST_CASE("self_extend: integer division, not the true division of Llama.py's positions",
          "[two_map][self_extend]") {
  // Floor division of the positions: i = 21, j = 6, G = 4, W = 8: 5 - 1 + 6 = 10. True division
  // of the positions (21/4 - 6/4 + 6 = 9.75) would be PI by G on far keys: a fractional angle.
  const std::int64_t G = 4, W = 8;
  const Scores r = merged_scores(self_extend(G, W), 24);
  const double* q = &r.q[21 * kMapDh];
  const double* k = &r.k[6 * kMapDh];
  CHECK(r.S[21 * r.n + 6] == Approx(rope_dot(q, k, 10, 0)).margin(1e-12));
  CHECK(std::abs(r.S[21 * r.n + 6] - rope_dot(q, k, 9.75, 0)) > 1e-4);
  // The shift W - W / G: Llama.py's true division and W // G differ when G does not divide W
  // (W = 10, G = 4: 7.5 against 8). The config refuses that case (below); with G | W the rule's
  // offset is the integer W - W / G.
  CHECK(rope_two_map_rule(self_extend(4, 8)).far.query.offset == 6.0);
  CHECK(rope_two_map_rule(self_extend(2, 8)).far.query.offset == 4.0);
}

TEST_CASE("rerope: distances >= w read w; leaky: w + (r - w) / k", "[two_map][rerope]") {
  const std::int64_t w = 5;
  RopeScaling re;
  re.method = RopeScalingMethod::rerope;
  re.rerope_window = w;
  RopeScaling leaky = re;
  leaky.method = RopeScalingMethod::leaky_rerope;
  leaky.leaky_factor = 4;
  const Scores a = merged_scores(re, 30), b = merged_scores(leaky, 30);
  for (int i = 0; i < a.n; ++i)
    for (int j = 0; j <= i; ++j) {
      const double* q = &a.q[i * kMapDh];
      const double* k = &a.k[j * kMapDh];
      const double r = i - j;
      // ReRoPE: r' = min(r, w); the far pass is <R(w) q, k> (key unrotated).
      const double clipped = r < w ? rope_dot(q, k, i, j) : rope_dot(q, k, double(w), 0);
      // Leaky: r' = w + (r - w) / k beyond w.
      const double leaked = r < w ? rope_dot(q, k, i, j) : rope_dot(q, k, w + (r - w) / 4.0, 0);
      INFO("i = " << i << ", j = " << j);
      CHECK(a.S[i * a.n + j] == Approx(clipped).margin(1e-12));
      CHECK(b.S[i * b.n + j] == Approx(leaked).margin(1e-12));
    }
  // r = w exactly is already the far pass; at r = w both methods read distance w, which equals
  // the plain score there (continuity), and r = w + 8 reads w (ReRoPE) or w + 2 (leaky).
  const double* q = &a.q[20 * kMapDh];
  const double* k = &a.k[7 * kMapDh];  // r = 13 = w + 8
  CHECK(a.S[20 * a.n + 7] == Approx(rope_dot(q, k, 5, 0)).margin(1e-12));
  CHECK(b.S[20 * b.n + 7] == Approx(rope_dot(q, k, 7, 0)).margin(1e-12));
  CHECK(std::abs(a.S[20 * a.n + 7] - rope_dot(q, k, 13, 0)) > 1e-3);
}

TEST_CASE("self_extend, rerope, leaky_rerope: bad options name the key, file and line",
          "[two_map][config]") {
  const std::string head = "[model]\nd_model = 32\nn_heads = 2\n[encoding]\ntype = \"rope\"\n";
  CHECK(config_error(head + "scaling = \"self_extend\"\noriginal_len = 64\nneighbor_window = 16\n"
                            "group_size = 4\n") == "no error");
  CHECK_THAT(config_error(head + "scaling = \"self_extend\"\noriginal_len = 64\n"
                                 "neighbor_window = 10\ngroup_size = 4\n"),
             Contains("t.toml:8: encoding.neighbor_window (10) must be a multiple of "
                      "encoding.group_size (4)"));
  CHECK_THAT(config_error(head + "scaling = \"self_extend\"\noriginal_len = 64\n"
                                 "neighbor_window = 64\ngroup_size = 4\n"),
             Contains("t.toml:8: encoding.neighbor_window (64) must be < encoding.original_len "
                      "(64)"));
  CHECK_THAT(config_error(head + "scaling = \"rerope\"\noriginal_len = 64\nrerope_window = 64\n"),
             Contains("t.toml:8: encoding.rerope_window (64) must be < encoding.original_len"));
  CHECK_THAT(config_error(head + "scaling = \"leaky_rerope\"\noriginal_len = 64\n"
                                 "rerope_window = 16\nleaky_factor = 1.0\n"),
             Contains("t.toml:9: encoding.leaky_factor must be a finite number > 1"));
  CHECK_THAT(config_error(head + "scaling = \"rerope\"\noriginal_len = 64\nleaky_factor = 4.0\n"),
             Contains("t.toml:8: encoding.leaky_factor is an option of leaky_rerope"));
  CHECK_THAT(config_error(head + "scaling = \"self_extend\"\noriginal_len = 64\n"
                                 "neighbor_window = 16\ngroup_size = 4\nfactor = 4.0\n"),
             Contains("t.toml:10: encoding.factor has no effect with encoding.scaling = "
                      "self_extend"));
  CHECK_THAT(config_error(head + "scaling = \"yarn\"\nfactor = 4.0\noriginal_len = 64\n"
                                 "group_size = 4\n"),
             Contains("t.toml:9: encoding.group_size is an option of self_extend"));
  CHECK_THAT(config_error(head + "scaling = \"rerope\"\nrerope_window = 16\n"),
             Contains("encoding.original_len must be set"));
}
