// RoPE's context-extension scalings (src/encodings/rope_scaling.hpp, rope.cpp):
//   1. `poslab encodings --describe rope --csv` against the formulas of docs/conventions.md
//      ("RoPE scalings"), recomputed here independently (not through scaled_frequencies),
//      three or more settings per method, d_h not a power of two and fraction < 1 among them,
//      to 1e-12 relative in double;
//   2. the rotation of the encoding itself uses those frequencies and the attention factor:
//      q'_m . k'_n = a^2 sum_i [cos((n - m) theta'_i) (...) + sin(...) (...)], a function of
//      m - n; dynamic_ntk with the base of the call's key count K;
//   3. backward is the transpose of the forward Jacobian a R (finite differences of q and k);
//   4. plain rope is unchanged: scaling = none gives the frequencies base^(-2i/d) bit for bit;
//   5. bad options are a clear error naming the key (factor <= 0, original_len missing, a factor
//      with scaling = none, beta or frequency factors out of order), and --describe's own errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "gradcheck.hpp"
#include "process_helpers.hpp"
#include "train/registered_choices.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Contains;

namespace {

constexpr double kPi = std::numbers::pi;

// One setting: the --set values (besides the model's size) and what the formulas need.
struct ScalingSetting {
  std::string scaling;
  int d_head;
  double fraction = 1, base = 10000, s = 1;
  long L = 0, K = 0;  // original_len, and --length (keys of the call)
  double beta_fast = 32, beta_slow = 1, attention = 0, low = 1, high = 4;
};

std::string set_arguments(const ScalingSetting& c) {
  std::ostringstream a;
  a.precision(17);
  // d_h = d_model / n_heads with 2 heads.
  a << "--set model.d_model=" << 2 * c.d_head << " --set model.n_heads=2 --set encoding.scaling="
    << c.scaling << " --set encoding.fraction=" << c.fraction << " --set encoding.base=" << c.base;
  if (c.scaling != "none") a << " --set encoding.factor=" << c.s;
  if (c.L > 0) a << " --set encoding.original_len=" << c.L;
  if (c.K > 0) a << " --length " << c.K;
  if (c.scaling == "yarn")
    a << " --set encoding.beta_fast=" << c.beta_fast << " --set encoding.beta_slow=" << c.beta_slow;
  if (c.attention > 0) a << " --set encoding.attention_factor=" << c.attention;
  if (c.scaling == "llama3")
    a << " --set encoding.low_freq_factor=" << c.low << " --set encoding.high_freq_factor="
      << c.high;
  return a.str();
}

// The table the conventions page's formulas give, computed here from scratch.
struct ScalingRow {
  double theta, theta_scaled, wavelength, rotations, interpolation, attention;
};
std::vector<ScalingRow> by_hand(const ScalingSetting& c) {
  const int d = 2 * int(std::lround(c.fraction * c.d_head / 2.0));  // d_rot
  const double s = c.s, b = c.base, L = double(c.L);
  std::vector<ScalingRow> rows;
  // YaRN's bounds: the dimension at which a pair makes r turns over L is
  // d ln(L / (r 2 pi)) / (2 ln b); low = floor of it at beta_fast, high = ceil at beta_slow.
  double low = 0, high = 0;
  if (c.scaling == "yarn") {
    low = std::max(0.0, std::floor(d * std::log(L / (c.beta_fast * 2 * kPi)) / (2 * std::log(b))));
    high = std::min(double(d - 1),
                    std::ceil(d * std::log(L / (c.beta_slow * 2 * kPi)) / (2 * std::log(b))));
    if (low == high) high += 0.001;
  }
  double s_ntk = s;  // dynamic: s K / L - (s - 1) when K > L, else 1
  if (c.scaling == "dynamic_ntk") s_ntk = c.K > c.L ? s * double(c.K) / L - (s - 1) : 1.0;
  for (int i = 0; i < d / 2; ++i) {
    const double theta = 1.0 / std::pow(b, double(2 * i) / d);
    double scaled = theta, g = 0;
    if (c.scaling == "linear") {
      scaled = theta / s;
      g = 1;
    } else if (c.scaling == "ntk" || c.scaling == "dynamic_ntk") {
      const double b2 = d == 2 ? b : b * std::pow(s_ntk, double(d) / (d - 2));
      scaled = 1.0 / std::pow(b2, double(2 * i) / d);
      g = s_ntk == 1 ? 0 : (1 - scaled / theta) / (1 - 1 / s_ntk);
    } else if (c.scaling == "yarn") {
      g = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
      const double w = 1 - g;  // extrapolation weight
      scaled = theta / s * (1 - w) + theta * w;
    } else if (c.scaling == "llama3") {
      const double lambda = 2 * kPi / theta;
      double kept;
      if (lambda < L / c.high) kept = 1;
      else if (lambda > L / c.low) kept = 0;
      else kept = (L / lambda - c.low) / (c.high - c.low);
      g = 1 - kept;
      scaled = (1 - kept) * theta / s + kept * theta;
    }
    double a = 1;
    if (c.attention > 0) a = c.attention;
    else if (c.scaling == "yarn" && s > 1) a = 0.1 * std::log(s) + 1;
    rows.push_back({theta, scaled, 2 * kPi / scaled, L * theta / (2 * kPi), g, a});
  }
  return rows;
}

// Three or more settings per method; d_h not a power of two and fraction < 1 in each.
const std::vector<ScalingSetting> kSettings = {
    {"none", 16},
    {"none", 12, 0.5},
    {"none", 10, 1, 500},
    {"linear", 16, 1, 10000, 2},
    {"linear", 12, 0.5, 10000, 4},
    {"linear", 10, 1, 500, 8, 128},
    {"ntk", 16, 1, 10000, 4},
    {"ntk", 12, 0.5, 10000, 2},  // d = 6
    {"ntk", 20, 1, 1000, 8},
    {"ntk", 6, 0.34, 10000, 4},  // d = 2: a single pair, nothing to change
    {"dynamic_ntk", 16, 1, 10000, 4, 64, 256},
    {"dynamic_ntk", 12, 1, 10000, 2, 32, 32},  // K = L: the trained base
    {"dynamic_ntk", 24, 0.75, 10000, 3, 16, 100},
    {"dynamic_ntk", 10, 1, 500, 0.5, 8, 20},  // s < 1
    {"yarn", 16, 1, 10000, 4, 64},
    {"yarn", 12, 0.5, 10000, 8, 128},
    {"yarn", 48, 1, 10000, 16, 2048},
    {"yarn", 24, 1, 500, 2, 256, 0, 16, 2, 1.3},  // other betas, attention factor set
    {"yarn", 6, 1, 10000, 4, 64, 0, 32, 1},       // d = 6
    {"llama3", 16, 1, 10000, 8, 64},
    {"llama3", 12, 0.5, 10000, 4, 64},
    {"llama3", 20, 1, 500, 2, 256, 0, 32, 1, 0, 2, 8},
};

}  // namespace

TEST_CASE("encodings --describe rope: every column against the conventions page's formulas by hand",
          "[rope][scaling][cli]") {
  const ScalingSetting c = GENERATE(from_range(kSettings));
  const std::string args = "encodings --describe rope --csv " + set_arguments(c);
  DYNAMIC_SECTION(args) {
    const Outcome r = run_poslab(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::istringstream out(r.out);
    std::string line;
    REQUIRE(std::getline(out, line));
    REQUIRE(line ==
            "pair,dims,theta,theta_scaled,wavelength,rotations_L,interpolation,attention_factor");
    const std::vector<ScalingRow> want = by_hand(c);
    std::size_t n = 0;
    for (; std::getline(out, line); ++n) {
      CAPTURE(line);
      REQUIRE(n < want.size());
      const auto cells = split_cells(line, ',');
      REQUIRE(cells.size() == 8);
      CHECK(cells[0] == std::to_string(n));
      CHECK(cells[1] == std::to_string(2 * n) + " " + std::to_string(2 * n + 1));
      require_close("theta", std::stod(cells[2]), want[n].theta);
      require_close("theta_scaled", std::stod(cells[3]), want[n].theta_scaled);
      require_close("wavelength", std::stod(cells[4]), want[n].wavelength);
      if (c.L > 0) require_close("rotations_L", std::stod(cells[5]), want[n].rotations);
      else CHECK(cells[5].empty());
      require_close("interpolation", std::stod(cells[6]), want[n].interpolation);
      require_close("attention_factor", std::stod(cells[7]), want[n].attention);
    }
    CHECK(n == want.size());
  }
}

TEST_CASE("encodings --describe: yarn's ramp at d_h 16, L 64, s 4 reads 0, 1/3, 2/3, 1, ...",
          "[rope][scaling][cli]") {
  // low = floor(16 ln(64 / (32 2 pi)) / (2 ln 10^4)) = floor(-0.99) -> 0,
  // high = ceil(16 ln(64 / (2 pi)) / (2 ln 10^4)) = ceil(2.02) = 3: g_i = i / 3, clamped.
  const Outcome r = run_poslab(
      "encodings --describe rope --csv --set model.d_model=64 --set model.n_heads=4 "
      "--set encoding.scaling=yarn --set encoding.factor=4 --set encoding.original_len=64");
  REQUIRE(r.exit_code == 0);
  std::istringstream out(r.out);
  std::string line;
  std::getline(out, line);
  const std::vector<double> g = {0, 1.0 / 3, 2.0 / 3, 1, 1, 1, 1, 1};
  for (double want : g) {
    REQUIRE(std::getline(out, line));
    CHECK(std::stod(split_cells(line, ',')[6]) == Approx(want).margin(1e-15));
    CHECK(std::stod(split_cells(line, ',')[7]) == Approx(0.1 * std::log(4.0) + 1).epsilon(1e-15));
  }
  CHECK(!std::getline(out, line));
  // The aligned table says the same, with its settings above it.
  const Outcome table = run_poslab(
      "encodings --describe rope --set model.d_model=64 --set model.n_heads=4 "
      "--set encoding.scaling=yarn --set encoding.factor=4 --set encoding.original_len=64");
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Contains("d_h 16, rotated d = 16") && Contains("scaling yarn") &&
                            Contains("original_len L = 64") && Contains("0.333333") &&
                            Contains("1.13863"));
}

TEST_CASE("encodings --describe: clear errors", "[rope][scaling][cli]") {
  const Outcome shaw = run_poslab("encodings --describe shaw");
  CHECK(shaw.exit_code == 1);
  CHECK_THAT(shaw.err, Contains("only rope has a frequency table (got 'shaw')"));
  const Outcome unknown = run_poslab("encodings --describe ropey");
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Contains("unknown encoding 'ropey'"));
  const Outcome set_alone = run_poslab("encodings --set encoding.base=10");
  CHECK(set_alone.exit_code == 1);
  CHECK_THAT(set_alone.err, Contains("--set needs --describe"));
  CHECK(run_poslab("encodings --csv").exit_code == 2);  // --csv needs --describe
  const Outcome no_len = run_poslab("encodings --describe rope --set encoding.scaling=yarn "
                                    "--set encoding.factor=4");
  CHECK(no_len.exit_code == 1);
  CHECK_THAT(no_len.err, Contains("encoding.original_len must be set"));
}

TEST_CASE("rope scaling options: a bad combination is a config error naming the key",
          "[rope][scaling][config]") {
  auto error_of = [](std::vector<std::string> sets) {
    sets.insert(sets.begin(), "encoding.type=rope");
    try {
      config_from_string("", "t.toml", registered_choices(), sets);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of({"encoding.scaling=linear", "encoding.factor=0"}),
             Contains("encoding.factor") && Contains("must be a finite number > 0, got 0"));
  CHECK_THAT(error_of({"encoding.scaling=linear", "encoding.factor=-2"}),
             Contains("encoding.factor must be >= 0, got -2"));  // the option's own range
  CHECK_THAT(error_of({"encoding.scaling=linear", "encoding.factor=nan"}),
             Contains("encoding.factor must be a finite number"));
  CHECK_THAT(error_of({"encoding.factor=4"}),
             Contains("encoding.factor (4) has no effect with encoding.scaling = none"));
  CHECK_THAT(error_of({"encoding.scaling=yarn", "encoding.factor=4"}),
             Contains("encoding.original_len must be set (>= 1"));
  CHECK_THAT(error_of({"encoding.scaling=llama3", "encoding.factor=4", "encoding.original_len=0"}),
             Contains("encoding.original_len must be set"));
  CHECK_THAT(error_of({"encoding.scaling=yarn", "encoding.factor=4", "encoding.original_len=64",
                       "encoding.beta_fast=1", "encoding.beta_slow=2"}),
             Contains("encoding.beta_fast (1) must be greater than encoding.beta_slow (2)"));
  CHECK_THAT(error_of({"encoding.scaling=llama3", "encoding.factor=4", "encoding.original_len=64",
                       "encoding.high_freq_factor=1"}),
             Contains("encoding.high_freq_factor (1) must be greater than"));
  CHECK_THAT(error_of({"encoding.scaling=longrop"}), Contains("encoding.scaling must be one of"));
  CHECK_THAT(error_of({"encoding.original_len=-1"}), Contains("encoding.original_len must be"));
  CHECK(error_of({"encoding.scaling=linear", "encoding.factor=4"}) == "no error");
  CHECK(error_of({"encoding.scaling=ntk", "encoding.factor=0.5"}) == "no error");
}

TEST_CASE("rope with scaling: q'_m . k'_n = a^2 sum over pairs with theta', a function of m - n",
          "[rope][scaling]") {
  struct Case {
    std::map<std::string, OptionValue> set;
    int dh;
    std::vector<double> theta;  // theta' by hand
    double a;                   // attention factor
    std::int64_t keys;          // K of the call (dynamic_ntk)
  };
  const double s = 4, L = 8;
  // yarn at d = 6, b = 100, L = 8: low = floor(6 ln(8/(64 pi)) / (2 ln 100)) = floor(-2.1) -> 0,
  // high = ceil(6 ln(8/(2 pi)) / (2 ln 100)) = ceil(0.16) = 1: g = 0, 1, 1.
  const std::vector<double> plain6 = {1.0, std::pow(100.0, -1.0 / 3), std::pow(100.0, -2.0 / 3)};
  // dynamic_ntk with K = 20 > L = 8: s' = 4 * 20 / 8 - 3 = 7, base 100 * 7^(6/4).
  const double b7 = 100 * std::pow(7.0, 1.5);
  const std::vector<Case> cases = {
      {{{"scaling", std::string("yarn")}, {"factor", s}, {"original_len", std::int64_t(8)},
        {"base", 100.0}},
       6, {plain6[0], plain6[1] / s, plain6[2] / s}, 0.1 * std::log(s) + 1, 5},
      {{{"scaling", std::string("linear")}, {"factor", s}, {"base", 100.0}, {"fraction", 0.7}},
       6, {1.0 / s, 0.1 / s}, 1.0, 5},  // d_rot = 2 round(2.1) = 4
      {{{"scaling", std::string("dynamic_ntk")}, {"factor", s}, {"original_len", std::int64_t(8)},
        {"base", 100.0}},
       6, {1.0, std::pow(b7, -1.0 / 3), std::pow(b7, -2.0 / 3)}, 1.0, 20},
      {{{"scaling", std::string("dynamic_ntk")}, {"factor", s}, {"original_len", std::int64_t(8)},
        {"base", 100.0}},
       6, plain6, 1.0, 8},  // K = L: the trained base
      {{{"scaling", std::string("ntk")}, {"factor", s}, {"base", 100.0},
        {"attention_factor", 1.25}},
       6, {1.0, std::pow(100 * std::pow(s, 1.5), -1.0 / 3),
           std::pow(100 * std::pow(s, 1.5), -2.0 / 3)}, 1.25, 5},
  };
  (void)L;
  for (std::size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    CAPTURE(n);
    auto enc = make_rope_with({c.dh, 1, c.dh, 1}, c.set);
    Rng rng(7 + n);
    const auto q = random_vector(c.dh, rng);
    const auto k = random_vector(c.dh, rng);
    for (std::int64_t m : {0, 3, 19, 1000}) {
      for (std::int64_t delta : {0, 1, 5, 19}) {
        CAPTURE(m, delta);
        // One query at m; K keys, the last at n = m - delta (only it is compared).
        std::vector<std::int64_t> kp(c.keys);
        for (std::int64_t j = 0; j < c.keys; ++j) kp[j] = m - delta - (c.keys - 1) + j;
        AttentionGeometry g{1, 1, int(c.keys) - 1, int(c.keys), 1, c.dh, 0, &m, kp.data()};
        std::vector<double> qr = q, kr(std::size_t(c.keys) * c.dh, 0.0);
        std::copy(k.begin(), k.end(), kr.end() - c.dh);
        enc->qk_forward(0, g, qr.data(), kr.data());
        double score = 0;
        for (int x = 0; x < c.dh; ++x) score += qr[x] * kr[(c.keys - 1) * c.dh + x];
        double closed = 0;
        for (int p = 0; p < c.dh / 2; ++p) {
          if (p < int(c.theta.size())) {
            const double phi = double(-delta) * c.theta[p];  // (n - m) theta'_p
            closed += c.a * c.a *
                      (std::cos(phi) * (q[2 * p] * k[2 * p] + q[2 * p + 1] * k[2 * p + 1]) +
                       std::sin(phi) * (q[2 * p + 1] * k[2 * p] - q[2 * p] * k[2 * p + 1]));
          } else {  // unrotated dimensions: neither rotated nor scaled
            closed += q[2 * p] * k[2 * p] + q[2 * p + 1] * k[2 * p + 1];
          }
        }
        CHECK(std::abs(score - closed) < 1e-12 * (1.0 + double(m)));
      }
    }
  }
}

TEST_CASE("rope with scaling: backward is the transpose of a R (finite differences)",
          "[rope][scaling][grad]") {
  const int B = 2, H = 2, dh = 6, L = 3, M = 2, K = M + L;
  Positions pos(L, M, 11);
  AttentionGeometry g{B, L, M, K, H, dh, 0, pos.q.data(), pos.k.data()};
  const std::vector<std::map<std::string, OptionValue>> sets = {
      {{"scaling", std::string("yarn")}, {"factor", 4.0}, {"original_len", std::int64_t(2)}},
      {{"scaling", std::string("yarn")}, {"factor", 4.0}, {"original_len", std::int64_t(2)},
       {"fraction", 0.5}, {"attention_factor", 1.7}},
      {{"scaling", std::string("dynamic_ntk")}, {"factor", 3.0}, {"original_len", std::int64_t(2)}},
      {{"scaling", std::string("llama3")}, {"factor", 8.0}, {"original_len", std::int64_t(2)},
       {"base", 30.0}},
      {{"scaling", std::string("linear")}, {"factor", 2.0}, {"fraction", 0.5}},
  };
  for (std::size_t n = 0; n < sets.size(); ++n) {
    CAPTURE(n);
    auto enc = make_rope_with({H * dh, H, dh, 1}, sets[n]);
    require_qk_hook_transpose(enc, g, 3);
  }
}

TEST_CASE("rope: scaling = none keeps plain RoPE's frequencies bit for bit", "[rope][scaling]") {
  // The rotation of plain rope is cos/sin of pos * base^(-2p/d_rot) computed exactly so (the
  // expression rope.cpp always used): a vector at position m = 1 turned forward then compared.
  for (double fraction : {1.0, 0.5}) {
    const int dh = 12;
    auto enc = make_rope_with({dh, 1, dh, 1}, {{"fraction", fraction}});
    const int pairs = int(std::lround(fraction * dh / 2.0));
    for (std::int64_t m : {1, 7, 513}) {
      std::vector<double> q(dh, 0.0), k(dh, 0.0);
      for (int p = 0; p < dh / 2; ++p) q[2 * p] = 1.0;  // (1, 0) per pair: rotates to (cos, sin)
      AttentionGeometry g{1, 1, 0, 1, 1, dh, 0, &m, &m};
      enc->qk_forward(0, g, q.data(), k.data());
      for (int p = 0; p < pairs; ++p) {
        const double angle = double(m) * std::pow(10000.0, -2.0 * p / (2.0 * pairs));
        CHECK(q[2 * p] == std::cos(angle));
        CHECK(q[2 * p + 1] == std::sin(angle));
      }
    }
  }
}
