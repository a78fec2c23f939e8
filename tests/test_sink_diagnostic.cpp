// The attention-sink diagnostic (eval/sink_diagnostic.hpp) on models with planted heads.
//
// The plant. A model with the learned absolute encoding (x_0 = sqrt(d) E[token] + U[pos]) whose
// every token embedding has 1 / sqrt(d) in coordinate 0 and 0 in coordinate 1, and whose position
// table has U[0, 1] = 1 and zeros elsewhere in coordinates 0 and 1. So in layer 0 every query
// row has x_i[0] = 1, and only the key at position 0 has x_j[1] = 1. With W_q[0, c] = W_k[1, c] = a
// for one column c of head h, and every other entry of W_q and W_k zero, head h scores
//
//   S_ij = a^2 / sqrt(d_h)  for j = 0,   0 for j > 0       (x_i[0] = x_0[1] = 1)
//
// so that P_i0 = e^z / (e^z + i) with z = a^2 / sqrt(d_h): z = 50 puts all of the mass on key 0,
// z = ln 3 gives 3 / (3 + i). Every other head (zero W_q, W_k) attends uniformly, P_i0 = 1/(i+1).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.hpp"
#include "model/transformer.hpp"
#include "process_helpers.hpp"
#include "eval/sink_diagnostic.hpp"

using namespace poslab;

// (A named namespace: the tests are compiled in unity batches, where two files' anonymous
// namespaces are one.)
namespace sink_test {

constexpr int kVocab = 16, kD = 8, kHeads = 2, kLayers = 2, kDh = kD / kHeads;

float* values_of(TransformerLM<float>& model, const std::string& name) {
  for (const auto& s : model.arena().slots())
    if (s.name == name) return model.arena().values() + s.offset;
  FAIL("no parameter " << name);
  return nullptr;
}

// A 2-layer, 2-head model whose heads all attend uniformly, except head `head` of layer 0,
// which scores z on key 0 (see the top of this file). z < 0: no planted head.
std::unique_ptr<TransformerLM<float>> planted_model(int head, double z) {
  ModelConfig mc;
  mc.vocab_size = kVocab;
  mc.d_model = kD;
  mc.n_layers = kLayers;
  mc.n_heads = kHeads;
  mc.d_inner = 16;
  auto model = std::make_unique<TransformerLM<float>>(mc, EncodingConfig{"learned", Options{}},
                                                      MemoryConfig{});
  model->init(5);
  for (int n = 0; n < kLayers; ++n) {
    const std::string p = "layer" + std::to_string(n) + ".attn.";
    std::fill_n(values_of(*model, p + "W_q"), kD * kD, 0.0f);
    std::fill_n(values_of(*model, p + "W_k"), kD * kD, 0.0f);
  }
  float* E = values_of(*model, "embedding");  // [V, d]
  float* U = values_of(*model, "learned.U");  // [max_len, d]
  for (int v = 0; v < kVocab; ++v) {
    E[v * kD + 0] = float(1 / std::sqrt(double(kD)));  // sqrt(d) E[v, 0] = 1
    E[v * kD + 1] = 0;
  }
  for (int pos = 0; pos < 1024; ++pos) U[pos * kD + 0] = U[pos * kD + 1] = 0;
  U[0 * kD + 1] = 1;
  if (z >= 0) {
    const double a = std::sqrt(z * std::sqrt(double(kDh)));  // a^2 / sqrt(d_h) = z
    const int c = head * kDh;                                // the head's first column
    values_of(*model, "layer0.attn.W_q")[0 * kD + c] = float(a);
    values_of(*model, "layer0.attn.W_k")[1 * kD + c] = float(a);
  }
  return model;
}

std::vector<std::int32_t> random_stream(long n) {
  Rng rng(9);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = std::int32_t(rng.uniform() * kVocab) % kVocab;
  return tokens;
}

}  // namespace sink_test

using namespace sink_test;

TEST_CASE("sink diagnostic: a head that puts all its mass on key 0 reads 1, the others uniform",
          "[sinks]") {
  const int window = 16;
  SinkDiagnosticOptions o;
  o.window = window;
  o.windows = 10;
  o.batch = 4;  // 4 + 4 + 2: a short last batch
  const auto tokens = random_stream(12 * window);
  for (int planted : {0, 1}) {
    auto model = planted_model(planted, 50.0);
    const SinkDiagnostic d = attention_sink_diagnostic(*model, tokens, o);
    REQUIRE(d.layers == kLayers);
    REQUIRE(d.heads == kHeads);
    CHECK(d.windows == 10);
    CHECK(d.first_query == window / 2);
    // Uniform attention over the i + 1 keys of query i, and its mean over queries 8..15.
    double uniform = 0;
    for (int i = window / 2; i < window; ++i) uniform += 1.0 / (i + 1) / (window / 2);
    CHECK(d.uniform_mass == Approx(uniform).margin(1e-12));
    for (int n = 0; n < kLayers; ++n)
      for (int h = 0; h < kHeads; ++h) {
        INFO("planted head " << planted << ", layer " << n << ", head " << h);
        if (n == 0 && h == planted) {
          CHECK(d.first_key_mass[n][h] == Approx(1.0).margin(1e-6));
          for (int i = 0; i < window; ++i) CHECK(d.profile[n][h][i] == Approx(1.0).margin(1e-6));
        } else {
          CHECK(d.first_key_mass[n][h] == Approx(uniform).margin(1e-6));
          for (int i = 0; i < window; ++i)
            CHECK(d.profile[n][h][i] == Approx(1.0 / (i + 1)).margin(1e-6));
        }
      }
  }
}

TEST_CASE("sink diagnostic: a partial sink reads e^z / (e^z + i) at every query", "[sinks]") {
  const int window = 12;
  SinkDiagnosticOptions o;
  o.window = window;
  o.first_query = 2;
  auto model = planted_model(1, std::log(3.0));
  const auto tokens = random_stream(5 * window + 7);  // 5 whole windows; the tail is not read
  const SinkDiagnostic d = attention_sink_diagnostic(*model, tokens, o);
  CHECK(d.windows == 5);
  double expected = 0;
  for (int i = 0; i < window; ++i) {
    CHECK(d.profile[0][1][i] == Approx(3.0 / (3.0 + i)).margin(1e-5));
    if (i >= 2) expected += 3.0 / (3.0 + i) / (window - 2);
  }
  CHECK(d.first_key_mass[0][1] == Approx(expected).margin(1e-5));
  CHECK(d.first_key_mass[0][0] == Approx(d.uniform_mass).margin(1e-6));
}

TEST_CASE("sink diagnostic: the model's state is restored after the pass", "[sinks]") {
  auto model = planted_model(0, 50.0);
  model->set_inference_only(true);
  SinkDiagnosticOptions o;
  o.window = 8;
  attention_sink_diagnostic(*model, random_stream(64), o);
  CHECK(model->set_inference_only(true) == true);  // it was on, and is again
  CHECK(model->memory_rows() == 0);
}

TEST_CASE("sink diagnostic: a stream too short or a bad query range is an error", "[sinks]") {
  auto model = planted_model(0, 50.0);
  SinkDiagnosticOptions o;
  o.window = 16;
  o.windows = 5;
  CHECK_THROWS_WITH(attention_sink_diagnostic(*model, random_stream(4 * 16), o),
                    Catch::Contains("5 windows of 16 tokens need 80 tokens") &&
                        Catch::Contains("holds 64"));
  o.windows = 0;
  CHECK_THROWS_AS(attention_sink_diagnostic(*model, random_stream(15), o), std::invalid_argument);
  o.first_query = 16;
  CHECK_THROWS_WITH(attention_sink_diagnostic(*model, random_stream(64), o),
                    Catch::Contains("leaves no query"));
}

TEST_CASE("poslab sinks writes the diagnostic of a trained run", "[sinks][cli]") {
  namespace fs = std::filesystem;
  using poslab::shell_quote;
  using namespace poslab::testing;
  ScratchDirectory dir;
  const fs::path run = train_tiny_corpus_run(dir.path, "n_layers = 2\nn_heads = 2\n",
                                             "[encoding]\ntype = \"rope\"\n", 60);
  const Outcome r = run_poslab("sinks --run " + shell_quote(run.string()) + " --windows 3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path out = run / "sinks";  // the default
  const nlohmann::json info = json_of(out / "sinks.json");
  CHECK(info["window"] == kTinySeqLen);  // train.seq_len
  CHECK(info["windows"] == 3);
  CHECK(info["first_query"] == kTinySeqLen / 2);
  CHECK(info["split"] == "valid");
  REQUIRE(info["heads"].size() == 4);  // 2 layers x 2 heads
  for (const auto& h : info["heads"]) {
    CHECK(h["first_key_mass"].get<double>() > 0);
    CHECK(h["first_key_mass"].get<double>() <= 1 + 1e-6);
  }
  // sink_heads.csv: a header and one line per head; sink_profile.csv: one per (head, query),
  // where query 0 sees key 0 alone (weight exactly 1, as for uniform attention).
  const std::string heads = read_file(out / "sink_heads.csv");
  CHECK(std::count(heads.begin(), heads.end(), '\n') == 1 + 4);
  const std::string profile = read_file(out / "sink_profile.csv");
  CHECK(std::count(profile.begin(), profile.end(), '\n') == 1 + 4 * kTinySeqLen);
  CHECK_THAT(profile, Catch::Contains("\n0,0,0,1,1\n") && Catch::Contains("\n1,1,0,1,1\n"));

  SECTION("more windows than the split holds is an error naming the sizes") {
    const Outcome e = run_poslab("sinks --run " + shell_quote(run.string()) +
                                 " --windows 100000 --out " + shell_quote((dir.path / "x").string()));
    CHECK(e.exit_code == 1);
    CHECK_THAT(e.err, Catch::Contains("100000 windows of 8 tokens") && Catch::Contains("holds"));
    CHECK_FALSE(fs::exists(dir.path / "x" / "sinks.json"));
  }
  SECTION("a threshold outside (0, 1] is an error") {
    const Outcome e = run_poslab("sinks --run " + shell_quote(run.string()) + " --threshold 2");
    CHECK(e.exit_code == 1);
    CHECK_THAT(e.err, Catch::Contains("--threshold"));
  }
}
