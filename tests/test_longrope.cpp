// LongRoPE frequencies (rope's scaling = longrope; src/encodings/rope_scaling.hpp, rope.cpp),
// against docs/conventions.md, "LongRoPE", written from its formulas, not from the code:
//   1. `encodings --describe rope --csv`: theta'_i = 1 / (lambda_i b^(2i/d)) with lambda the
//      short list while the call covers K <= L keys and the long list when K > L (strict '>', as
//      Hugging Face's longrope_frequency_update: K = L is still short), or a fixed list; the
//      attention factor sqrt(1 + ln s / ln L) (Phi-3-mini-128k: s = 32, L = 4096 gives
//      sqrt(17/12)), 1 for s <= 1, the option when given; fraction < 1 (d_rot/2 factors);
//   2. the rotation itself: q'_m = a R(m theta') q, and start-token retention: positions
//      0 <= p < n_hat turn by the plain theta with amplitude 1 (the released
//      MixedLongRoPEScaledRotaryEmbedding); a memory key at p < 0 is no start token;
//   3. backward is the transpose of the forward (finite differences), start tokens included;
//   4. bad input (lists of the wrong length, decreasing, factors < 1, not numbers, missing,
//      set without longrope) is a config error naming the key, file and line.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config_test_helpers.hpp"
#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "process_helpers.hpp"
#include "train/registered_choices.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Contains;

namespace {

std::string join(const std::vector<double>& x) {
  std::ostringstream s;
  s.precision(17);
  for (std::size_t i = 0; i < x.size(); ++i) s << (i ? "," : "") << x[i];
  return s.str();
}

struct LongRopeSetting {
  int d_head;
  double fraction, base, s;
  long L, K;
  std::vector<double> short_factor, long_factor;
  std::string which;     // longrope_factors
  double attention = 0;  // the option (0: default)
  bool long_expected;    // the list the conventions page's rule picks
};

}  // namespace

TEST_CASE("longrope: --describe against the conventions page, with HF's strict '>' switch",
          "[rope][longrope][cli]") {
  const std::vector<double> short8 = {1, 1, 1.1, 1.2, 1.5, 2, 3, 4},
                            long8 = {1, 1.25, 1.5, 2, 3, 4, 5, 5};
  const std::vector<double> ones48(48, 1.0);
  std::vector<double> long48(48);
  for (int i = 0; i < 48; ++i) long48[i] = 1 + 0.5 * i;
  const std::vector<LongRopeSetting> settings = {
      {16, 1, 10000, 4, 64, 64, short8, long8, "switch", 0, false},   // K = L: still short
      {16, 1, 10000, 4, 64, 65, short8, long8, "switch", 0, true},    // K = L + 1: long
      {16, 1, 10000, 4, 64, 1000, short8, long8, "short", 0, false},  // fixed short
      {16, 1, 10000, 4, 64, 10, short8, long8, "long", 0, true},      // fixed long
      {16, 0.5, 500, 2, 32, 40, {1, 1.5, 2, 2}, {1.25, 1.5, 3, 8}, "switch", 1.3, true},
      {10, 1, 10000, 1, 16, 100, {1, 1, 1, 1, 1}, {1, 2, 3, 4, 5}, "switch", 0, true},  // s = 1
      {96, 1, 10000, 32, 4096, 4097, ones48, long48, "switch", 0, true},  // Phi-3-mini-128k's s, L
  };
  for (const LongRopeSetting& c : settings) {
    std::ostringstream a;
    a.precision(17);
    a << "--set model.d_model=" << 2 * c.d_head << " --set model.n_heads=2"
      << " --set encoding.scaling=longrope --set encoding.fraction=" << c.fraction
      << " --set encoding.base=" << c.base << " --set encoding.factor=" << c.s
      << " --set encoding.original_len=" << c.L
      << " --set encoding.short_factor=" << join(c.short_factor)
      << " --set encoding.long_factor=" << join(c.long_factor)
      << " --set encoding.longrope_factors=" << c.which << " --length " << c.K;
    if (c.attention > 0) a << " --set encoding.attention_factor=" << c.attention;
    DYNAMIC_SECTION(a.str()) {
      const Outcome r = run_poslab("encodings --describe rope --csv " + a.str());
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      std::istringstream out(r.out);
      std::string line;
      REQUIRE(std::getline(out, line));
      REQUIRE(line ==
              "pair,dims,theta,theta_scaled,wavelength,rotations_L,interpolation,"
              "attention_factor,short_factor,long_factor");
      const int d = 2 * int(std::lround(c.fraction * c.d_head / 2.0));  // d_rot
      // a = the option if given; else sqrt(1 + ln s / ln L) for s > 1; else 1.
      const double att = c.attention > 0 ? c.attention
                         : c.s > 1       ? std::sqrt(1 + std::log(c.s) / std::log(double(c.L)))
                                         : 1.0;
      const std::vector<double>& lambda = c.long_expected ? c.long_factor : c.short_factor;
      int n = 0;
      for (; std::getline(out, line); ++n) {
        CAPTURE(line);
        REQUIRE(n < d / 2);
        const auto cells = split_cells(line, ',');
        REQUIRE(cells.size() == 10);
        const double theta = std::pow(c.base, -2.0 * n / d);
        const double scaled = 1.0 / (lambda[n] * std::pow(c.base, 2.0 * n / d));
        require_close("theta", std::stod(cells[2]), theta);
        require_close("theta_scaled", std::stod(cells[3]), scaled);
        require_close("attention_factor", std::stod(cells[7]), att);
        require_close("short_factor", std::stod(cells[8]), c.short_factor[n]);
        require_close("long_factor", std::stod(cells[9]), c.long_factor[n]);
      }
      CHECK(n == d / 2);
    }
  }
  // Phi-3-mini-128k: s = 131072 / 4096 = 32, a = sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12).
  CHECK(std::sqrt(1 + std::log(32.0) / std::log(4096.0)) == Approx(std::sqrt(17.0 / 12)));
  // The aligned table names the list in use and why.
  const std::string base =
      "encodings --describe rope --set model.d_model=32 --set model.n_heads=2 "
      "--set encoding.scaling=longrope --set encoding.factor=4 --set encoding.original_len=64 "
      "--set encoding.short_factor=" +
      join(short8) + " --set encoding.long_factor=" + join(long8);
  CHECK_THAT(run_poslab(base + " --length 64").out, Contains("factors short (K <= L)"));
  CHECK_THAT(run_poslab(base + " --length 65").out, Contains("factors long (K > L)"));
  CHECK_THAT(run_poslab(base + " --set encoding.start_tokens=4 --length 65").out,
             Contains("start_tokens 4") && Contains("positions 0 .. 3 (start tokens)"));
}

TEST_CASE("longrope: q'_p = a R(p theta') q, start tokens turn by theta with amplitude 1",
          "[rope][longrope]") {
  const int dh = 6;  // 3 pairs
  const double b = 100, s = 8, L = 4;
  const std::vector<double> sf = {1, 2, 3}, lf = {1.5, 4, 8};
  for (const int n_hat : {0, 3}) {
    auto enc = make_rope_with({dh, 1, dh, 1}, {{"scaling", std::string("longrope")},
                                          {"factor", s},
                                          {"original_len", std::int64_t(4)},
                                          {"base", b},
                                          {"short_factor", std::string("1, 2, 3")},
                                          {"long_factor", std::string("[1.5, 4, 8]")},
                                          {"start_tokens", std::int64_t(n_hat)}});
    const double a = std::sqrt(1 + std::log(s) / std::log(L));
    // Calls of K = 4 (short) and K = 6 (long) keys at positions -1 .. K - 2; the keys are what is
    // compared: every key is (1, 0) per pair, so it turns to amplitude * (cos, sin)(p theta).
    for (const int K : {4, 6}) {
      std::vector<std::int64_t> kp(K);
      for (int j = 0; j < K; ++j) kp[j] = j - 1;
      std::int64_t qp = K - 2;
      AttentionGeometry g{1, 1, K - 1, K, 1, dh, 0, &qp, kp.data()};
      std::vector<double> q(dh, 0.0), k(std::size_t(K) * dh, 0.0);
      for (int j = 0; j < K; ++j)
        for (int p = 0; p < 3; ++p) k[j * dh + 2 * p] = 1.0;
      enc->qk_forward(0, g, q.data(), k.data());
      const std::vector<double>& lambda = K > L ? lf : sf;  // strict '>'
      for (int j = 0; j < K; ++j)
        for (int p = 0; p < 3; ++p) {
          CAPTURE(n_hat, K, j, p);
          const bool start = kp[j] >= 0 && kp[j] < n_hat;
          const double theta =
              start ? std::pow(b, -2.0 * p / dh) : 1.0 / (lambda[p] * std::pow(b, 2.0 * p / dh));
          const double amp = start ? 1.0 : a;
          CHECK(std::abs(k[j * dh + 2 * p] - amp * std::cos(double(kp[j]) * theta)) < 1e-14);
          CHECK(std::abs(k[j * dh + 2 * p + 1] - amp * std::sin(double(kp[j]) * theta)) < 1e-14);
        }
    }
  }
}

TEST_CASE("longrope: backward is the transpose of the forward, start tokens included",
          "[rope][longrope][grad]") {
  const int B = 2, H = 2, dh = 4, L = 3, M = 2, K = M + L;
  std::vector<std::int64_t> qp = {0, 1, 2}, kp = {-2, -1, 0, 1, 2};
  AttentionGeometry g{B, L, M, K, H, dh, 0, qp.data(), kp.data()};
  for (const std::string which : {"switch", "short"}) {
    CAPTURE(which);
    auto enc = make_rope_with({H * dh, H, dh, 1}, {{"scaling", std::string("longrope")},
                                              {"factor", 4.0},
                                              {"original_len", std::int64_t(3)},
                                              {"short_factor", std::string("1.5,2")},
                                              {"long_factor", std::string("2,7")},
                                              {"longrope_factors", which},
                                              {"start_tokens", std::int64_t(2)}});
    require_qk_hook_transpose(enc, g, 3);
  }
}

TEST_CASE("longrope: bad factor lists are a config error naming the key, file and line",
          "[rope][longrope][config]") {
  // d_h = 32 / 2 = 16: 8 pairs.
  const std::string head =
      "[model]\nd_model = 32\nn_heads = 2\n[encoding]\ntype = \"rope\"\nscaling = \"longrope\"\n"
      "factor = 4.0\noriginal_len = 64\n";
  const std::string good = "\"1, 1, 1.1, 1.2, 1.5, 2, 3, 4\"";
  CHECK(config_error(head + "short_factor = " + good + "\nlong_factor = " + good + "\n") ==
        "no error");
  CHECK_THAT(
      config_error(head + "short_factor = " + good + "\nlong_factor = \"1, 2, 3, 4, 5, 6\"\n"),
      Contains("t.toml:10: encoding.long_factor has 6 factors; it needs one per rotated "
               "pair, d_rot / 2 = 8"));
  CHECK_THAT(config_error(head + "short_factor = \"1, 1, 1.5, 1.2, 2, 3, 4, 5\"\nlong_factor = " +
                          good + "\n"),
             Contains("t.toml:9: encoding.short_factor must not decrease") &&
                 Contains("entry 3 (1.2) < entry 2 (1.5)"));
  CHECK_THAT(config_error(head + "short_factor = " + good +
                          "\nlong_factor = \"1, 0.9, 1, 1, 1, 1, 1, 1\"\n"),
             Contains("t.toml:10: encoding.long_factor: entry 1 is 0.9; LongRoPE's factors are "
                      "finite and >= 1"));
  CHECK_THAT(config_error(
                 head + "short_factor = \"1, 1, x, 1, 1, 1, 1, 1\"\nlong_factor = " + good + "\n"),
             Contains("t.toml:9: encoding.short_factor: entry 2 ('x') is not a number"));
  // A NUL in the list (TOML's \u0000) is shown as \x00, not the end of the message (issue 51).
  CHECK_THAT(config_error(head + "short_factor = \"1, 1, 2\\u0000x, 1, 1, 1, 1, 1\"\nlong_factor = " +
                          good + "\n"),
             Contains("entry 2 ('2\\x00x') is not a number"));
  CHECK_THAT(config_error(head + "long_factor = " + good + "\n"),
             Contains("encoding.short_factor must be set with encoding.scaling = longrope"));
  CHECK_THAT(config_error("[encoding]\ntype = \"rope\"\nscaling = \"yarn\"\nfactor = 4.0\n"
                          "original_len = 64\nlong_factor = " +
                          good + "\n"),
             Contains("t.toml:6: encoding.long_factor is an option of longrope; it has no effect "
                      "with encoding.scaling = yarn"));
  CHECK_THAT(config_error("[encoding]\ntype = \"rope\"\nscaling = \"longrope\"\nshort_factor = " +
                          good + "\nlong_factor = " + good + "\n"),
             Contains("encoding.original_len must be set"));
  CHECK_THAT(config_error(head + "short_factor = " + good + "\nlong_factor = " + good +
                          "\nlongrope_factors = \"auto\"\n"),
             Contains("t.toml:11: encoding.longrope_factors must be one of"));
  // The same checks on the command line, before anything runs.
  const Outcome r = run_poslab(
      "encodings --describe rope --set model.d_model=32 --set model.n_heads=2 "
      "--set encoding.scaling=longrope --set encoding.factor=4 --set encoding.original_len=64 "
      "--set encoding.short_factor=1,2 --set encoding.long_factor=1,2");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("encoding.short_factor has 2 factors; it needs one per rotated "
                             "pair, d_rot / 2 = 8"));
}
