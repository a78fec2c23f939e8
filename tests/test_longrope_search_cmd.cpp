// `poslab longrope-search` as a user runs it (train/longrope_search_run.cpp): --out is checked
// before any work and held for the whole search; a search stopped by SIGINT keeps what it found
// and the same command resumes it, ending where an uninterrupted search ends (issue 51).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "process_helpers.hpp"
#include "study_helpers.hpp"  // write_file

using namespace poslab::testing;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A tiny trained rope run (L = 8, 4 heads of 4: 2 pairs) and the arguments of a search on it.
struct SearchFixture {
  ScratchDirectory scratch;
  fs::path run;
  SearchFixture() {
    run = train_tiny_corpus_run(scratch.path, "n_heads = 4\n", "[encoding]\ntype = \"rope\"\n",
                                400);
  }
  fs::path operator/(const std::string& name) const { return scratch.path / name; }
  // A search of `iterations` iterations into --out `out` (given as the shell should see it).
  std::string args(const std::string& out, int iterations = 3) const {
    return "longrope-search --run " + shell_quote(run.string()) +
           " --target 32 --population 8 --parents 4 --mutations 4 --crossovers 4 --eval-batches 1"
           " --eval-rows 2 --iterations " + std::to_string(iterations) + " --out " + out;
  }
};

int count_lines(const fs::path& file) {
  const std::string text = read_file(file);
  return int(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("longrope-search refuses an --out that is not a directory, before any work",
          "[longrope_search][cli]") {
  SearchFixture f;
  write_file(f / "a_file", "keep me\n");
  for (const std::string& out :
       {shell_quote((f / "a_file").string()), shell_quote((f / "a_file" / "below").string()),
        std::string("/dev/null")}) {
    const Outcome r = run_poslab(f.args(out));
    INFO(out << "\n" << r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("longrope-search --out"));
    CHECK_THAT(r.err, Contains("nothing was searched"));
    CHECK(r.out.find("seed pi") == std::string::npos);  // refused before the search starts
  }
  CHECK(read_file(f / "a_file") == "keep me\n");
}

TEST_CASE("longrope-search: a second search into the same --out is refused, its files kept",
          "[longrope_search][cli]") {
  SearchFixture f;
  const std::string out = shell_quote((f / "search").string());
  const Outcome first = run_poslab(f.args(out));
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  const std::string factors = read_file(f / "search" / "longrope_factors.toml");
  REQUIRE_THAT(factors, Contains("long_factor"));

  // Other settings: refused, naming the setting that differs.
  const Outcome other = run_poslab(f.args(out, 5));
  INFO(other.out << other.err);
  CHECK(other.exit_code == 1);
  CHECK_THAT(other.err, Contains("holds a search of other settings (iterations: 3 there, 5 here)"));
  CHECK(read_file(f / "search" / "longrope_factors.toml") == factors);

  // The same settings again: a replay from evaluations.csv, the same result, nothing computed.
  const Outcome again = run_poslab(f.args(out));
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Contains("resuming the search"));
  CHECK_THAT(again.out, Contains("(0 computed now)"));
  CHECK(read_file(f / "search" / "longrope_factors.toml") == factors);

  // A directory of other files: refused.
  fs::create_directories(f / "other");
  write_file(f / "other" / "notes.txt", "mine\n");
  const Outcome taken = run_poslab(f.args(shell_quote((f / "other").string())));
  CHECK(taken.exit_code == 1);
  CHECK_THAT(taken.err, Contains("already holds files that are not a search's (notes.txt)"));
}

TEST_CASE("longrope-search stopped by SIGINT keeps its evaluations; the rerun resumes to the "
          "uninterrupted result; a concurrent search into its --out is refused",
          "[longrope_search][cli][resume]") {
  SearchFixture f;
  constexpr int kIterations = 150;
  const Outcome whole = run_poslab(f.args(shell_quote((f / "whole").string()), kIterations));
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);

  const fs::path log = f / "stopped.log";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string command = "exec " + shell_quote(POSLAB_BINARY) + " " +
                                f.args(shell_quote((f / "stopped").string()), kIterations) +
                                " >" + shell_quote(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const fs::path evaluations = f / "stopped" / "evaluations.csv";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(evaluations) < 40 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));

  // While it runs, --out is taken.
  const Outcome second = run_poslab(f.args(shell_quote((f / "stopped").string()), kIterations));
  ::kill(pid, SIGINT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string stopped_log = read_file(log);
  INFO(stopped_log);
  INFO(second.out << second.err);
  CHECK(second.exit_code == 1);
  CHECK_THAT(second.err, Contains("another search is writing into it"));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 128 + SIGINT);  // stopped mid-search, not finished
  CHECK_THAT(stopped_log, Contains("stopped by Interrupt"));
  CHECK_THAT(stopped_log, Contains("the same command resumes the search"));
  CHECK_FALSE(fs::exists(f / "stopped" / "longrope_factors.toml"));
  CHECK_FALSE(fs::exists(f / "stopped" / "claim.json"));
  const int kept = count_lines(evaluations) - 1;
  CHECK(kept >= 40);

  const Outcome resumed =
      run_poslab(f.args(shell_quote((f / "stopped").string()), kIterations));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resuming the search in"));
  CHECK_THAT(resumed.out, Contains(std::to_string(kept) + " evaluations kept"));
  CHECK(read_file(f / "stopped" / "fitness.csv") == read_file(f / "whole" / "fitness.csv"));
  CHECK(read_file(f / "stopped" / "evaluations.csv") == read_file(f / "whole" / "evaluations.csv"));
}

// Issue 51: a line break in --run went raw into longrope_factors.toml's comment line, so the
// snippet pasted into a config broke it. --run is written as a TOML string: one comment line.
TEST_CASE("longrope-search writes --run into its snippet's comment as one line",
          "[longrope_search][cli]") {
  SearchFixture f;
  const fs::path odd = f / "rope\nrun";
  fs::copy(f.run, odd, fs::copy_options::recursive);
  const Outcome r = run_poslab(
      "longrope-search --run " + shell_quote(odd.string()) +
      " --target 32 --population 4 --parents 2 --mutations 1 --crossovers 1 --eval-batches 1"
      " --eval-rows 2 --iterations 0 --out " + shell_quote((f / "search").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string snippet = read_file(f / "search" / "longrope_factors.toml");
  const std::string first_line = snippet.substr(0, snippet.find('\n'));
  CHECK(first_line.rfind("# poslab longrope-search --run ", 0) == 0);
  CHECK_THAT(first_line, Contains("rope\\nrun"));
  CHECK(snippet.substr(first_line.size() + 1, 11) == "[encoding]\n");
}
