// The conformance kit: every registered encoding goes through the same tests. Registering an
// encoding (src/encodings/registry.cpp) is all it takes to be tested here.
//
//   1. gradient check (double) of every parameter of a model using the encoding, with memory
//   2. relative / none: scores unchanged when all positions shift; absolute: changed;
//      relative_normalized (FIRE): unchanged by a small shift, changed far beyond the threshold
//   3. efficient == naive, for encodings that offer `naive = true`
//   4. state reuse: with unbounded memory, two segments with memory == one pass for relative
//      schemes (and for absolute ones with continued positions); absolute schemes restarted per
//      segment differ (the failure case of Dai et al. 2019)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "encoding_test_helpers.hpp"
#include "gradcheck.hpp"
#include "model/transformer.hpp"

using namespace poslab;
using namespace poslab::testing;

namespace {

std::vector<std::string> encoding_names() {
  std::vector<std::string> names;
  for (const auto& e : registered_encodings()) names.push_back(e.name);
  return names;
}

ModelConfig kit_model() { return tiny_model_config(false, false, "gelu"); }

EncodingConfig kit_encoding(const std::string& name, bool naive = false) {
  EncodingConfig e;
  e.type = name;
  e.options = default_options(name);
  // Large initial tables so that the positional terms are not negligible next to the content.
  if (e.options.has("init_std")) e.options.set("init_std", 0.3);
  if (e.options.has("naive")) e.options.set("naive", naive);
  return e;
}

// A model with every parameter at a generic point (biases and gains randomised too).
std::unique_ptr<TransformerLM<double>> make_model(const EncodingConfig& e, const MemoryConfig& mem,
                                                  std::uint64_t seed = 11) {
  auto model = std::make_unique<TransformerLM<double>>(kit_model(), e, mem);
  model->init(seed);
  Rng rng(seed + 1);
  perturb_undecayed_parameters(model->arena(), rng);
  return model;
}

std::vector<std::int32_t> random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = std::int32_t(rng.below(7));
  return t;
}

}  // namespace

TEST_CASE("conformance: gradient of every parameter, with memory", "[conformance][grad]") {
  const auto name = GENERATE(from_range(encoding_names()));
  DYNAMIC_SECTION("encoding " << name) {
    MemoryConfig mem;
    mem.mem_len = 3;
    auto model = make_model(kit_encoding(name), mem);
    const int B = 2, L = 4;
    auto tok = random_tokens(B * L, 1), tgt = random_tokens(B * L, 2);
    auto tok2 = random_tokens(B * L, 3), tgt2 = random_tokens(B * L, 4);
    model->forward(tok.data(), tgt.data(), nullptr, B, L, 0, true);  // fills the memory
    auto loss = [&] { return model->forward(tok2.data(), tgt2.data(), nullptr, B, L, L, false); };
    model->arena().zero_grads();
    loss();
    model->backward();
    auto& a = model->arena();
    std::vector<double> analytic(a.grads(), a.grads() + a.count());
    require_gradient(name + ": every parameter", a.values(), analytic.data(), a.count(), loss,
                     1e-6, [&](std::size_t i) { return locate(a, i); });
  }
}

TEST_CASE("conformance: shifting every position changes only absolute encodings",
          "[conformance][property]") {
  const auto name = GENERATE(from_range(encoding_names()));
  DYNAMIC_SECTION("encoding " << name) {
    MemoryConfig mem;
    mem.continue_positions = true;  // so the offset reaches the positions
    auto model = make_model(kit_encoding(name), mem);
    const int B = 2, L = 5;
    auto tok = random_tokens(B * L, 5), tgt = random_tokens(B * L, 6);
    model->forward(tok.data(), tgt.data(), nullptr, B, L, 0);
    const xt::xtensor<double, 2> at_zero = model->logits();
    model->forward(tok.data(), tgt.data(), nullptr, B, L, 17);
    const double diff = max_abs_diff(at_zero.data(), model->logits().data(), at_zero.size());
    INFO("max |logits(pos) - logits(pos + 17)| = " << diff);
    switch (find_encoding(name)->family) {
      case EncodingFamily::absolute:
        REQUIRE(diff > 1e-6);
        break;
      case EncodingFamily::none:
      case EncodingFamily::relative:
        REQUIRE(diff < 1e-12);
        break;
      case EncodingFamily::relative_normalized: {
        // Relative while the queries stay below the normaliser's threshold (positions <= 21
        // here), not once they are far beyond it.
        REQUIRE(diff < 1e-12);
        model->forward(tok.data(), tgt.data(), nullptr, B, L, 1000000);
        const double far = max_abs_diff(at_zero.data(), model->logits().data(), at_zero.size());
        INFO("max |logits(pos) - logits(pos + 10^6)| = " << far);
        REQUIRE(far > 1e-6);
        break;
      }
    }
  }
}

TEST_CASE("conformance: the efficient implementation equals the naive one",
          "[conformance][naive]") {
  const auto name = GENERATE(from_range(encoding_names()));
  DYNAMIC_SECTION("encoding " << name) {
    if (!find_encoding(name)->make_double || !Options::defaults(find_encoding(name)->options).has("naive")) {
      SUCCEED(name << " has a single implementation");
    } else {
      for (bool same_length : {false, true}) {
        MemoryConfig mem;
        mem.mem_len = 3;
        mem.same_length = same_length;
        auto fast = make_model(kit_encoding(name, false), mem);
        auto naive = make_model(kit_encoding(name, true), mem);
        const int B = 2, L = 4;
        for (int seg = 0; seg < 2; ++seg) {  // second segment: with memory
          auto tok = random_tokens(B * L, 10 + seg), tgt = random_tokens(B * L, 20 + seg);
          fast->arena().zero_grads();
          naive->arena().zero_grads();
          fast->forward(tok.data(), tgt.data(), nullptr, B, L, seg * L);
          naive->forward(tok.data(), tgt.data(), nullptr, B, L, seg * L);
          fast->backward();
          naive->backward();
          INFO("segment " << seg << ", same_length " << same_length);
          REQUIRE(max_abs_diff(fast->logits().data(), naive->logits().data(),
                               fast->logits().size()) < 1e-12);
          REQUIRE(max_abs_diff(fast->arena().grads(), naive->arena().grads(),
                               fast->arena().count()) < 1e-12);
        }
      }
    }
  }
}

TEST_CASE("conformance: state reuse with unbounded memory equals one pass, except restarted "
          "absolute positions",
          "[conformance][memory]") {
  const auto name = GENERATE(from_range(encoding_names()));
  const bool absolute = find_encoding(name)->family == EncodingFamily::absolute;
  for (bool continue_positions : {false, true}) {
    DYNAMIC_SECTION("encoding " << name << ", continue_positions " << continue_positions) {
      const int B = 2, L = 4;
      auto tok = random_tokens(B * 2 * L, 30), tgt = random_tokens(B * 2 * L, 31);
      // One pass over 2L tokens.
      MemoryConfig none;
      none.continue_positions = continue_positions;
      auto whole = make_model(kit_encoding(name), none);
      whole->forward(tok.data(), tgt.data(), nullptr, B, 2 * L, 0);
      // Two segments of L, the second attending to the first through memory.
      MemoryConfig mem = none;
      mem.mem_len = 2 * L;
      auto segmented = make_model(kit_encoding(name), mem);
      std::vector<std::int32_t> seg_tok(B * L), seg_tgt(B * L);
      for (int s = 0; s < 2; ++s) {
        for (int b = 0; b < B; ++b)
          for (int i = 0; i < L; ++i) {
            seg_tok[b * L + i] = tok[b * 2 * L + s * L + i];
            seg_tgt[b * L + i] = tgt[b * 2 * L + s * L + i];
          }
        segmented->forward(seg_tok.data(), seg_tgt.data(), nullptr, B, L, s * L);
      }
      // Compare the logits of the second segment with rows L..2L-1 of the single pass.
      const int V = kit_model().vocab_size;
      double diff = 0;
      for (int b = 0; b < B; ++b)
        diff = std::max(diff, max_abs_diff(segmented->logits().data() + b * L * V,
                                           whole->logits().data() + (b * 2 * L + L) * V, L * V));
      INFO("max |segmented - one pass| = " << diff);
      if (absolute && !continue_positions)
        REQUIRE(diff > 1e-6);  // every segment restarts at position 0: state reuse breaks
      else
        REQUIRE(diff < 1e-10);
    }
  }
}

TEST_CASE("a failing gradient check names the parameter and its coordinates", "[conformance]") {
  ParameterArena<double> arena;
  arena.add("layer0.attn.W_q", {2, 3});
  arena.add("t5.bias", {4, 2});
  arena.allocate();
  CHECK(locate(arena, 0) == "layer0.attn.W_q[0, 0] of shape [2, 3]");
  CHECK(locate(arena, 5) == "layer0.attn.W_q[1, 2] of shape [2, 3]");
  CHECK(locate(arena, 6 + 2 * 2 + 1) == "t5.bias[2, 1] of shape [4, 2]");
  CHECK(locate(arena, 14) == "index 14 (outside every parameter)");
}
