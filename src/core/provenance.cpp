#include "core/provenance.hpp"

#include <omp.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>
#include <fstream>

extern "C" char* openblas_get_config();  // OpenBLAS' own description of the library

namespace poslab {

Provenance collect_provenance(const std::string& threads_from) {
  Provenance p;
  p.poslab_version = POSLAB_VERSION;
  p.commit = std::string(build_commit()) + (build_dirty() ? "-dirty" : "");
#if defined(__clang__)
  p.compiler = "clang++ " __clang_version__;
#elif defined(__GNUC__)
  p.compiler = "g++ " __VERSION__;
#else
  p.compiler = "unknown";
#endif
  p.flags = build_flags();
  p.blas = openblas_get_config();
  p.threads = omp_get_max_threads();
  p.threads_from = threads_from;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) p.host = host.data();
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      p.cpu = line.substr(line.find(':') + 2);
      break;
    }
  return p;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

}  // namespace poslab
