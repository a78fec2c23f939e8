// Runs one of poslab's Python scripts (notebooks/NAME.py of the source tree poslab was built
// from) with Debian's interpreter, which has numpy, pandas and matplotlib (the `python3` on
// PATH may not). Used by `poslab plot` and `poslab report`.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace poslab {

int run_python_script(const std::string& script_name, const std::vector<std::string>& arguments) {
  constexpr const char* kPython = "/usr/bin/python3";
  const std::string script = std::string(POSLAB_SOURCE_DIR) + "/notebooks/" + script_name;
  if (::access(kPython, X_OK) != 0)
    throw std::runtime_error(std::string(kPython) +
                             " not found: poslab's scripts need Debian's python3 with "
                             "python3-pandas and python3-matplotlib (scripts/setup.sh installs "
                             "them)");
  if (::access(script.c_str(), R_OK) != 0)
    throw std::runtime_error(script + " not found (the source tree poslab was built from)");
  std::vector<std::string> words = {kPython, script};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("cannot start " + std::string(kPython));
  if (child == 0) {
    ::execv(kPython, argv.data());
    _exit(127);  // execv returns only on failure
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("lost the python3 process");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace poslab
