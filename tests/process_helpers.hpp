// Helpers for the tests that work with files and run the `poslab` executable as a user would
// (test_cli, test_runner, test_run_dir): scratch directories, whole files, and one run of the
// binary with its exit code and output.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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
  explicit ScratchDirectory(Mode mode = kCreate,
                            const std::filesystem::path& base =
                                std::filesystem::temp_directory_path()) {
    static int counter = 0;
    path = base /
           ("poslab-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
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

}  // namespace poslab::testing
