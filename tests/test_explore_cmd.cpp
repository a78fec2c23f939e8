// `poslab explore` and `poslab report`, run as a user would. The explorer's maps must be the
// attention weights `poslab attention` dumps for the same input, pooled as
// eval/attention_maps.hpp says; bad input is refused with the file named and nothing written.
// (The pages themselves are checked in a real browser by scripts/test-browser.sh.) The last case
// checks the computing parts alone, without a run directory or the command line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "core/rng.hpp"
#include "encodings/registry.hpp"
#include "eval/attention_maps.hpp"
#include "eval/attention_weights.hpp"
#include "model/transformer.hpp"
#include "process_helpers.hpp"

using Catch::Contains;
using poslab::shell_quote;
using poslab::testing::Outcome;
using poslab::testing::read_file;
using poslab::testing::run_poslab;
using poslab::testing::ScratchDirectory;
namespace fs = std::filesystem;

namespace {

// 8 heads: ALiBi's steepest slope is 1/2, so at 8x (64 tokens) the oldest keys get weights near
// e^-31, which a byte rounds to 0 (issue 33: such cells were drawn white, as if masked).
constexpr int kExploreSeqLen = poslab::testing::kTinySeqLen, kExploreHeads = 8, kExploreLayers = 2;

// A tiny ALiBi model trained for 2 steps on a tiny corpus inside `dir`.
fs::path train_tiny_run(const fs::path& dir) {
  return poslab::testing::train_tiny_corpus_run(dir,
                                                "n_layers = " + std::to_string(kExploreLayers) +
                                                    "\nn_heads = " + std::to_string(kExploreHeads) +
                                                    "\n",
                                                "[encoding]\ntype = \"alibi\"\n", 200);
}

// The JSON inside "poslabExplore.add(KEY, {...});" or "window.POSLAB_EXPLORE = {...};".
nlohmann::json script_data(const fs::path& file) {
  const std::string text = read_file(file);
  const auto begin = text.find('{'), end = text.rfind('}');
  REQUIRE(begin != std::string::npos);
  return nlohmann::json::parse(text.substr(begin, end - begin + 1));
}

std::vector<unsigned char> unbase64(const std::string& text) {
  const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> out;
  unsigned bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    bits = (bits << 6) | unsigned(digits.find(c));
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back((bits >> count) & 255);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("poslab explore stores the attention weights of poslab attention, pooled",
          "[cli][explore]") {
  ScratchDirectory dir;
  const fs::path run = train_tiny_run(dir.path);
  // A text of 8 x 8 + 1 bytes: every factor fits (no memory).
  std::string text;
  while (text.size() < 8 * kExploreSeqLen + 1) text += "Ask not what your country can do for you. ";
  text.resize(8 * kExploreSeqLen + 1);
  std::ofstream(dir.path / "text.txt") << text;
  const fs::path out = dir.path / "explorer";
  const Outcome r = run_poslab("explore " + shell_quote(run.string()) + " --texts 0 --text " +
                               shell_quote((dir.path / "text.txt").string()) + " --factors 1,2,8" +
                               " --out " + shell_quote(out.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(out / "index.html"));
  CHECK(fs::exists(out / "lib" / "vega-lite" / "vega-lite.min.js"));
  CHECK(fs::exists(out / "lib" / "vega-lite" / "LICENSE"));
  const nlohmann::json index = script_data(out / "data" / "index.js");
  REQUIRE(index["runs"].size() == 1);
  CHECK(index["runs"][0]["encoding"] == "alibi");
  CHECK(index["runs"][0]["positional"]["kind"] == "score terms");
  // ALiBi's bias is -m_h (i - j): 0 at distance 0, falling linearly.
  const auto& bias = index["runs"][0]["positional"]["layers"][0][0];
  CHECK(bias[0].get<double>() == 0.0);
  CHECK(bias[2].get<double>() == Approx(2 * bias[1].get<double>()).epsilon(1e-3));
  CHECK(bias[1].get<double>() < 0);

  for (int factor : {1, 8}) {
    INFO("factor " << factor);
    const int L = factor * kExploreSeqLen;
    const std::string key = "r0_t0_f" + std::to_string(factor);
    REQUIRE(index["settings"][key].contains("file"));
    const nlohmann::json data = script_data(out / "data" / (key + ".js"));
    const int b = data["block"], rows = data["rows"], cols = data["cols"];
    CHECK(b == 1);  // at most 128 rows: no pooling up to 128 tokens
    CHECK(rows == L);
    CHECK(data["loss"].size() == std::size_t(L));

    // `poslab attention` on the same L bytes: the same forward pass.
    const fs::path dump = dir.path / ("attention" + std::to_string(factor));
    const Outcome a =
        run_poslab("attention --run " + shell_quote(run.string()) + " --input " +
                   shell_quote(text.substr(0, L)) + " --out " + shell_quote(dump.string()));
    INFO(a.out << a.err);
    REQUIRE(a.exit_code == 0);
    for (int n = 0; n < kExploreLayers; ++n) {
      const xt::xarray<float> p =
          xt::load_npy<float>((dump / ("layer" + std::to_string(n) + ".npy")).string());
      for (int h = 0; h < kExploreHeads; ++h) {
        const std::vector<unsigned char> bytes = unbase64(data["maps"][n][h].get<std::string>());
        REQUIRE(bytes.size() == std::size_t(rows) * cols);
        int differ = 0, white = 0;
        for (int i = 0; i < rows; ++i) {
          double row_sum = 0;
          for (int j = 0; j < cols; ++j) {
            // round(255 sqrt(p)), at least 1 where p > 0: only a masked key (j > i) is 0, white.
            const double weight = p(h, i, j);
            const int expected =
                weight > 0 ? std::max(1, int(std::lround(255.0 * std::sqrt(weight)))) : 0;
            differ += bytes[std::size_t(i) * cols + j] != expected;
            white += (bytes[std::size_t(i) * cols + j] == 0) != (j > i);
            row_sum += std::pow(bytes[std::size_t(i) * cols + j] / 255.0, 2);
          }
          CHECK(row_sum == Approx(1.0).margin(0.05));  // quantized: each row still sums to ~1
        }
        CHECK(differ == 0);
        CHECK(white == 0);  // issue 33: tiny weights were stored as 0 and drawn white
      }
    }
  }
}

TEST_CASE("poslab explore pools long inputs into blocks of at most 128 rows", "[cli][explore]") {
  ScratchDirectory dir;
  const fs::path run = train_tiny_run(dir.path);
  const std::string text(300, 'a');
  std::ofstream(dir.path / "text.txt") << text;
  const fs::path out = dir.path / "explorer";
  const Outcome r = run_poslab("explore " + shell_quote(run.string()) + " --texts 0 --text " +
                               shell_quote((dir.path / "text.txt").string()) + " --factors 32,64" +
                               " --out " + shell_quote(out.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json index = script_data(out / "data" / "index.js");
  // 32 x 8 = 256 tokens: blocks of 2, 128 rows; 64 x 8 = 512 > 299: too long for the text.
  CHECK_THAT(index["settings"]["r0_t0_f64"]["missing"].get<std::string>(), Contains("shorter"));
  const nlohmann::json data = script_data(out / "data" / "r0_t0_f32.js");
  CHECK(data["block"] == 2);
  CHECK(data["rows"] == 128);
  CHECK(data["cols"] == 128);
  for (int h = 0; h < kExploreHeads; ++h) {
    const auto bytes = unbase64(data["maps"][0][h].get<std::string>());
    for (int i = 0; i < 128; ++i) {
      double row_sum = 0;
      for (int j = 0; j < 128; ++j) row_sum += std::pow(bytes[std::size_t(i) * 128 + j] / 255.0, 2);
      CHECK(row_sum == Approx(1.0).margin(0.05));
    }
  }
}

TEST_CASE("poslab explore and report refuse bad input and write nothing", "[cli][explore]") {
  ScratchDirectory dir;
  SECTION("explore: a directory that is not a run") {
    const Outcome r = run_poslab("explore " + shell_quote(dir.path.string()) + " --out " +
                                 shell_quote((dir.path / "out").string()));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("poslab: error:"));
    CHECK_FALSE(fs::exists(dir.path / "out"));
  }
  SECTION("explore: --texts 0 without --text") {
    const fs::path run = train_tiny_run(dir.path);
    const Outcome r = run_poslab("explore " + shell_quote(run.string()) + " --texts 0 --out " +
                                 shell_quote((dir.path / "out").string()));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("--text"));
    CHECK_FALSE(fs::exists(dir.path / "out"));
  }
  SECTION("report: no summary.csv") {
    const Outcome r = run_poslab("report " + shell_quote(dir.path.string()));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("summary.csv not found"));
    CHECK_FALSE(fs::exists(dir.path / "report"));
  }
}

// Issue 51: a Self-Extend run's positional part was drawn as a flat 0 (its score terms read with
// every key set to 0), and a run of scaling none beside it was said to differ in
// "encoding.group_size = 8, encoding.neighbor_window = 1024", options it does not read.
TEST_CASE("poslab explore draws a two-map method's positional part and lists only settings that "
          "matter for each run's scaling", "[cli][explore]") {
  ScratchDirectory plain_dir, extended_dir;
  const fs::path plain = poslab::testing::train_tiny_corpus_run(
      plain_dir.path, "n_heads = 2\n", "[encoding]\ntype = \"rope\"\n", 200);
  // Self-Extend with W = 4, G = 2 at L = 8: keys at distance >= 4 are read at grouped positions.
  constexpr int W = 4, G = 2;
  const fs::path extended = poslab::testing::train_tiny_corpus_run(
      extended_dir.path, "n_heads = 2\n",
      "[encoding]\ntype = \"rope\"\nscaling = \"self_extend\"\noriginal_len = 8\n"
      "neighbor_window = " + std::to_string(W) + "\ngroup_size = " + std::to_string(G) + "\n",
      200);
  std::string text;
  while (text.size() < 2 * kExploreSeqLen + 1) text += "Ask not what your country can do. ";
  std::ofstream(plain_dir.path / "text.txt") << text;
  const fs::path out = plain_dir.path / "explorer";
  const Outcome r = run_poslab("explore " + shell_quote(plain.string()) + " " +
                               shell_quote(extended.string()) + " --texts 0 --text " +
                               shell_quote((plain_dir.path / "text.txt").string()) +
                               " --factors 1,2 --out " + shell_quote(out.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json index = script_data(out / "data" / "index.js");
  REQUIRE(index["runs"].size() == 2);

  // The settings in which they differ: the Self-Extend run's options for it alone.
  const std::string plain_differs = index["runs"][0]["differs"].dump();
  const std::string extended_differs = index["runs"][1]["differs"].dump();
  INFO(plain_differs << "\n" << extended_differs);
  CHECK_THAT(plain_differs, Contains("encoding.scaling = \\\"none\\\""));
  CHECK(plain_differs.find("group_size") == std::string::npos);
  CHECK(plain_differs.find("neighbor_window") == std::string::npos);
  CHECK(plain_differs.find("original_len") == std::string::npos);
  CHECK_THAT(extended_differs, Contains("encoding.group_size = 2") &&
                                   Contains("encoding.neighbor_window = 4"));

  // The positional part: plain RoPE's q.k response below the window; beyond it, RoPE's
  // response at the distance Self-Extend reads, P_q(D) - P_k(D - d) =
  // floor(D / G) + W - W / G - floor((D - d) / G).
  const nlohmann::json& a = index["runs"][0]["positional"];
  const nlohmann::json& b = index["runs"][1]["positional"];
  REQUIRE(a["kind"] == "q.k response");
  REQUIRE(b["kind"] == "q.k response");
  const auto& rope = a["layers"][0][0];
  const auto& self_extend = b["layers"][0][0];
  const int D = int(self_extend.size()) - 1;
  REQUIRE(D == 2 * kExploreSeqLen - 1);
  int differ_from_rope = 0;
  for (int d = 0; d <= D; ++d) {
    INFO("distance " << d);
    const int read = d < W ? d : D / G + W - W / G - (D - d) / G;
    CHECK(self_extend[d].get<double>() == Approx(rope[read].get<double>()).margin(2e-3));
    differ_from_rope += std::abs(self_extend[d].get<double>() - rope[d].get<double>()) > 1e-2;
  }
  CHECK(differ_from_rope > 0);  // not RoPE's curve, and not flat
}

// eval/attention_maps.hpp against eval/attention_weights.hpp, on a fresh Transformer-XL model
// with a memory of 8 rows and an input of 161 tokens: blocks of b = ceil(161 / 128) = 2, the last
// row of blocks holding one query, so the average over a block's queries is tested where the
// block is not full.
TEST_CASE("the explorer's maps are the attention weights of the same text, pooled", "[explore]") {
  using namespace poslab;
  ModelConfig mc;
  mc.vocab_size = 256;
  mc.d_model = 16;
  mc.n_layers = 2;
  mc.n_heads = 2;
  mc.d_inner = 32;
  MemoryConfig memory;
  memory.mem_len = 8;
  const EncodingConfig encoding{"transformer_xl",
                                Options::defaults(find_encoding("transformer_xl")->options)};
  TransformerLM<float> model(mc, encoding, memory);
  model.init(3);
  const int M = 8, L = 161;
  Rng rng(7);
  std::vector<std::int32_t> tokens(M + L + 1);
  for (auto& t : tokens) t = std::int32_t(rng.below(256));

  const PooledAttention pooled = pooled_attention(model, tokens.data(), M, L);
  const AttentionWeights weights =
      attention_weights(model, std::vector<std::int32_t>(tokens.begin(), tokens.begin() + M),
                        std::vector<std::int32_t>(tokens.begin() + M, tokens.begin() + M + L));
  REQUIRE(pooled.memory_rows == M);
  REQUIRE(weights.memory_rows == M);
  const int b = 2, K = M + L;
  CHECK(pooled.block == b);
  CHECK(pooled.rows == 81);
  CHECK(pooled.cols == 85);
  CHECK(pooled.token_loss.size() == std::size_t(L));
  REQUIRE(pooled.maps.size() == 2);
  int differ = 0, blocks = 0;
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 2; ++h) {
      const float* P = weights.layers[n].data() + std::size_t(h) * L * K;  // [L, K]
      const std::vector<std::uint8_t>& bytes = pooled.maps[n][h];
      REQUIRE(bytes.size() == std::size_t(pooled.rows) * pooled.cols);
      for (int qb = 0; qb < pooled.rows; ++qb)
        for (int kb = 0; kb < pooled.cols; ++kb) {
          // A[qb, kb] = (1 / |qb|) sum_{i in qb} sum_{j in kb} P_ij
          const int i0 = qb * b, i1 = std::min(L, i0 + b), j0 = kb * b, j1 = std::min(K, j0 + b);
          double mass = 0;
          for (int i = i0; i < i1; ++i)
            for (int j = j0; j < j1; ++j) mass += P[std::size_t(i) * K + j];
          ++blocks;
          differ += bytes[std::size_t(qb) * pooled.cols + kb] != map_byte(mass / (i1 - i0));
        }
    }
  CHECK(blocks == 4 * 81 * 85);
  CHECK(differ == 0);
}
