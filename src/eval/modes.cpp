#include <stdexcept>

#include "eval/mode.hpp"

namespace poslab {

// Each mode's file defines one of these. To add a mode: write src/eval/NAME.cpp with a
// NAME_eval_mode() and add it to the list below (docs/07, "Add an evaluation mode").
EvalMode chunked_eval_mode();
EvalMode passkey_eval_mode();
EvalMode stream_eval_mode();
EvalMode example_eval_mode();

const std::vector<EvalMode>& registered_eval_modes() {
  // The order of a run's rows in eval.json: the chunked settings first (the main one decides
  // the run's loss), then the passkey grid, then the streaming caches.
  static const std::vector<EvalMode> modes = {chunked_eval_mode(), passkey_eval_mode(),
                                              stream_eval_mode(), example_eval_mode()};
  return modes;
}

const EvalMode& find_eval_mode(const std::string& name) {
  std::string names;
  for (const EvalMode& mode : registered_eval_modes()) {
    if (mode.name == name) return mode;
    names += (names.empty() ? "" : ", ") + mode.name;
  }
  throw std::invalid_argument("unknown evaluation mode '" + name + "' (registered: " + names +
                              ")");
}

}  // namespace poslab
