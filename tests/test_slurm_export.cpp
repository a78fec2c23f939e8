// `poslab run --export slurm`, --summary-only, --only, --set, and `poslab train --resume`, the
// command every exported task runs (study/slurm_export.hpp, study/runner.hpp). The job scripts
// are run here as Slurm would run one task (SLURM_ARRAY_TASK_ID set, plain bash);
// scripts/test-slurm.sh submits them to a real one-node Slurm cluster.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "process_helpers.hpp"
#include "study/slurm_export.hpp"
#include "study_helpers.hpp"
#include "train/registered_choices.hpp"

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// The submission directories under results/slurm/, oldest first.
std::vector<fs::path> submissions(const poslab::StudyLayout& layout) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(layout.root / "slurm"))
    if (entry.is_directory()) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Runs task `task` of a job-array script as Slurm would; returns the exit code.
int run_task(const fs::path& script, int task) {
  const std::string command = "SLURM_ARRAY_TASK_ID=" + std::to_string(task) + " bash " +
                              poslab::shell_quote(script.string()) + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Holds the lock of a run directory as a training `poslab train` would (DirectoryLock).
struct HeldRunLock {
  int fd;
  explicit HeldRunLock(const fs::path& dir) {
    fs::create_directories(dir);
    fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // not inherited by a task
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  }
  ~HeldRunLock() { ::close(fd); }
};

}  // namespace

TEST_CASE("slurm export: a pinned submission with its commands, configs and job array",
          "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  two.fake_finished(0, {{"loss", 1.0}});  // done: not exported
  poslab::RunStudyOptions options = two.options();
  options.export_format = "slurm";
  options.slurm.max_array_size = 1000;

  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  const std::vector<fs::path> first = submissions(two.layout);
  REQUIRE(first.size() == 1);
  const fs::path dir = first[0];
  CHECK_THAT(out.str(), Contains("wrote " + dir.string()) && Contains("submit.sh"));
  CHECK(fs::is_directory(two.layout.root / "runs"));  // the task's log goes there
  CHECK(fs::is_directory(dir / "logs"));

  const std::vector<std::string> commands = lines_of(read_file(dir / "commands.txt"));
  REQUIRE(commands.size() == 1);
  CHECK_THAT(commands[0], Contains((dir / "configs" / "train.seed-2.toml").string()) &&
                              Contains(" --resume --wait-for-trainer 172800 >> ") && Contains("train.seed-2.log"));
  CHECK(poslab::load_config((dir / "configs" / "train.seed-2.toml").string(),
                            poslab::registered_choices())
            .train.seed == 2);

  const std::string script = read_file(dir / "array-0.sh");
  CHECK_THAT(script, Contains("#SBATCH --array=0-0\n") &&
                         Contains("#SBATCH --job-name=poslab-two\n") &&
                         Contains("#SBATCH --output=" + (dir / "logs").string() + "/%A_%a.out") &&
                         Contains("SLURM_ARRAY_TASK_ID + 1"));
  CHECK_THAT(read_file(dir / "submit.sh"), Contains("sbatch " + (dir / "array-0.sh").string()));

  SECTION("a task trains its run; submitted again, it does nothing") {
    REQUIRE(run_task(dir / "array-0.sh", 0) == 0);
    const fs::path eval = two.layout.run_dir(two.runs[1]) / "eval.json";
    REQUIRE(fs::exists(eval));
    const auto finished_at = fs::last_write_time(eval);
    CHECK(run_task(dir / "array-0.sh", 0) == 0);
    CHECK(fs::last_write_time(eval) == finished_at);
    CHECK_THAT(read_file(two.layout.log_file(two.runs[1])), Contains("nothing to do"));
  }
  SECTION("a task whose line does not exist fails instead of succeeding silently") {
    CHECK(run_task(dir / "array-0.sh", 5) == 1);
  }
  SECTION("a task never touches a run another process is training; it waits, then fails with it") {
    // The other trainer holds the lock for a second and ends without finishing the run: the
    // task waits for it (--wait-for-trainer), then exits 1, so a Slurm dependency sees that
    // the run is not done (issue 32); the run's files are the other trainer's, untouched.
    const fs::path run_dir = two.layout.run_dir(two.runs[1]);
    auto held = std::make_unique<HeldRunLock>(run_dir);
    poslab::testing::write_file(run_dir / "metrics.csv", "step,loss\n1,5.0\n");
    std::thread other_trainer_ends([&held] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      held.reset();
    });
    const int code = run_task(dir / "array-0.sh", 0);
    other_trainer_ends.join();
    CHECK(code == 1);
    CHECK(read_file(run_dir / "metrics.csv") == "step,loss\n1,5.0\n");
    CHECK_THAT(read_file(two.layout.log_file(two.runs[1])),
               Contains("waiting for it to end") && Contains("ended after") &&
                   Contains("poslab: error:"));
  }
  SECTION("a later export is a new submission; the queued one is unchanged") {
    const std::string before = read_file(dir / "commands.txt");
    poslab::testing::write_file(two.layout.root / "slurm" / "header.sh",
                                "#SBATCH --qos=mine\nmodule load nothing\n");
    options.overrides = {"train.steps=4"};  // what a queued task trains must not change
    options.only = {"*seed=2"};             // (seed 1 is finished with 3 steps: stale now)
    std::ostringstream again;
    REQUIRE(poslab::run_study(options, again) == 0);
    const std::vector<fs::path> now = submissions(two.layout);
    REQUIRE(now.size() == 2);
    CHECK(read_file(dir / "commands.txt") == before);
    CHECK(poslab::load_config((dir / "configs" / "train.seed-2.toml").string(),
                              poslab::registered_choices())
              .train.steps == 3);
    const fs::path second = now[0] == dir ? now[1] : now[0];
    CHECK(poslab::load_config((second / "configs" / "train.seed-2.toml").string(),
                              poslab::registered_choices())
              .train.steps == 4);
    // The user's header is kept, and copied into the new scripts.
    CHECK(read_file(two.layout.root / "slurm" / "header.sh") ==
          "#SBATCH --qos=mine\nmodule load nothing\n");
    CHECK_THAT(read_file(second / "array-0.sh"), Contains("#SBATCH --qos=mine\n"));
  }
}

TEST_CASE("slurm export: more runs than MaxArraySize become several arrays", "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  poslab::RunStudyOptions options = two.options();
  options.export_format = "slurm";
  options.slurm.max_array_size = 1;
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  const fs::path dir = submissions(two.layout).at(0);
  CHECK_THAT(out.str(), Contains("2 runs in 2 job arrays of at most 1 tasks"));
  CHECK_THAT(read_file(dir / "array-0.sh"),
             Contains("#SBATCH --array=0-0\n") && Contains("SLURM_ARRAY_TASK_ID + 1)"));
  CHECK_THAT(read_file(dir / "array-1.sh"),
             Contains("#SBATCH --array=0-0\n") && Contains("SLURM_ARRAY_TASK_ID + 2)"));
  CHECK(lines_of(read_file(dir / "submit.sh")).size() == 5);  // #!, comment, set, 2 x sbatch
  // Task 0 of the second array runs the second run.
  REQUIRE(run_task(dir / "array-1.sh", 0) == 0);
  CHECK(fs::exists(two.layout.run_dir(two.runs[1]) / "eval.json"));
  CHECK_FALSE(fs::exists(two.layout.run_dir(two.runs[0]) / "eval.json"));
}

TEST_CASE("slurm export: [slurm] options, overridden by the command line", "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path,
                  "[slurm]\npartition = \"cpu\"\ntime = \"1:00:00\"\ncpus_per_task = 2\n"
                  "array_throttle = 4\nmax_array_size = 50\nextra = [\"--qos=short\"]\n");
  CHECK(two.study.slurm.partition == "cpu");
  poslab::RunStudyOptions options = two.options();
  options.export_format = "slurm";
  options.slurm.time = "0:30:00";
  options.slurm.account = "lab";
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  const std::string script = read_file(submissions(two.layout).at(0) / "array-0.sh");
  CHECK_THAT(script, Contains("#SBATCH --array=0-1%4\n") && Contains("#SBATCH --partition=cpu\n") &&
                         Contains("#SBATCH --time=0:30:00\n") && Contains("#SBATCH --account=lab\n") &&
                         Contains("#SBATCH --cpus-per-task=2\n") && Contains("#SBATCH --qos=short\n"));
  CHECK_THAT(script, !Contains("1:00:00"));
}

TEST_CASE("slurm export: bad [slurm] tables and paths are refused before anything is written",
          "[slurm]") {
  auto error_of = [](const std::string& slurm_table) {
    try {
      poslab::parse_study("[study]\nname = \"x\"\n[slurm]\n" + slurm_table, "x.toml");
    } catch (const poslab::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("partiton = \"cpu\"\n"),
             Contains("x.toml:4") && Contains("unknown key 'slurm.partiton'"));
  CHECK_THAT(error_of("time = \"1 hour\"\n"), Contains("x.toml:4") && Contains("without spaces"));
  CHECK_THAT(error_of("cpus_per_task = 0\n"), Contains("from 1 to"));
  CHECK_THAT(error_of("extra = [\"qos=short\"]\n"), Contains("starting with --"));
  CHECK_THAT(error_of("extra = [\"--a\", \"--b\\n#\"]\n"), Contains("x.toml:4"));

  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  poslab::RunStudyOptions options = two.options();
  options.export_format = "slurm";
  options.out = (scratch.path / "with space").string();
  std::ostringstream out;
  CHECK_THROWS_WITH(poslab::run_study(options, out), Contains("contains a space"));
  CHECK_FALSE(fs::exists(scratch.path / "with space"));  // nothing written
}

TEST_CASE("poslab run --summary-only lists every run's status, writes the summary and runs nothing",
          "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  two.fake_finished(0, {{"loss", 1.0}});
  const fs::path busy = two.layout.run_dir(two.runs[1]);
  HeldRunLock held(busy);
  poslab::testing::write_file(busy / "metrics.csv", "step\n1\n");
  poslab::RunStudyOptions options = two.options();
  options.summary_only = true;
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  CHECK_THAT(out.str(), Contains("done       train.seed=1") &&
                            Contains("running    train.seed=2") && Contains("1 running"));
  CHECK(lines_of(read_file(two.layout.summary())).size() == 2);  // header + the finished run
  CHECK(read_file(busy / "metrics.csv") == "step\n1\n");

  SECTION("and `poslab run` leaves the running one alone") {
    options.summary_only = false;
    std::ostringstream run_out;
    CHECK(poslab::run_study(options, run_out) == 0);
    CHECK_THAT(run_out.str(), Contains("1 run(s) are being trained by another process"));
    CHECK(read_file(busy / "metrics.csv") == "step\n1\n");
  }
}

TEST_CASE("poslab run --only runs a subset, --set changes every run and is recorded",
          "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  poslab::RunStudyOptions options = two.options();
  options.only = {"*seed=2"};
  options.overrides = {"train.steps=2"};
  std::ostringstream out;
  REQUIRE(poslab::run_study(options, out) == 0);
  CHECK_FALSE(fs::exists(two.layout.run_dir(two.runs[0])));
  const fs::path done = two.layout.run_dir(two.runs[1]);
  REQUIRE(fs::exists(done / "eval.json"));
  CHECK(poslab::load_config((done / "config.toml").string(), poslab::registered_choices())
            .train.steps == 2);
  CHECK_THAT(read_file(two.layout.root / "study.toml"), Contains("--set train.steps=2"));

  SECTION("the same study without --set finds the run stale") {
    options.overrides.clear();
    std::ostringstream again;
    CHECK_THROWS_WITH(poslab::run_study(options, again),
                      Contains("made with another config") && Contains("steps"));
  }
  SECTION("a glob that matches nothing is an error that shows the names") {
    options.only = {"*seed=9"};
    std::ostringstream again;
    CHECK_THROWS_WITH(poslab::run_study(options, again),
                      Contains("--only matches none") && Contains("train.seed=1"));
  }
}

TEST_CASE("poslab train --resume: skip a finished run, redo an unfinished one, refuse another",
          "[slurm]") {
  ScratchDirectory scratch;
  TwoRunStudy two(scratch.path);
  const fs::path config = scratch.path / "run.toml";
  poslab::Config cfg = two.runs[0].config;
  cfg.out_dir = (scratch.path / "run").string();
  poslab::testing::write_file(config, poslab::config_to_toml(cfg));
  const std::string train = "train --config " + config.string();

  const Outcome first = run_poslab(train, scratch.path);
  REQUIRE(first.exit_code == 0);
  const Outcome refused = run_poslab(train, scratch.path);
  CHECK(refused.exit_code != 0);
  CHECK_THAT(refused.err, Contains("already holds a finished run") && Contains("--resume"));

  const auto finished_at = fs::last_write_time(scratch.path / "run" / "eval.json");
  const Outcome skipped = run_poslab(train + " --resume", scratch.path);
  CHECK(skipped.exit_code == 0);
  CHECK_THAT(skipped.out, Contains("nothing to do"));
  CHECK(fs::last_write_time(scratch.path / "run" / "eval.json") == finished_at);

  const Outcome other = run_poslab(train + " --resume --set train.steps=2", scratch.path);
  CHECK(other.exit_code != 0);
  CHECK_THAT(other.err, Contains("another experiment") && Contains("steps"));

  fs::remove(scratch.path / "run" / "eval.json");  // as if killed before the end
  const Outcome redone = run_poslab(train + " --resume", scratch.path);
  CHECK(redone.exit_code == 0);
  CHECK_THAT(redone.out, Contains("training it again from step 0"));
  CHECK(fs::exists(scratch.path / "run" / "eval.json"));

  CHECK(run_poslab(train + " --resume --force", scratch.path).exit_code != 0);  // one or the other
}
