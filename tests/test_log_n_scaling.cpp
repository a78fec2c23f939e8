// Log-n attention scaling (src/encodings/log_n_scaling.hpp, nn/attention.hpp), against
// docs/conventions.md, "Log-n scaling", written from the formula, not the code:
//   1. f(n) = max(1, ln n / ln L): the worked numbers of docs/conventions.md (L = 64: 1 up to 64, 4/3 at
//      n = 256 = Qwen at t + 1 = 256 = LongRoPE's su at s = 4), and clipping below L;
//   2. in an attention layer, for encodings of every hook kind (none, alibi's bias, rope's
//      rotation, shaw's query term) and with memory and same_length: the probabilities with log-n
//      are softmax(f(n_i) S_i), S_i recovered from the unscaled probabilities (log P_i = S_i -
//      c_i), with n_i = the keys query i sees, counted here by hand (i + M + 1, or the window);
//   3. mode `eval` scales evaluation-only passes and leaves training passes as `off`;
//   4. bad options are a config error naming the key, with file and line.
// The gradient (every encoding, with memory) is the conformance kit's: its edge sets turn log_n on.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "config_test_helpers.hpp"
#include "encoding_test_helpers.hpp"
#include "encodings/log_n_scaling.hpp"
#include "nn/attention.hpp"
#include "train/registered_choices.hpp"

using namespace poslab;
using namespace poslab::testing;
using Catch::Contains;

TEST_CASE("log-n: f(n) = max(1, ln n / ln L), the conventions page's numbers", "[log_n]") {
  const LogNScaling at64{LogNScaling::Mode::always, 64};
  CHECK(at64.factor(1) == 1.0);   // ln 1 / ln 64 = 0: clipped
  CHECK(at64.factor(63) == 1.0);  // below L: clipped
  CHECK(at64.factor(64) == 1.0);
  CHECK(std::abs(at64.factor(256) - 4.0 / 3.0) < 1e-15);  // ln 256 / ln 64 = 8 / 6
  CHECK(std::abs(at64.factor(512) - 1.5) < 1e-15);        // 9 / 6
  CHECK(std::abs(at64.factor(65) - std::log(65.0) / std::log(64.0)) < 1e-15);
  const LogNScaling at2048{LogNScaling::Mode::eval, 2048};  // Qwen-7B's seq_length
  CHECK(std::abs(at2048.factor(8192) - 13.0 / 11.0) < 1e-15);
  CHECK(!at2048.active(false));
  CHECK(at2048.active(true));
  CHECK(!LogNScaling{}.active(true));  // off by default
}

namespace {

struct Layer {
  ParameterArena<double> arena;
  std::unique_ptr<Encoding<double>> enc;
  std::unique_ptr<Attention<double>> attn;
};

// One attention layer (d = 8, 2 heads) with encoding `name` and log_n = `mode` (L = 4), at the
// parameters seed 7 gives (the same for every mode).
std::unique_ptr<Layer> make_layer(const std::string& name, const std::string& mode) {
  auto layer = std::make_unique<Layer>();
  Options o = default_options(name);
  o.set("log_n", mode);
  o.set("log_n_len", std::int64_t(mode == "off" ? 0 : 4));
  if (o.has("init_std")) o.set("init_std", 0.3);
  layer->enc = find_encoding(name)->make<double>(o, {8, 2, 4, 1}, layer->arena);
  layer->attn = std::make_unique<Attention<double>>(layer->arena, "a.", 8, 2);
  layer->arena.allocate();
  Rng rng(7);
  layer->enc->init(layer->arena, rng);
  layer->attn->init(rng, 0.5);
  return layer;
}

}  // namespace

TEST_CASE("log-n in attention: P_i = softmax(f(n_i) S_i), n_i = the keys query i sees", "[log_n]") {
  const int B = 2, L = 6, H = 2, dh = 4, d = H * dh;
  const std::string name = GENERATE("none", "alibi", "rope", "shaw");
  for (const auto& [M, window] : std::vector<std::pair<int, int>>{{0, 0}, {3, 0}, {3, 6}}) {
    DYNAMIC_SECTION(name << ", memory " << M << ", window " << window) {
      const int K = M + L;
      std::vector<std::int64_t> q_pos(L), k_pos(K);
      for (int j = 0; j < K; ++j) k_pos[j] = j - M;
      for (int i = 0; i < L; ++i) q_pos[i] = i;
      const AttentionGeometry g{B, L, M, K, H, dh, window, q_pos.data(), k_pos.data()};
      std::vector<double> x(std::size_t(B) * K * d), out(std::size_t(B) * L * d);
      Rng rng(3);
      for (double& v : x) v = rng.normal(0, 1);
      auto off = make_layer(name, "off"), on = make_layer(name, "always");
      off->attn->forward(x.data(), g, *off->enc, 0, out.data());
      on->attn->forward(x.data(), g, *on->enc, 0, out.data());
      const auto& p_off = off->attn->probs();  // [B, H, L, K]
      const auto& p_on = on->attn->probs();
      double worst = 0, moved = 0;
      for (int bh = 0; bh < B * H; ++bh)
        for (int i = 0; i < L; ++i) {
          // The keys query i sees: j <= i + M, the last `window` of them with same_length.
          const int last = i + M, first = window > 0 ? std::max(0, last - window + 1) : 0;
          const int n = last - first + 1;
          const double f = std::max(1.0, std::log(double(n)) / std::log(4.0));
          const double* po = &p_off(bh / H, bh % H, i, 0);
          const double* pn = &p_on(bh / H, bh % H, i, 0);
          double z = 0;  // softmax(f log P_off) = softmax(f S): the constant c_i cancels
          for (int j = first; j <= last; ++j) z += std::exp(f * std::log(po[j]));
          for (int j = 0; j < K; ++j) {
            const double want = (j < first || j > last) ? 0.0 : std::exp(f * std::log(po[j])) / z;
            worst = std::max(worst, std::abs(pn[j] - want));
            moved = std::max(moved, std::abs(pn[j] - po[j]));
          }
          if (n <= 4) CHECK(std::equal(po, po + K, pn));  // f = 1: bit for bit
        }
      INFO("max |P(log-n) - softmax(f S)| = " << worst);
      CHECK(worst < 1e-13);
      CHECK(moved > 1e-3);  // log-n changed something: the comparison is not vacuous
    }
  }
}

TEST_CASE("log-n = eval: evaluation passes scaled as `always`, training passes as `off`",
          "[log_n]") {
  const int B = 1, L = 7, M = 2, K = M + L, H = 2, dh = 4, d = H * dh;
  std::vector<std::int64_t> q_pos(L), k_pos(K);
  for (int j = 0; j < K; ++j) k_pos[j] = j - M;
  for (int i = 0; i < L; ++i) q_pos[i] = i;
  const AttentionGeometry g{B, L, M, K, H, dh, 0, q_pos.data(), k_pos.data()};
  std::vector<double> x(std::size_t(B) * K * d);
  Rng rng(5);
  for (double& v : x) v = rng.normal(0, 1);
  auto run = [&](const std::string& mode, bool inference) {
    auto layer = make_layer("rope", mode);
    std::vector<double> out(std::size_t(B) * L * d);
    InferenceScratch<double> scratch;
    if (inference)
      layer->attn->forward_inference(x.data(), g, *layer->enc, 0, out.data(), scratch);
    else
      layer->attn->forward(x.data(), g, *layer->enc, 0, out.data());
    return out;
  };
  CHECK(run("eval", false) == run("off", false));
  CHECK(run("eval", true) == run("always", true));
  CHECK(run("always", false) == run("always", true));
  CHECK(max_abs_diff(run("eval", true), run("off", true)) > 1e-3);
}

TEST_CASE("log-n options: a bad combination is a config error naming the key, file and line",
          "[log_n][config]") {
  CHECK_THAT(config_error("[encoding]\ntype = \"alibi\"\nlog_n = \"always\"\n"),
             Contains("t.toml:3: encoding.log_n_len must be >= 2") &&
                 Contains("with encoding.log_n = always, got 0"));
  CHECK_THAT(config_error("[encoding]\ntype = \"rope\"\nlog_n = \"eval\"\nlog_n_len = 1\n"),
             Contains("t.toml:4: encoding.log_n_len must be >= 2"));
  CHECK_THAT(config_error("[encoding]\ntype = \"shaw\"\n\nlog_n_len = 64\n"),
             Contains("t.toml:4: encoding.log_n_len (64) has no effect with encoding.log_n = off"));
  CHECK_THAT(config_error("[encoding]\ntype = \"rope\"\nlog_n = \"qwen\"\n"),
             Contains("t.toml:3: encoding.log_n must be one of"));
  CHECK(config_error("[encoding]\ntype = \"fire\"\nlog_n = \"eval\"\nlog_n_len = 64\n") ==
        "no error");
}
