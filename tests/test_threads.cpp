// How many threads a training uses, and why that count is no part of a run's identity.
//
// train.threads = 0 follows the allocation: SLURM_CPUS_PER_TASK (a Slurm task's CPUs), then
// OMP_NUM_THREADS, then every processor (set_threads in train/train.hpp); the choice is printed
// and recorded in eval.json's provenance. `poslab run` gives each run --threads, or else
// max(1, cores / jobs).
//
// What the thread count changes: nothing. No sum is split over threads. parallel_multiply
// (core/blas.hpp) cuts the ROWS of C into blocks chosen from the product's shape alone, each
// block one single-threaded BLAS call (OpenBLAS's own threads are off), and the threads only
// share out the blocks; the other loops split elements or columns, never a sum
// (core/parallel_loops.hpp, core/ordered_sums.hpp, tests/test_ordered_sums.cpp). So 1 and 5
// threads make the same BLAS calls and get the same bits, on any BLAS kernel (below; CI runs
// these tests under two kernels, scripts/test.sh). That is why experiment_difference
// (config/load.cpp) leaves train.threads out of a run's identity: a run made with other threads
// is done, not stale. (Another BLAS kernel, or another CPU, does change the last bits: that is a
// run's provenance, provenance.blas and provenance.cpu, not its identity.)
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <omp.h>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "core/blas.hpp"
#include "core/matrix.hpp"
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

TEST_CASE("the BLAS kernel that runs is the one OPENBLAS_CORETYPE names, when it names one",
          "[threads]") {
  // CTest runs the [threads] cases twice more, under OpenBLAS's own kernel and under Haswell's
  // (threads_kernel_own, threads_kernel_haswell in CMakeLists.txt): this says that the variable
  // reached OpenBLAS, so the second run really tests another kernel.
  const std::string config = poslab::blas_backend();
  INFO("openblas_get_config(): " << config);
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced && *forced)
    CHECK_THAT(config, Catch::Matchers::Contains(forced, Catch::CaseSensitive::No));
  else
    SUCCEED("OpenBLAS chose its own kernel");
}

TEST_CASE("parallel_multiply: the same bits at every thread count, on every shape",
          "[threads]") {
  // The promise (core/blas.hpp): the row blocks are a function of the shape, so 1 to 5 threads
  // make the same BLAS calls and give the same bits, whichever kernel OpenBLAS runs (CI runs
  // this under OPENBLAS_CORETYPE=Haswell and under the machine's own choice). With blocks cut
  // by the thread count (the code before issue 44), 56 of these 80 checks failed under Haswell.
  const int threads_before = omp_get_max_threads();
  const bool ta = GENERATE(false, true), tb = GENERATE(false, true);
  // {m, n, k}: the reference model's products (rows = batch 16 x segment 64, width 128, feed-
  // forward 512: 2, 8 and 8 blocks), then rows that split unevenly (997 rows: 3 blocks).
  const int shape = GENERATE(0, 1, 2, 3);
  const int shapes[4][3] = {{1024, 128, 128}, {1024, 512, 128}, {1024, 128, 512}, {997, 301, 97}};
  const int m = shapes[shape][0], n = shapes[shape][1], k = shapes[shape][2];
  std::vector<float> a(std::size_t(m) * k), b(std::size_t(k) * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * float(i)) * 1e-2f + 1.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * float(i)) * float(i % 7);
  const auto A = ta ? poslab::matrix(a.data(), k, m).t() : poslab::matrix(a.data(), m, k);
  const auto B = tb ? poslab::matrix(b.data(), n, k).t() : poslab::matrix(b.data(), k, n);
  auto product_with = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> c(std::size_t(m) * n, -1.0f);
    poslab::parallel_multiply(poslab::matrix(c.data(), m, n), A, B);
    return c;
  };
  const std::vector<float> one = product_with(1);
  // And it is the product: within rounding of one BLAS call over all rows. Two float sums of
  // k products differ by at most 2 k u |A||B| (u = 2^-24, the standard bound), and
  // |A||B| <= k max|a| max|b| per element; a misplaced block would be off by the values themselves.
  std::vector<float> serial(one.size());
  poslab::multiply(poslab::matrix(serial.data(), m, n), A, B);
  float worst = 0;
  for (std::size_t i = 0; i < serial.size(); ++i) worst = std::max(worst, std::abs(one[i] - serial[i]));
  float max_a = 0, max_b = 0;
  for (float x : a) max_a = std::max(max_a, std::abs(x));
  for (float x : b) max_b = std::max(max_b, std::abs(x));
  const float bound = 2.0f * float(k) * std::ldexp(1.0f, -24) * float(k) * max_a * max_b;
  INFO(m << " x " << n << " x " << k << ", A" << (ta ? "^T" : "") << " B" << (tb ? "^T" : "")
         << ": blocks " << poslab::product_blocks(m, n, k).count);
  CHECK(poslab::product_blocks(m, n, k).count > 1);  // the test means something only if split
  CHECK(worst <= bound);
  for (int threads = 2; threads <= 5; ++threads) {
    const std::vector<float> split = product_with(threads);
    INFO(threads << " threads");
    CHECK(std::memcmp(split.data(), one.data(), one.size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("parallel_multiply's blocks: a function of the shape, covering every row once",
          "[threads]") {
  for (const auto& [m, n, k] : std::vector<std::array<int, 3>>{
           {1024, 128, 128}, {997, 301, 97}, {64, 256, 1024}, {31, 512, 512}, {8, 8, 8},
           {5000, 64, 64}, {4096, 512, 512}}) {
    const poslab::ProductBlocks blocks = poslab::product_blocks(m, n, k);
    INFO(m << " x " << n << " x " << k);
    CHECK(blocks.begin(0) == 0);
    CHECK(blocks.begin(blocks.count) == m);
    CHECK(blocks.count <= poslab::ProductBlocks::kMaxBlocks);
    for (int b = 0; b < blocks.count; ++b) {
      CHECK(blocks.begin(b + 1) > blocks.begin(b));
      CHECK(blocks.begin(b) % poslab::ProductBlocks::kAlign == 0);
    }
  }
  // Small products stay one call; a block per 2^23 multiply-adds, at most 8.
  CHECK(poslab::product_blocks(8, 8, 8).count == 1);
  CHECK(poslab::product_blocks(1024, 64, 64).count == 1);
  CHECK(poslab::product_blocks(1024, 128, 128).count == 2);
  CHECK(poslab::product_blocks(4096, 512, 512).count == 8);
}

TEST_CASE("the thread count does not change a training's result: the same bits", "[threads]") {
  // The reference size of `poslab bench` (experiments/quickstart.toml: width 128, segments of
  // 64, batch 16, memory 64), 2 layers, 3 steps: big enough that the products split over the
  // threads and the element loops run in parallel (more than 2^18 elements). Capped at the
  // processors there are: 1 and 2 threads on the 2-core machine of CI.
  ScratchDirectory scratch;
  ScopedEnvironment slurm("SLURM_CPUS_PER_TASK", nullptr);
  const std::string config = std::string(POSLAB_SOURCE_DIR) + "/experiments/quickstart.toml";
  const std::string encoding = GENERATE(std::string("transformer_xl"), std::string("t5_bias"));
  auto train_with = [&](const std::string& name, int threads) {
    const Outcome r = run_poslab("train --config " + config + " --out " + name +
                                     " --set model.n_layers=2 --set train.steps=3"
                                     " --set eval.batches=2 --set encoding.type=\"" + encoding +
                                     "\" --set train.threads=" + std::to_string(threads),
                                 scratch.path);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(read_file(scratch.path / name / "eval.json"));
  };
  const nlohmann::json one = train_with("one", 1), two = train_with("two", 2);
  INFO(encoding << ": threads " << one["provenance"]["threads"] << " and "
                << two["provenance"]["threads"]);
  CHECK(one["loss"].get<double>() == two["loss"].get<double>());
  CHECK(one["train_loss"].get<double>() == two["train_loss"].get<double>());
  std::size_t files = 0;
  for (const fs::directory_entry& f : fs::directory_iterator(scratch.path / "one" / "checkpoint")) {
    INFO(f.path().filename());
    CHECK(read_file(f.path()) == read_file(scratch.path / "two" / "checkpoint" / f.path().filename()));
    ++files;
  }
  CHECK(files > 10);
}

TEST_CASE("poslab run --threads sets each run's threads; finished runs stay done at another count",
          "[threads]") {
  ScratchDirectory scratch;
  ScopedEnvironment slurm("SLURM_CPUS_PER_TASK", nullptr);
  TwoRunStudy two(scratch.path);
  const Outcome first = run_poslab("run two.toml --jobs 1 --threads 1 --out results", scratch.path);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Contains("1 at a time, 1 thread each (--threads)"));
  for (const auto& run : two.runs) {
    const nlohmann::json e =
        nlohmann::json::parse(read_file(two.layout.run_dir(run) / "eval.json"));
    CHECK(e["provenance"]["threads"] == 1);
    CHECK(e["provenance"]["threads_from"] == "train.threads");
  }
  // Another thread count, by --threads, by --set, or by the default: the runs are done.
  for (const char* other : {"--threads 2", "--set train.threads=2", "--jobs 2", ""}) {
    INFO(other);
    const Outcome again =
        run_poslab(std::string("run two.toml --out results --dry-run ") + other, scratch.path);
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.out, Contains("2 done, 0 pending"));
  }
  // The exported commands carry --threads.
  fs::remove_all(two.layout.run_dir(two.runs[1]));
  const Outcome exported =
      run_poslab("run two.toml --out results --export commands --threads 1", scratch.path);
  CHECK_THAT(exported.out, Contains("--set train.threads=1 --resume"));
}
