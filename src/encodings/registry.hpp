// Every encoding poslab knows, by name. Registering an encoding (one entry in registry.cpp) is
// all it takes to make it selectable in configs, listed by `poslab encodings` and run through
// the conformance tests in tests/test_conformance.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/options.hpp"
#include "encodings/encoding.hpp"

namespace poslab {

// How an encoding treats positions; the conformance kit checks the matching property.
enum class EncodingFamily {
  none,      // no positional information: shift-invariant, and state reuse is exact
  absolute,  // depends on absolute positions: not shift-invariant
  relative,  // depends on i - j only: shift-invariant, and state reuse is exact
  // depends on i - j, and on the query position i only through a normaliser that is constant
  // while i stays below a (learned) threshold (FIRE): shift-invariant for positions below the
  // threshold, not beyond it; state reuse is exact while positions stay below it
  relative_normalized,
};

template <class T>
using EncodingFactory = std::function<std::unique_ptr<Encoding<T>>(
    const Options&, const EncodingShape&, ParameterArena<T>&)>;

struct EncodingInfo {
  std::string name;
  EncodingFamily family;
  std::string description;  // one line
  std::string paper;        // e.g. "Shaw et al. 2018"
  std::vector<OptionSpec> options;
  EncodingFactory<float> make_float;
  EncodingFactory<double> make_double;
  // A rule this encoding sets on other keys of the config (learned: max_len covers the
  // positions the run uses), checked by the config loader; nullptr if it has none.
  ConfigRule config_rule = nullptr;

  template <class T>
  std::unique_ptr<Encoding<T>> make(const Options& o, const EncodingShape& s,
                                    ParameterArena<T>& arena) const {
    std::unique_ptr<Encoding<T>> e;
    if constexpr (std::is_same_v<T, float>)
      e = make_float(o, s, arena);
    else
      e = make_double(o, s, arena);
    e->log_n = log_n_from_options(o);  // options every encoding has (registry.cpp)
    return e;
  }
};

// Every registered encoding, with the options all of them share appended to its own (log-n
// scaling, log_n_scaling.hpp) and their rule checked before the encoding's.
const std::vector<EncodingInfo>& registered_encodings();
// nullptr if there is no encoding of that name.
const EncodingInfo* find_encoding(const std::string& name);
std::string family_name(EncodingFamily f);

// Builds the two factories of an encoding class template `E<T>` whose constructor is
// E(const Options&, const EncodingShape&, ParameterArena<T>&).
template <template <class> class E>
EncodingFactory<float> factory_float() {
  return [](const Options& o, const EncodingShape& s, ParameterArena<float>& a) {
    return std::unique_ptr<Encoding<float>>(new E<float>(o, s, a));
  };
}
template <template <class> class E>
EncodingFactory<double> factory_double() {
  return [](const Options& o, const EncodingShape& s, ParameterArena<double>& a) {
    return std::unique_ptr<Encoding<double>>(new E<double>(o, s, a));
  };
}

}  // namespace poslab
