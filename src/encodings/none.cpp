// NoPE: no positional encoding at all. The causal mask is the only source of order
// (Kazemnejad et al. 2023 show a decoder can still infer positions from it).
#include "encodings/registry.hpp"

namespace poslab {

namespace {
template <class T>
class NoPositions : public Encoding<T> {
 public:
  NoPositions(const Options&, const EncodingShape&, ParameterArena<T>&) {}
};
}  // namespace

EncodingInfo none_encoding_info() {
  return {"none", EncodingFamily::none,
          "NoPE: no positional information; order comes from the causal mask alone",
          "Kazemnejad et al. 2023", {},
          factory_float<NoPositions>(), factory_double<NoPositions>()};
}

}  // namespace poslab
