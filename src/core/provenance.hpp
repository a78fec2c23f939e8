// Provenance: which code, build, machine and settings produced a run. Every run directory records
// it (eval.json "provenance"), and a study's summary.csv carries the commit of every run, so a
// result can always be traced to the exact source it came from and a study can check that all of
// its final runs came from one commit.
#pragma once

#include <string>

namespace poslab {

// Written at build time by cmake/build_info.cmake (build/generated/build_info.cpp).
const char* build_commit();  // `git rev-parse HEAD` of the source tree, or "unknown"
bool build_dirty();          // the tree had uncommitted changes (results/ not counted)
const char* build_flags();   // build type and optimisation flags, e.g. "Release -O3 -march=native"

struct Provenance {
  std::string poslab_version;  // the project version of CMakeLists.txt
  std::string commit;          // build_commit(), with "-dirty" appended if build_dirty()
  std::string compiler;        // e.g. "g++ 12.2.0"
  std::string flags;           // build_flags()
  std::string blas;            // openblas_get_config(): version, kernel, threading
  int threads = 0;             // OpenMP threads in use
  std::string threads_from;    // what chose them: "train.threads", "SLURM_CPUS_PER_TASK", ...
  std::string host;            // gethostname()
  // The processor's model (/proc/cpuinfo "model name"): the same build rounds differently on
  // another kind of CPU (-march=native code, and the kernel OpenBLAS picks at start-up), so
  // results are bit-identical only on the same kind.
  std::string cpu;
};

// The facts of this process (call after set_threads).
Provenance collect_provenance(const std::string& threads_from);

// "2026-11-23T15:04:05Z": now, UTC, for start and end times.
std::string utc_now();

}  // namespace poslab
