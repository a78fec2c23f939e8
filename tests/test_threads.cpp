// How many threads a training uses, and how much its result may depend on it.
//
// train.threads = 0 follows the allocation: SLURM_CPUS_PER_TASK (a Slurm task's CPUs), then
// OMP_NUM_THREADS, then every processor (set_threads in train/train.hpp); the choice is printed
// and recorded in eval.json's provenance. The result depends on the thread count only through
// floating-point reassociation: parallel_multiply splits sums differently, so float32 sums round
// differently. The tolerance (docs/06, "Threads and reproducibility"): one step changes the
// loss in the 6th or 7th significant digit; the difference then grows with training, as any
// rounding difference does (300 steps of a 2-layer model: evaluation loss 8e-6 relative).
// A fixed thread count gives bit-identical results.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "process_helpers.hpp"
#include "study_helpers.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for this test (and the poslab it starts), then restores it.
struct ScopedEnvironment {
  std::string name;
  std::string old;
  bool had;
  ScopedEnvironment(const std::string& n, const char* value) : name(n) {
    const char* current = std::getenv(name.c_str());
    had = current != nullptr;
    if (had) old = current;
    if (value) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  ~ScopedEnvironment() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

// Trains the tiny model of study_helpers.hpp into dir/NAME; returns its eval.json.
nlohmann::json train(const fs::path& dir, const std::string& name, const std::string& extra) {
  const fs::path config = dir / "tiny.toml";
  if (!fs::exists(config)) {
    std::string base = tiny_base(write_corpus(dir), 4);
    for (const char* table : {"[base.model]", "[base.data]", "[base.train]", "[base.eval]"}) {
      const std::string t(table);
      base.replace(base.find(t), t.size(), "[" + t.substr(6));
    }
    write_file(config, base);
  }
  const Outcome r =
      run_poslab("train --config tiny.toml --out " + name + " " + extra, dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(read_file(dir / name / "eval.json"));
}

}  // namespace

TEST_CASE("train.threads = 0 follows SLURM_CPUS_PER_TASK, then OMP_NUM_THREADS", "[threads]") {
  ScratchDirectory scratch;
  ScopedEnvironment omp("OMP_NUM_THREADS", "1");
  {
    ScopedEnvironment slurm("SLURM_CPUS_PER_TASK", "1");
    const nlohmann::json e = train(scratch.path, "slurm", "--set train.threads=0");
    CHECK(e["provenance"]["threads"] == 1);
    CHECK(e["provenance"]["threads_from"] == "SLURM_CPUS_PER_TASK");
  }
  {
    ScopedEnvironment slurm("SLURM_CPUS_PER_TASK", nullptr);
    const nlohmann::json e = train(scratch.path, "omp", "--set train.threads=0");
    CHECK(e["provenance"]["threads_from"] == "OMP_NUM_THREADS");
  }
  const nlohmann::json e = train(scratch.path, "fixed", "--set train.threads=1");
  CHECK(e["provenance"]["threads_from"] == "train.threads");
  // The processor is recorded too: the same build rounds differently on another kind of CPU.
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  const std::string cpu = e["provenance"]["cpu"].get<std::string>();
  if (text.find("model name") != std::string::npos) {
    CHECK_FALSE(cpu.empty());
    CHECK_THAT(text, Catch::Matchers::Contains("model name\t: " + cpu));
  } else {
    CHECK(cpu.empty());
  }
}

TEST_CASE("the thread count changes a result only by rounding", "[threads]") {
  ScratchDirectory scratch;
  ScopedEnvironment slurm("SLURM_CPUS_PER_TASK", nullptr);
  const nlohmann::json one = train(scratch.path, "one", "--set train.threads=1");
  const nlohmann::json again = train(scratch.path, "again", "--set train.threads=1");
  const nlohmann::json two = train(scratch.path, "two", "--set train.threads=2");
  // The same thread count: the same bits.
  CHECK(one["loss"].get<double>() == again["loss"].get<double>());
  CHECK(read_file(scratch.path / "one" / "checkpoint" / "embedding.npy") ==
        read_file(scratch.path / "again" / "checkpoint" / "embedding.npy"));
  // Another count (capped at the processors there are): rounding only, 4 steps of a tiny model.
  const double a = one["loss"].get<double>(), b = two["loss"].get<double>();
  CHECK(std::abs(a - b) <= 1e-5 * std::abs(a));
}
