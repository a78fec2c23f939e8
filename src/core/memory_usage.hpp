// How much memory the process really touched: the peak resident set size (VmHWM in
// /proc/self/status), which can be reset (Linux >= 4.0: write "5" to /proc/self/clear_refs), so
// that the peak of one phase (one evaluation setting) can be measured on its own. Used to check
// and report that long-context evaluation runs in bounded memory. Linux only; elsewhere the
// functions return 0 and do nothing.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace poslab {

// Peak resident memory since the process started or since the last reset_peak_memory(), bytes.
inline std::int64_t peak_memory_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM: 123 kB"
  return 0;
}

// Resident memory now (VmRSS), bytes.
inline std::int64_t current_memory_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS: 123 kB"
  return 0;
}

// Starts a new peak at the current resident size.
inline void reset_peak_memory() {
  std::ofstream clear("/proc/self/clear_refs");
  if (clear) clear << "5";
}

}  // namespace poslab
