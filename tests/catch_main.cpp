// The one translation unit that defines the test binary's main(): Catch2's, after one choice of
// environment.
//
// OpenMP threads wait passively (OMP_WAIT_POLICY=passive) unless the user chose otherwise: CTest
// sets it for every test (CMakeLists.txt), and the binary run by hand, as docs/07 runs the
// conformance kit (`build/poslab_tests "[conformance]"`), must be as fast. libgomp's default
// spinning made that command 10-25x slower on a shared 2-core machine (issue 51: 57 s to 2 min
// 42 s, 6 s passive). libgomp reads its environment once, when it is loaded, so the binary sets
// it and restarts itself (as src/cli/main.cpp does for poslab's own setting).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

#include <unistd.h>

int main(int argc, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
  return Catch::Session().run(argc, argv);
}
