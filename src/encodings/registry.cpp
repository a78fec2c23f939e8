#include "encodings/registry.hpp"

#include "encodings/log_n_scaling.hpp"

namespace poslab {

// Each encoding file defines one of these. To add an encoding: write src/encodings/NAME.cpp
// with a NAME_encoding_info() and add it to the list below (see docs/ "Add your own encoding").
EncodingInfo none_encoding_info();
EncodingInfo sinusoidal_encoding_info();
EncodingInfo learned_encoding_info();
EncodingInfo shaw_encoding_info();
EncodingInfo transformer_xl_encoding_info();
EncodingInfo t5_bias_encoding_info();
EncodingInfo alibi_encoding_info();
EncodingInfo rope_encoding_info();
EncodingInfo xpos_encoding_info();
EncodingInfo kerple_encoding_info();
EncodingInfo fire_encoding_info();
EncodingInfo deberta_encoding_info();
EncodingInfo example_distance_bias_encoding_info();

namespace {
// The options every encoding has (log-n scaling, log_n_scaling.hpp), after each encoding's own;
// their rule is checked before its own.
std::vector<EncodingInfo> with_shared_options(std::vector<EncodingInfo> infos) {
  for (EncodingInfo& info : infos) {
    for (OptionSpec& o : log_n_options()) info.options.push_back(std::move(o));
    ConfigRule own = std::move(info.config_rule);
    const bool has_positions = info.family != EncodingFamily::none;
    const bool absolute = info.family == EncodingFamily::absolute;
    const std::string name = info.name;
    info.config_rule = [own, has_positions, absolute, name](const Config& config)
        -> std::optional<ConfigProblem> {
      if (auto problem = log_n_problem(config.encoding.options)) return problem;
      // The streaming cache (eval/streaming_cache.hpp) gives its cached tokens new positions
      // every step (cache positions) or runs past the trained ones (text positions). An
      // absolute encoding adds a token's position to its embedding once, when it is read, so
      // neither can be given to it.
      if (config.eval.stream_length > 0 && absolute)
        return ConfigProblem{
            {"eval.stream_length", "encoding.type"},
            "eval.stream_length: the streaming cache needs a relative encoding, and '" + name +
                "' is absolute: a cached token keeps the position it was read at (added to its "
                "embedding), so StreamingLLM's cache positions cannot be given to it, and text "
                "positions run past train.seq_len = " + std::to_string(config.train.seq_len) +
                " into positions it never trained (absolute positions restart or exceed the "
                "trained range)"};
      if (config.train.pose_target_len > 0 && !has_positions)  // PoSE skips position ids
        return ConfigProblem{{"train.pose_target_len", "encoding.type"},
                             "train.pose_target_len: encoding '" + name + "' reads no "
                             "positions, so PoSE's skipping position ids would change nothing"};
      return own ? own(config) : std::nullopt;
    };
  }
  return infos;
}
}  // namespace

const std::vector<EncodingInfo>& registered_encodings() {
  static const std::vector<EncodingInfo> all = {
      none_encoding_info(),
      sinusoidal_encoding_info(),
      learned_encoding_info(),
      shaw_encoding_info(),
      transformer_xl_encoding_info(),
      t5_bias_encoding_info(),
      alibi_encoding_info(),
      rope_encoding_info(),
      xpos_encoding_info(),
      kerple_encoding_info(),
      fire_encoding_info(),
      deberta_encoding_info(),
      example_distance_bias_encoding_info(),
  };
  static const std::vector<EncodingInfo> with_shared = with_shared_options(all);
  return with_shared;
}

const EncodingInfo* find_encoding(const std::string& name) {
  for (const auto& e : registered_encodings())
    if (e.name == name) return &e;
  return nullptr;
}

std::string family_name(EncodingFamily f) {
  switch (f) {
    case EncodingFamily::none: return "none";
    case EncodingFamily::absolute: return "absolute";
    case EncodingFamily::relative: return "relative";
    case EncodingFamily::relative_normalized: return "relative_normalized";
  }
  return "?";
}

}  // namespace poslab
