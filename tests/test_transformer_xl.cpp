// Transformer-XL (Dai et al. 2019): the rel-shift trick cell by cell, efficient == naive, gradient
// checks of the hook, of the attention layer and of a whole model, and shift invariance.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "encoding_test_helpers.hpp"
#include "encodings/registry.hpp"
#include "encodings/rel_shift.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"
#include "nn/attention.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

const EncodingInfo& xl_info() {
  const EncodingInfo* info = find_encoding("transformer_xl");
  REQUIRE(info != nullptr);
  return *info;
}

// Defaults, a large init so that every term matters, then the given changes.
Options xl_options(const std::map<std::string, OptionValue>& changes = {}) {
  Options o = Options::defaults(xl_info().options);
  o.set("init_std", 0.5);
  for (const auto& [k, v] : changes) o.set(k, v);
  return o;
}

// An encoding with its own arena (optionally with an attention layer in the same arena).
struct Xl {
  ParameterArena<double> arena;
  std::unique_ptr<Attention<double>> attn;
  std::unique_ptr<Encoding<double>> enc;
  Xl(const Options& o, int d, int H, int n_layers, bool with_attention = false,
     std::uint64_t seed = 7) {
    if (with_attention) attn = std::make_unique<Attention<double>>(arena, "attn.", d, H);
    enc = xl_info().make<double>(o, EncodingShape{d, H, d / H, n_layers}, arena);
    arena.allocate();
    Rng rng(seed);
    if (attn) attn->init(rng, 0.5);
    enc->init(arena, rng);
  }
  Xl(const Xl&) = delete;
};

// Positions and the geometry that points at them.
struct Geo {
  std::vector<std::int64_t> qp, kp;
  AttentionGeometry g;
  // start: position of the first query. randomized: strictly increasing positions with random
  // gaps (not contiguous: the encoding must gather by distance).
  Geo(int B, int L, int M, int H, int dh, int window, std::int64_t start, bool randomized = false,
      std::uint64_t seed = 3) {
    const int K = M + L;
    kp.resize(K);
    if (randomized) {
      Rng rng(seed);
      std::int64_t p = start;
      for (int j = 0; j < K; ++j) {
        kp[j] = p;
        p += 1 + std::int64_t(rng.below(3));
      }
    } else {
      std::iota(kp.begin(), kp.end(), start - M);
    }
    qp.assign(kp.begin() + M, kp.end());
    g = AttentionGeometry{B, L, M, K, H, dh, window, qp.data(), kp.data()};
  }
  Geo(const Geo&) = delete;
};

// Random [B, H, L, K] values on visible cells, exactly 0 on masked ones (what the attention
// passes to scores_backward).
std::vector<double> visible_random(const AttentionGeometry& g, Rng& rng) {
  std::vector<double> r(std::size_t(g.batch) * g.n_heads * g.q_len * g.k_len, 0.0);
  for (int bh = 0; bh < g.batch * g.n_heads; ++bh)
    for (int i = 0; i < g.q_len; ++i)
      for (int j = 0; j < g.k_len; ++j)
        if (g.visible(i, j)) r[(std::size_t(bh) * g.q_len + i) * g.k_len + j] = rng.normal();
  return r;
}

double max_visible_diff(const AttentionGeometry& g, const std::vector<double>& a,
                        const std::vector<double>& b) {
  double m = 0;
  for (int bh = 0; bh < g.batch * g.n_heads; ++bh)
    for (int i = 0; i < g.q_len; ++i)
      for (int j = 0; j < g.k_len; ++j)
        if (g.visible(i, j)) {
          const std::size_t c = (std::size_t(bh) * g.q_len + i) * g.k_len + j;
          m = std::max(m, std::abs(a[c] - b[c]));
        }
  return m;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// 1. The rel-shift trick
// ------------------------------------------------------------------------------------------------

TEST_CASE("rel_shift: every causal cell holds the entry of distance i + M - j", "[xl][rel_shift]") {
  Rng rng(1);
  for (int M : {0, 3, 1}) {
    const int L = 4, K = M + L;
    // value[i][dist]: a different random number for every (query, distance).
    std::vector<double> value(L * K), x(L * K), out(L * K, -99.0),
        padded(rel_shift_padded_size(L, K));
    for (auto& e : value) e = rng.normal();
    for (int i = 0; i < L; ++i)
      for (int c = 0; c < K; ++c) x[i * K + c] = value[i * K + (K - 1 - c)];  // column c: K-1-c
    rel_shift(x.data(), L, K, padded.data(), out.data());
    INFO("M = " << M);
    for (int i = 0; i < L; ++i)
      for (int j = 0; j <= i + M; ++j) REQUIRE(out[i * K + j] == value[i * K + (i + M - j)]);
    // The first cell past the causal boundary is the padding zero; the ones after it are
    // garbage from the next query's row (harmless only because the causal mask removes them).
    for (int i = 0; i + M + 1 < K; ++i) REQUIRE(out[i * K + i + M + 1] == 0.0);
    for (int i = 0; i + M + 2 < K; ++i)
      for (int j = i + M + 2; j < K; ++j) REQUIRE(out[i * K + j] == x[(i + 1) * K + j - i - M - 2]);

    // The in-place form used by the encoding (write x at rel_shift_input, read at
    // rel_shift_output) is the same map.
    std::vector<double> pad2(rel_shift_padded_size(L, K), 5.0);
    double* in = rel_shift_input(pad2.data());
    for (int i = 0; i < L; ++i)
      for (int c = 0; c < K; ++c) in[i * (K + 1) + c] = x[i * K + c];
    rel_shift_zero_pad(pad2.data(), L, K);
    const double* shifted = rel_shift_output(pad2.data(), L);
    for (int c = 0; c < L * K; ++c) REQUIRE(shifted[c] == out[c]);
  }
}

TEST_CASE("rel_shift backward is the transpose on causal cells", "[xl][rel_shift]") {
  Rng rng(2);
  for (int M : {0, 3}) {
    const int L = 4, K = M + L;
    std::vector<double> x(L * K), out(L * K), y(L * K, 0.0), dx(L * K, 0.0),
        pad(rel_shift_padded_size(L, K)), dpad(rel_shift_padded_size(L, K));
    for (auto& e : x) e = rng.normal();
    for (int i = 0; i < L; ++i)
      for (int j = 0; j <= i + M; ++j) y[i * K + j] = rng.normal();  // 0 on non-causal cells
    rel_shift(x.data(), L, K, pad.data(), out.data());
    rel_shift_backward(y.data(), L, K, dpad.data(), dx.data());
    // <shift(x), y> == <x, shift^T(y)>
    REQUIRE(dot(y, out.data()) == Approx(dot(x, dx.data())).epsilon(1e-14));
    // Garbage on non-causal cells of dout never reaches dx.
    std::vector<double> y2 = y, dx2(L * K, 0.0);
    for (int i = 0; i < L; ++i)
      for (int j = i + M + 1; j < K; ++j) y2[i * K + j] = 1e6;
    rel_shift_backward(y2.data(), L, K, dpad.data(), dx2.data());
    REQUIRE(max_abs_diff(dx, dx2) == 0.0);
  }
}

TEST_CASE("rel_shift garbage never reaches the softmax: masked probs are 0, result == naive",
          "[xl][rel_shift]") {
  const int B = 2, L = 4, M = 3, K = M + L, d = 8, H = 2, dh = d / H;
  for (int window : {0, 5}) {
    Geo geo(B, L, M, H, dh, window, 0);
    const auto& g = geo.g;
    Xl fast(xl_options(), d, H, 1, true), naive(xl_options({{"naive", true}}), d, H, 1, true);
    REQUIRE(max_abs_diff(
                std::vector<double>(fast.arena.values(), fast.arena.values() + fast.arena.count()),
                std::vector<double>(naive.arena.values(),
                                    naive.arena.values() + naive.arena.count())) == 0.0);
    Rng rng(4);
    // The hook alone: garbage is really there on non-causal cells of the efficient path.
    auto q = random_vector(B * L * d, rng), k = random_vector(B * K * d, rng);
    std::vector<double> S(B * H * L * K, 0.0);
    fast.enc->scores_forward(0, g, q.data(), k.data(), 0.5, S.data());
    double garbage = 0;
    for (int bh = 0; bh < B * H; ++bh)
      for (int i = 0; i < L; ++i)
        for (int j = i + M + 2; j < K; ++j)
          garbage = std::max(garbage, std::abs(S[(bh * L + i) * K + j]));
    REQUIRE(garbage > 1e-3);
    // Through the attention layer.
    auto x = random_vector(B * K * d, rng);
    std::vector<double> out_fast(B * L * d), out_naive(B * L * d);
    fast.attn->forward(x.data(), g, *fast.enc, 0, out_fast.data());
    naive.attn->forward(x.data(), g, *naive.enc, 0, out_naive.data());
    const auto& P = fast.attn->probs();
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j)
            if (!g.visible(i, j)) REQUIRE(P(b, h, i, j) == 0.0);
    INFO("window " << window);
    REQUIRE(max_abs_diff(out_fast, out_naive) < 1e-12);
    std::vector<double> pf(P.begin(), P.end()),
        pn(naive.attn->probs().begin(), naive.attn->probs().end());
    REQUIRE(max_abs_diff(pf, pn) < 1e-12);
  }
}

// ------------------------------------------------------------------------------------------------
// 2. Efficient == naive, hook level
// ------------------------------------------------------------------------------------------------

namespace {

struct Case {
  std::string name;
  std::map<std::string, OptionValue> options;
};

std::vector<Case> option_cases() {
  return {
      {"defaults", {}},
      {"clamp_len 2", {{"clamp_len", std::int64_t(2)}}},
      {"untie_uv", {{"untie_uv", true}}},
      {"term_a off", {{"term_a", false}}},
      {"term_b off", {{"term_b", false}}},
      {"term_c off", {{"term_c", false}}},
      {"term_d off", {{"term_d", false}}},
      {"(b) only", {{"term_c", false}, {"term_d", false}}},
      {"(c) only", {{"term_b", false}, {"term_d", false}}},
      {"(d) only", {{"term_b", false}, {"term_c", false}}},
      {"untie_uv, clamp_len 1, term_a off",
       {{"untie_uv", true}, {"clamp_len", std::int64_t(1)}, {"term_a", false}}},
  };
}

// Runs the hook of both implementations on one geometry and compares everything it produces.
void compare_hooks(Xl& fast, Xl& naive, const AttentionGeometry& g, int layer, Rng& rng) {
  const int B = g.batch, L = g.q_len, K = g.k_len, d = g.d_model(), H = g.n_heads;
  auto q = random_vector(B * L * d, rng), k = random_vector(B * K * d, rng);
  const auto S0 = random_vector(B * H * L * K, rng);
  auto Sf = S0, Sn = S0;
  const double scale = 1.0 / std::sqrt(double(g.d_head));
  fast.enc->scores_forward(layer, g, q.data(), k.data(), scale, Sf.data());
  naive.enc->scores_forward(layer, g, q.data(), k.data(), scale, Sn.data());
  REQUIRE(max_visible_diff(g, Sf, S0) > 1e-3);  // the terms are not negligible
  REQUIRE(max_visible_diff(g, Sf, Sn) < 1e-12);

  const auto dS = visible_random(g, rng);
  const auto dq0 = random_vector(B * L * d, rng), dk0 = random_vector(B * K * d, rng);
  auto dqf = dq0, dqn = dq0, dkf = dk0, dkn = dk0;
  fast.arena.zero_grads();
  naive.arena.zero_grads();
  fast.enc->scores_backward(layer, g, q.data(), k.data(), scale, dS.data(), dqf.data(), dkf.data());
  naive.enc->scores_backward(layer, g, q.data(), k.data(), scale, dS.data(), dqn.data(),
                             dkn.data());
  REQUIRE(max_abs_diff(dqf, dqn) < 1e-12);
  REQUIRE(max_abs_diff(dkf, dkn) < 1e-12);
  const std::vector<double> gf(fast.arena.grads(), fast.arena.grads() + fast.arena.count()),
      gn(naive.arena.grads(), naive.arena.grads() + naive.arena.count());
  REQUIRE(max_abs_diff(gf, gn) < 1e-12);
}

}  // namespace

TEST_CASE("transformer_xl: efficient == naive for scores and every backward output",
          "[xl][naive]") {
  const int B = 2, L = 4, d = 8, H = 2, dh = d / H, n_layers = 2;
  for (const auto& c : option_cases()) {
    auto naive_options = c.options;
    naive_options["naive"] = true;
    Xl fast(xl_options(c.options), d, H, n_layers),
        naive(xl_options(naive_options), d, H, n_layers);
    Rng rng(5);
    // One pair of encodings through a sequence of geometries: buffers and the distance table are
    // rebuilt when the geometry changes.
    struct G {
      int M, window;
      std::int64_t start;
      bool randomized;
    };
    for (const G& s : {G{0, 0, 0, false}, G{3, 0, 0, false}, G{3, 4, 7, false}, G{5, 0, 2, true},
                       G{3, 0, 0, false}, G{2, 3, 13, true}, G{6, 0, 13, false}}) {
      Geo geo(B, L, s.M, H, dh, s.window, s.start, s.randomized);
      for (int layer : {0, 1}) {
        INFO(c.name << ", M " << s.M << ", window " << s.window << ", start " << s.start
                    << (s.randomized ? ", randomized positions" : "") << ", layer " << layer);
        compare_hooks(fast, naive, geo.g, layer, rng);
      }
    }
  }
}

TEST_CASE("transformer_xl: clamp_len makes all distances >= clamp_len look alike", "[xl]") {
  // Terms (b) and (d) only: the score depends on the query and the clamped distance alone.
  const int B = 1, L = 5, M = 2, K = M + L, d = 8, H = 2, dh = d / H;
  Xl xl(xl_options({{"clamp_len", std::int64_t(2)}, {"term_a", false}, {"term_c", false}}), d, H,
        1);
  Geo geo(B, L, M, H, dh, 0, 0);
  Rng rng(6);
  auto q = random_vector(B * L * d, rng), k = random_vector(B * K * d, rng);
  std::vector<double> S(B * H * L * K, 0.0);
  xl.enc->scores_forward(0, geo.g, q.data(), k.data(), 0.5, S.data());
  REQUIRE_FALSE(xl.enc->has_content_term());
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < L; ++i) {
      const double* row = S.data() + (h * L + i) * K;
      const int j_at_clamp = i + M - 2;  // distance exactly 2
      for (int j = 0; j < j_at_clamp; ++j)
        REQUIRE(row[j] == Approx(row[j_at_clamp]).epsilon(1e-13).margin(1e-14));
      if (j_at_clamp >= 0) REQUIRE(std::abs(row[j_at_clamp] - row[j_at_clamp + 1]) > 1e-6);
    }
}

TEST_CASE("transformer_xl: parameters, names and options", "[xl]") {
  const int d = 8, H = 2;
  Xl shared(xl_options(), d, H, 3), untied(xl_options({{"untie_uv", true}}), d, H, 3),
      shaw_like(xl_options({{"term_c", false}, {"term_d", false}}), d, H, 3);
  auto names = [](const Xl& x) {
    std::vector<std::string> n;
    for (const auto& s : x.arena.slots()) n.push_back(s.name + (s.weight_decay ? "+wd" : ""));
    return n;
  };
  REQUIRE(names(shared) == std::vector<std::string>{"layer0.xl.W_kR+wd", "layer1.xl.W_kR+wd",
                                                    "layer2.xl.W_kR+wd", "xl.u", "xl.v"});
  REQUIRE(names(untied) == std::vector<std::string>{"layer0.xl.W_kR+wd", "layer1.xl.W_kR+wd",
                                                    "layer2.xl.W_kR+wd", "layer0.xl.u",
                                                    "layer0.xl.v", "layer1.xl.u", "layer1.xl.v",
                                                    "layer2.xl.u", "layer2.xl.v"});
  REQUIRE(names(shaw_like) ==
          std::vector<std::string>{"layer0.xl.W_kR+wd", "layer1.xl.W_kR+wd", "layer2.xl.W_kR+wd"});
  REQUIRE(shared.arena.slots()[0].shape == std::vector<std::size_t>{8, 8});
  REQUIRE(shared.arena.slots()[3].shape == std::vector<std::size_t>{2, 4});
  REQUIRE(xl_info().family == EncodingFamily::relative);
  // Default init std 0.02.
  Xl defaults(Options::defaults(xl_info().options), 64, 4, 1, false, 9);
  double ss = 0;
  for (std::size_t i = 0; i < defaults.arena.count(); ++i)
    ss += defaults.arena.values()[i] * defaults.arena.values()[i];
  REQUIRE(std::sqrt(ss / defaults.arena.count()) == Approx(0.02).epsilon(0.05));
}

// ------------------------------------------------------------------------------------------------
// 3. Gradient checks
// ------------------------------------------------------------------------------------------------

TEST_CASE("transformer_xl hook: gradients of q, k, u, v and W_kR", "[xl][grad]") {
  const int B = 2, L = 3, d = 8, H = 2, dh = d / H;
  const std::vector<Case> cases = {
      {"defaults", {}},
      {"untie_uv, clamp_len 2", {{"untie_uv", true}, {"clamp_len", std::int64_t(2)}}},
      {"naive", {{"naive", true}}}};
  for (const auto& c : cases)
    for (bool randomized : {false, true})
      for (int window : {0, 3}) {
        const int M = 2, K = M + L;
        Xl xl(xl_options(c.options), d, H, 2);
        Geo geo(B, L, M, H, dh, window, 0, randomized);
        const auto& g = geo.g;
        Rng rng(8);
        auto q = random_vector(B * L * d, rng), k = random_vector(B * K * d, rng);
        const auto W = visible_random(g, rng);  // loss = sum of W * scores over visible cells
        std::vector<double> S(B * H * L * K);
        const int layer = 1;
        auto loss = [&] {
          std::fill(S.begin(), S.end(), 0.0);
          xl.enc->scores_forward(layer, g, q.data(), k.data(), 0.5, S.data());
          return dot(W, S.data());
        };
        loss();
        std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0);
        xl.arena.zero_grads();
        xl.enc->scores_backward(layer, g, q.data(), k.data(), 0.5, W.data(), dq.data(), dk.data());
        INFO(c.name << (randomized ? ", randomized positions" : "") << ", window " << window);
        require_gradient("q", q.data(), dq.data(), q.size(), loss);
        require_gradient("k", k.data(), dk.data(), k.size(), loss);
        for (const auto& slot : xl.arena.slots()) {
          if (slot.name.rfind("layer0.", 0) == 0) {  // not used by layer 1: zero gradient
            for (std::size_t i = 0; i < slot.size; ++i)
              REQUIRE(xl.arena.grads()[slot.offset + i] == 0.0);
            continue;
          }
          require_gradient(slot.name, xl.arena.values() + slot.offset,
                           xl.arena.grads() + slot.offset, slot.size, loss);
        }
      }
}

TEST_CASE(
    "transformer_xl through Attention<double>: gradients of x and all parameters, with memory",
    "[xl][grad]") {
  const int B = 2, L = 3, M = 2, d = 8, H = 2, dh = d / H;
  const std::vector<Case> cases = {
      {"defaults", {}},
      {"term_a off, clamp_len 1", {{"term_a", false}, {"clamp_len", std::int64_t(1)}}},
      {"untie_uv", {{"untie_uv", true}}}};
  for (const auto& c : cases)
    for (int window : {0, 3}) {
      Xl xl(xl_options(c.options), d, H, 1, true);
      Geo geo(B, L, M, H, dh, window, 0);
      Rng rng(9);
      INFO(c.name << ", window " << window);
      check_attention_gradients(*xl.attn, *xl.enc, xl.arena, geo.g, 0, rng,
                                "x (memory and segment rows)", "attention and encoding parameters");
    }
}

// ------------------------------------------------------------------------------------------------
// 4. Shift invariance
// ------------------------------------------------------------------------------------------------

TEST_CASE("transformer_xl: adding 13 to every position leaves the outputs unchanged",
          "[xl][property]") {
  const int B = 2, L = 4, M = 3, K = M + L, d = 8, H = 2, dh = d / H;
  for (bool naive : {false, true})
    for (bool randomized : {false, true})
      for (int window : {0, 4}) {
        Xl xl(xl_options({{"naive", naive}, {"clamp_len", std::int64_t(4)}}), d, H, 1, true);
        Rng rng(10);
        auto x = random_vector(B * K * d, rng);
        std::vector<double> out0(B * L * d), out13(B * L * d), outabs(B * L * d);
        Geo at0(B, L, M, H, dh, window, 0, randomized),
            at13(B, L, M, H, dh, window, 13, randomized);
        xl.attn->forward(x.data(), at0.g, *xl.enc, 0, out0.data());
        xl.attn->forward(x.data(), at13.g, *xl.enc, 0, out13.data());
        INFO((naive ? "naive" : "efficient")
             << (randomized ? ", randomized positions" : "") << ", window " << window);
        REQUIRE(max_abs_diff(out0, out13) < 1e-12);
        // Positions do matter: different gaps between the same keys change the output.
        Geo other(B, L, M, H, dh, window, 0, !randomized, 77);
        xl.attn->forward(x.data(), other.g, *xl.enc, 0, outabs.data());
        REQUIRE(max_abs_diff(out0, outabs) > 1e-6);
      }
}
