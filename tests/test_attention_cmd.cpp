// `poslab attention` and `poslab plot`, run as a user would: train a tiny model on a tiny corpus,
// dump its attention weights with and without memory, and check what the arrays promise: shape
// [H, L, K] with K = M + L, every row a probability distribution over the keys the query may see
// (j <= i + M) and exactly 0 on the others.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "process_helpers.hpp"

using Catch::Contains;
using namespace poslab::testing;
using poslab::shell_quote;
namespace fs = std::filesystem;

namespace {

constexpr int kTinyHeads = 2, kTinyLayers = 2;

// Trains a tiny model for 2 steps on a tiny corpus inside `dir`; returns the run directory.
fs::path train_tiny_run(const fs::path& dir, const std::string& encoding, int mem_len) {
  const fs::path run =
      train_tiny_corpus_run(dir,
                            "n_layers = " + std::to_string(kTinyLayers) +
                                "\nn_heads = " + std::to_string(kTinyHeads) + "\n",
                            "[encoding]\ntype = \"" + encoding +
                                "\"\n[memory]\nmem_len = " + std::to_string(mem_len) + "\n",
                            60);
  REQUIRE(fs::exists(run / "checkpoint" / "manifest.json"));
  return run;
}

// Checks layer{n}.npy for every layer: shape [H, L, M + L], rows sum to 1 over j <= i + M, 0
// elsewhere; and tokens.json. Returns tokens.json.
nlohmann::json check_dump(const fs::path& dir, int L, int M) {
  for (int n = 0; n < kTinyLayers; ++n) {
    INFO("layer " << n);
    const fs::path file = dir / ("layer" + std::to_string(n) + ".npy");
    REQUIRE(fs::exists(file));
    const xt::xarray<float> p = xt::load_npy<float>(file.string());
    REQUIRE(p.dimension() == 3);
    CHECK(p.shape(0) == std::size_t(kTinyHeads));
    CHECK(p.shape(1) == std::size_t(L));
    REQUIRE(p.shape(2) == std::size_t(M + L));
    for (int h = 0; h < kTinyHeads; ++h)
      for (int i = 0; i < L; ++i) {
        double visible_sum = 0;
        bool masked_zero = true, finite = true;
        for (int j = 0; j < M + L; ++j) {
          const float x = p(h, i, j);
          finite = finite && std::isfinite(x) && x >= 0;
          if (j <= i + M)
            visible_sum += x;
          else
            masked_zero = masked_zero && x == 0.0f;
        }
        INFO("head " << h << ", query " << i);
        CHECK(finite);
        CHECK(visible_sum == Approx(1.0).margin(1e-5));
        CHECK(masked_zero);
      }
  }
  const nlohmann::json tokens = nlohmann::json::parse(read_file(dir / "tokens.json"));
  CHECK(tokens["mem_len"] == M);
  CHECK(tokens["keys"].size() == std::size_t(M + L));
  CHECK(tokens["key_positions"].size() == std::size_t(M + L));
  CHECK(tokens["query_positions"].size() == std::size_t(L));
  return tokens;
}

}  // namespace

TEST_CASE("poslab attention dumps attention weights with and without memory", "[cli]") {
  ScratchDirectory dir;
  const fs::path run = train_tiny_run(dir.path, "transformer_xl", 4);
  const std::string input = "fox jumps";  // L = 9: longer than the trained segment is fine
  const int L = int(input.size());

  SECTION("no memory text: K = L, written to RUN/attention by default") {
    const Outcome r = run_poslab("attention --run " + shell_quote(run.string()) + " --input " +
                                 shell_quote(input));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json t = check_dump(run / "attention", L, 0);
    CHECK(t["input"] == input);
    CHECK(t["memory"] == "");
    CHECK(t["keys"][0] == "f");
    CHECK(t["keys"][3] == " ");
  }

  SECTION("a memory text longer than mem_len fills the memory: K = mem_len + L") {
    const fs::path out = dir.path / "with-memory";
    const Outcome r = run_poslab("attention --run " + shell_quote(run.string()) + " --input " +
                                 shell_quote(input) + " --mem-text 'the lazy\ndog' --out " +
                                 shell_quote(out.string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json t = check_dump(out, L, 4);
    CHECK(t["memory"] == "the lazy\ndog");
    // The memory keys are the last 4 bytes of the memory text, then the input.
    CHECK(t["keys"][0] == "\\n");
    CHECK(t["keys"][1] == "d");
    CHECK(t["keys"][4] == "f");
  }

  SECTION("a memory text shorter than mem_len: every byte of it is a key") {
    const fs::path out = dir.path / "short-memory";
    const Outcome r =
        run_poslab("attention --run " + shell_quote(run.string()) + " --input " +
                   shell_quote(input) + " --mem-text ab --out " + shell_quote(out.string()));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    check_dump(out, L, 2);
  }

  SECTION("a run that does not exist is an error") {
    const Outcome r =
        run_poslab("attention --run " + shell_quote((dir.path / "nope").string()) + " --input x");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("poslab: error:"));
  }
}

TEST_CASE("poslab attention on a run without memory ignores --mem-text and says so", "[cli]") {
  ScratchDirectory dir;
  const fs::path run = train_tiny_run(dir.path, "shaw", 0);
  const fs::path out = dir.path / "attention";
  const Outcome r =
      run_poslab("attention --run " + shell_quote(run.string()) +
                 " --input 'lazy dog' --mem-text 'the quick' --out " + shell_quote(out.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("no memory") && Contains("ignored"));
  const nlohmann::json t = check_dump(out, 8, 0);
  CHECK(t["memory"] == "");
}

TEST_CASE("poslab plot says what it writes and propagates the script's exit code", "[cli]") {
  const Outcome help = run_poslab("plot --help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Contains("Usage: poslab plot") && Contains("STUDY_DIR/figures/") &&
                           Contains("writes") && Contains("Example:"));
  ScratchDirectory dir;  // no summary.csv in it: the script fails with exit code 1
  const Outcome r = run_poslab("plot " + shell_quote(dir.path.string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("summary.csv not found"));
  CHECK(run_poslab("plot").exit_code == 2);  // a study directory is required
}
