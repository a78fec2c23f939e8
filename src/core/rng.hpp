// Seeded random numbers. Everything random in poslab (initialisation, data order, task
// generation, randomized positions) draws from an Rng made from the config's seed, so the same
// config + seed gives a bit-identical run. We implement the normal draw ourselves (Box-Muller)
// because std::normal_distribution is allowed to differ between standard libraries.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

namespace poslab {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1).
  double uniform() { return (engine_() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>(uniform() * n); }

  // N(mean, std^2) by Box-Muller; the second value of each pair is kept for the next call.
  double normal(double mean = 0.0, double std = 1.0) {
    if (has_spare_) {
      has_spare_ = false;
      return mean + std * spare_;
    }
    double u1 = 0.0;
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return mean + std * radius * std::cos(2.0 * M_PI * u2);
  }

  // A new independent stream, e.g. one per task or per data split.
  Rng split() { return Rng(engine_() ^ 0x9E3779B97F4A7C15ULL); }

  // The whole state as text (the engine's 312 words, then the kept normal value's bits), so a
  // resumed training continues the very same stream (train/training_state.hpp).
  std::string state() const {
    std::ostringstream out;
    out << engine_ << ' ' << has_spare_ << ' ' << std::bit_cast<std::uint64_t>(spare_);
    return out.str();
  }
  void restore(const std::string& state) {
    std::istringstream in(state);
    std::mt19937_64 engine;
    bool has_spare = false;
    std::uint64_t spare_bits = 0;
    if (!(in >> engine >> has_spare >> spare_bits) || !(in >> std::ws).eof())
      throw std::invalid_argument("not a random-number generator state");
    engine_ = engine;
    has_spare_ = has_spare;
    spare_ = std::bit_cast<double>(spare_bits);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace poslab
