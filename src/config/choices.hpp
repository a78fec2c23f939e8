// What a config may choose from, described in the config layer's own words.
//
// Two sections of a config name something defined elsewhere: `encoding.type` names an encoding
// (src/encodings) and `task.name` a task (src/tasks). The config layer sits BELOW those libraries
// and knows none of them: it receives this plain description of the choices instead, filled in
// by the layer above that knows the registries (train/registered_choices.hpp). Tests hand it a
// made-up catalogue.
//
// Each entry carries what the loader needs to check a config before anything runs:
//   - its options (OptionSpec: type, default, range), checked key by key with file and line;
//   - optionally, a rule involving other keys of the config (learned's max_len must cover the
//     evaluated lengths; a generated task's tokens must fit model.vocab_size). The entry's owner
//     writes the rule; the loader runs it once every key has its final value and blames the
//     first of its keys that the config wrote, so the message still says where.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/options.hpp"

namespace poslab {

// A rule broken by a combination of keys: what is wrong, and the keys to blame, most to blame
// first ("encoding.max_len", "eval.seq_len"). The loader reports it at the first of those keys
// the config set, else at the config file itself.
struct ConfigProblem {
  std::vector<std::string> keys;
  std::string message;
};

// Checks a fully loaded config; nullopt when the rule holds.
using ConfigRule = std::function<std::optional<ConfigProblem>(const Config&)>;

// One encoding or task, as the config sees it.
struct ChoiceEntry {
  std::string name;                 // "shaw"
  std::vector<OptionSpec> options;  // the keys it adds to its section
  ConfigRule rule = nullptr;        // its rule between keys, if it has one
};

// Everything `encoding.type` and `task.name` may name.
struct ConfigChoices {
  std::vector<ChoiceEntry> encodings;
  std::vector<ChoiceEntry> tasks;
};

}  // namespace poslab
