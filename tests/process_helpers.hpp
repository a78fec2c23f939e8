// Helpers for the tests that work with files and run the `poslab` executable as a user would
// (test_cli, test_runner, test_run_dir): scratch directories, whole files, and one run of the
// binary with its exit code and output.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include "study/runner.hpp"  // shell_quote

namespace poslab::testing {

// A fresh directory per test under the system's temporary directory, removed with everything in
// it at the end of the test. kNameOnly reserves the name without creating the directory (for
// code that must create it itself).
struct ScratchDirectory {
  enum Mode { kCreate, kNameOnly };
  std::filesystem::path path;
  explicit ScratchDirectory(Mode mode = kCreate, const std::filesystem::path& base =
                                                     std::filesystem::temp_directory_path()) {
    static int counter = 0;
    path = base / ("poslab-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    if (mode == kCreate) std::filesystem::create_directories(path);
  }
  ~ScratchDirectory() { std::filesystem::remove_all(path); }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
};

// The whole file, byte for byte ("" if it cannot be read).
inline std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The file parsed as JSON (throws if it is not JSON).
inline nlohmann::json json_of(const std::filesystem::path& file) {
  return nlohmann::json::parse(read_file(file));
}

struct Outcome {
  int exit_code;  // -1 if the process did not exit normally
  std::string out, err;
};

// Runs `poslab ARGS` through the shell (ARGS as the shell should see them), in directory `cwd`
// if one is given, capturing its exit code, stdout and stderr.
inline Outcome run_poslab(const std::string& args, const std::filesystem::path& cwd = {}) {
  ScratchDirectory capture;
  const std::filesystem::path out = capture.path / "stdout", err = capture.path / "stderr";
  const std::string command = (cwd.empty() ? "" : "cd " + shell_quote(cwd.string()) + " && ") +
                              shell_quote(POSLAB_BINARY) + " " + args + " >" +
                              shell_quote(out.string()) + " 2>" + shell_quote(err.string());
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

constexpr int kTinySeqLen = 8;  // the segment of train_tiny_corpus_run's runs

// Trains a tiny model for 2 steps (width 16, feed-forward 32, segments of kTinySeqLen bytes,
// batches of 2, one thread, one evaluation batch) on a corpus of `corpus_lines` short numbered
// sentences written inside `dir`; returns the run directory, dir/run. `model_keys` adds keys to
// [model] (e.g. "n_layers = 2\nn_heads = 8\n"), `tables` whole tables (e.g. "[encoding]\ntype =
// ...").
inline std::filesystem::path train_tiny_corpus_run(const std::filesystem::path& dir,
                                                   const std::string& model_keys,
                                                   const std::string& tables, int corpus_lines) {
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < corpus_lines; ++i)
    corpus << "The quick brown fox " << i << " jumps over the lazy dog.\n";
  corpus.close();
  std::ofstream(dir / "tiny.toml")
      << "[model]\nd_model = 16\nd_inner = 32\n"
      << model_keys << "[data]\npath = '" << (dir / "corpus.txt").string() << "'\n"
      << "[train]\nseq_len = " << kTinySeqLen
      << "\nbatch_size = 2\nsteps = 2\nwarmup_steps = 1\nlog_every = 1\n"
      << "threads = 1\n[eval]\nbatches = 1\n"
      << tables;
  const std::filesystem::path run = dir / "run";
  const Outcome r = run_poslab("train --config " + shell_quote((dir / "tiny.toml").string()) +
                               " --out " + shell_quote(run.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return run;
}

}  // namespace poslab::testing
