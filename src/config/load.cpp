// Loading a Config: TOML text -> a flat list of settings -> each checked against a schema -> Config.
//
// The schema is one table (`schema()` below): for every TOML key, the struct member it fills and
// the range its value must lie in. Everything else in this file is generic (read any setting,
// check any value, print any field), so a new key in config.hpp costs one line in that table.
//
// The steps, in the order a config goes through them:
//   1. settings_from_toml / setting_from_override: every `key = value` becomes a Setting that
//      remembers where it was written ("quick.toml:3", "--set model.d_model=256").
//   2. choose: `encoding.type` and `task.name` are resolved first, because each decides which
//      other keys of its section exist (each encoding and each task declares its own options,
//      handed to the loader as a ConfigChoices: config/choices.hpp).
//   3. apply_setting: in order (file, then overrides, so the last word wins), each setting is
//      looked up (unknown keys get a did-you-mean), type-checked, range-checked and stored.
//   4. check_consistency: rules that involve two keys (d_model divisible by n_heads), then the
//      rules the chosen encoding and task bring with them (ChoiceEntry::rule).
//
// Most keys hold one value. A few hold a list of numbers (eval.length_factors = [2, 4]) or of
// strings (data.include = ["*.py"]); their schema lines are LIST_KEY and STRINGS_KEY, and each
// element is type-checked, range-checked and reported on its own.
#include "config/load.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <type_traits>

#include <toml++/toml.h>

#include "config/differences.hpp"
#include "config/toml_text.hpp"

namespace poslab {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The sections of a config file, in the order of the Config struct.
const std::vector<std::string> kSections = {"model", "encoding", "memory", "data",
                                            "train", "eval",     "task"};

bool is_section(const std::string& name) {
  return std::find(kSections.begin(), kSections.end(), name) != kSections.end();
}

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) out += (i ? separator : "") + words[i];
  return out;
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw ConfigError(where + ": " + what);
}

// ---------------------------------------------------------------------------------------------
// Did you mean ...?
// ---------------------------------------------------------------------------------------------

// Levenshtein's edit distance (insert, delete, substitute one letter), where swapping two
// neighbouring letters also counts as a single edit, so that "d_modle" is one edit from "d_model".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  // d[i][j] = distance between the first i letters of a and the first j letters of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate nearest to `word`, if it is near enough to be what was meant.
std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) best = candidate, best_distance = distance;
  }
  const std::size_t tolerance = std::max<std::size_t>(2, word.size() / 3);
  if (best && best_distance <= tolerance && best_distance < word.size()) return best;
  return std::nullopt;
}

// " (did you mean 'model.d_model'?)", or "" if nothing is near.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& prefix = "") {
  auto best = nearest(word, candidates);
  return best ? " (did you mean '" + prefix + *best + "'?)" : "";
}

// ---------------------------------------------------------------------------------------------
// Values and their types
// ---------------------------------------------------------------------------------------------

// What a key expects: the index of the alternative in OptionValue, or a list of numbers or of
// strings.
enum Kind : std::size_t {
  kBoolean = 0, kInteger = 1, kFloat = 2, kString = 3, kNumberList = 4, kStringList = 5
};

std::string kind_name(std::size_t kind) {
  static const char* names[] = {"boolean", "integer", "float", "string", "array of numbers",
                                "array of strings"};
  return names[kind];
}

std::string with_article(const std::string& noun) {
  const bool vowel = !noun.empty() && std::string("aeiou").find(noun[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + noun;
}

// One `key = value`, as written in the file or on the command line.
struct Setting {
  std::string section;              // "model", ...; "" for top-level keys such as out_dir
  std::string key;                  // "d_model"
  std::optional<OptionValue> value; // empty when TOML wrote what no key holds (array, table, date)
  std::string written_type;         // "integer", "array", ...: what the user wrote, for messages
  std::optional<std::string> bare_text;  // --set only: the text after '=', verbatim
  std::string where;                // "quick.toml:3" or "--set model.d_model=256"
  std::size_t line = 0, column = 0; // position in the file (0 for --set), to keep file order
  std::vector<Setting> elements;    // an array: one Setting per element, key "length_factors[1]"

  std::string name() const { return section.empty() ? key : section + "." + key; }
};

// `source_name`: the file, to give each element of an array its own line ("" for --set, where
// the elements share the setting's `where`).
Setting setting_from_node(std::string section, std::string key, const toml::node& node,
                          std::string where, const std::string& source_name = "") {
  Setting s;
  s.section = std::move(section);
  s.key = std::move(key);
  s.where = std::move(where);
  s.line = node.source().begin.line;
  s.column = node.source().begin.column;
  switch (node.type()) {
    case toml::node_type::boolean: s.value = node.as_boolean()->get(); break;
    case toml::node_type::integer: s.value = node.as_integer()->get(); break;
    case toml::node_type::floating_point: s.value = node.as_floating_point()->get(); break;
    case toml::node_type::string: s.value = node.as_string()->get(); break;
    default: break;  // tables, arrays, dates and times: no key of ours holds one
  }
  switch (node.type()) {
    case toml::node_type::boolean: s.written_type = "boolean"; break;
    case toml::node_type::integer: s.written_type = "integer"; break;
    case toml::node_type::floating_point: s.written_type = "float"; break;
    case toml::node_type::string: s.written_type = "string"; break;
    case toml::node_type::table: s.written_type = "table"; break;
    case toml::node_type::array: s.written_type = "array"; break;
    case toml::node_type::date: s.written_type = "date"; break;
    case toml::node_type::time: s.written_type = "time"; break;
    case toml::node_type::date_time: s.written_type = "date-time"; break;
    default: s.written_type = "value"; break;
  }
  if (const toml::array* array = node.as_array()) {
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& element = *array->get(i);
      const std::string element_where =
          source_name.empty() ? s.where
                              : source_name + ":" + std::to_string(element.source().begin.line);
      s.elements.push_back(setting_from_node(s.section, s.key + "[" + std::to_string(i) + "]",
                                             element, element_where));
    }
  }
  return s;
}

// The setting's value as the kind its key expects, or a "wrong type" error.
OptionValue value_as(const Setting& s, std::size_t kind) {
  if (s.value && s.value->index() == kind) return *s.value;
  // An integer is a fine float: `lr = 1` means 1.0.
  if (s.value && kind == kFloat && s.value->index() == kInteger)
    return static_cast<double>(std::get<std::int64_t>(*s.value));
  // On the command line, a string may be written bare: `--set out_dir=runs/2024`.
  if (kind == kString && s.bare_text) return *s.bare_text;
  fail(s.where, s.name() + ": expected " + with_article(kind_name(kind)) + ", got " +
                    with_article(s.written_type));
}

// ---------------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------------

// The values a key accepts. Numbers: an interval, each end open or closed. Strings: a list of
// choices, or "anything but empty".
struct Bounds {
  double min = -kInfinity;
  double max = kInfinity;
  bool min_included = true;
  bool max_included = true;
  std::vector<std::string> choices = {};
  bool non_empty = false;
  bool path = false;  // a file name: no control characters (a NUL or a line break)
};

Bounds anything() { return {}; }
Bounds at_least(double lo) { return {.min = lo}; }
Bounds greater_than(double lo) { return {.min = lo, .min_included = false}; }
Bounds closed(double lo, double hi) { return {.min = lo, .max = hi}; }                  // [lo, hi]
Bounds half_open(double lo, double hi) { return {.min = lo, .max = hi, .max_included = false}; }  // [lo, hi)
Bounds one_of(std::vector<std::string> choices) { return {.choices = std::move(choices)}; }
Bounds a_path() { return {.non_empty = true, .path = true}; }

bool has_control_character(const std::string& text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// "in [0, 1)", ">= 1", "one of relu, gelu", ...
std::string describe(const Bounds& b) {
  if (!b.choices.empty()) return "one of " + join(b.choices, ", ");
  if (b.non_empty) return "a non-empty string";
  const bool has_min = std::isfinite(b.min), has_max = std::isfinite(b.max);
  if (has_min && has_max)
    return std::string("in ") + (b.min_included ? "[" : "(") + number_text(b.min) + ", " +
           number_text(b.max) + (b.max_included ? "]" : ")");
  if (has_min) return (b.min_included ? ">= " : "> ") + number_text(b.min);
  if (has_max) return (b.max_included ? "<= " : "< ") + number_text(b.max);
  return "anything";
}

bool within(const OptionValue& v, const Bounds& b) {
  if (auto text = std::get_if<std::string>(&v)) {
    if (b.non_empty && text->empty()) return false;
    if (b.path && has_control_character(*text)) return false;
    return b.choices.empty() ||
           std::find(b.choices.begin(), b.choices.end(), *text) != b.choices.end();
  }
  if (std::holds_alternative<bool>(v)) return true;
  const double x = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                     : static_cast<double>(std::get<std::int64_t>(v));
  if (std::isnan(x)) return !std::isfinite(b.min) && !std::isfinite(b.max);
  if (x < b.min || (x == b.min && !b.min_included)) return false;
  if (x > b.max || (x == b.max && !b.max_included)) return false;
  return true;
}

void check_bounds(const Setting& s, const OptionValue& v, const Bounds& b,
                  const std::string& why = "") {
  if (within(v, b)) return;
  if (auto text = std::get_if<std::string>(&v); text && b.path && has_control_character(*text))
    fail(s.where, s.name() + " is a path: it may not hold control characters (NUL, line " +
                      "breaks), got " + toml_string(*text));
  std::string hint, got = option_to_string(v);
  if (auto text = std::get_if<std::string>(&v)) {
    hint = did_you_mean(*text, b.choices);
    got = toml_string(*text);  // quoted and escaped: a NUL or a line break stays visible
  }
  fail(s.where, s.name() + " must be " + describe(b) + why + ", got " + got + hint);
}

// ---------------------------------------------------------------------------------------------
// The schema: one line per key
// ---------------------------------------------------------------------------------------------

// One TOML key and the Config member behind it.
struct Field {
  std::string section;  // "" for top-level keys
  std::string key;
  std::size_t kind;     // the type the key expects
  Bounds limits;        // what the C++ member can hold (an int is 32 bits, TOML's are 64)
  Bounds bounds;        // what makes sense (a list: what each element must be)
  OptionValue (*get)(const Config&);
  void (*set)(Config&, const OptionValue&);
  // Lists of numbers (kind kNumberList) use these instead of get and set.
  std::vector<double> (*get_list)(const Config&) = nullptr;
  void (*set_list)(Config&, const std::vector<double>&) = nullptr;
  // Lists of strings (kind kStringList) use these.
  std::vector<std::string> (*get_strings)(const Config&) = nullptr;
  void (*set_strings)(Config&, const std::vector<std::string>&) = nullptr;

  std::string name() const { return section.empty() ? key : section + "." + key; }
};

template <class T>
constexpr std::size_t kind_of() {
  if constexpr (std::is_same_v<T, bool>) return kBoolean;
  else if constexpr (std::is_integral_v<T>) return kInteger;
  else if constexpr (std::is_floating_point_v<T>) return kFloat;
  else return kString;
}

template <class T>
Bounds limits_of() {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using Toml = std::int64_t;  // TOML integers are 64-bit signed
    return closed(std::max<double>(std::numeric_limits<T>::min(), std::numeric_limits<Toml>::min()),
                  std::min<double>(std::numeric_limits<T>::max(), std::numeric_limits<Toml>::max()));
  }
  return anything();
}

template <class T>
OptionValue to_option(const T& x) {
  if constexpr (kind_of<T>() == kBoolean) return x;
  else if constexpr (kind_of<T>() == kInteger) return static_cast<std::int64_t>(x);
  else if constexpr (kind_of<T>() == kFloat) return static_cast<double>(x);
  else return x;
}

// `v` already has the right kind and lies within the member's limits.
template <class T>
void from_option(const OptionValue& v, T& x) {
  if constexpr (kind_of<T>() == kBoolean) x = std::get<bool>(v);
  else if constexpr (kind_of<T>() == kInteger) x = static_cast<T>(std::get<std::int64_t>(v));
  else if constexpr (kind_of<T>() == kFloat) x = static_cast<T>(std::get<double>(v));
  else x = std::get<std::string>(v);
}

// A key of a section: `section_member` is e.g. &Config::model, `member` &ModelConfig::d_model.
template <auto section_member, auto member>
Field section_field(const char* section, const char* key, Bounds bounds) {
  using T = std::remove_cvref_t<decltype(std::declval<Config&>().*section_member.*member)>;
  return Field{section, key, kind_of<T>(), limits_of<T>(), std::move(bounds),
               [](const Config& c) { return to_option(c.*section_member.*member); },
               [](Config& c, const OptionValue& v) { from_option(v, c.*section_member.*member); }};
}

template <auto member>
Field top_level_field(const char* key, Bounds bounds) {
  using T = std::remove_cvref_t<decltype(std::declval<Config&>().*member)>;
  return Field{"", key, kind_of<T>(), limits_of<T>(), std::move(bounds),
               [](const Config& c) { return to_option(c.*member); },
               [](Config& c, const OptionValue& v) { from_option(v, c.*member); }};
}

// A key of a section holding a std::vector<double>; `bounds` applies to every element.
template <auto section_member, auto member>
Field list_field(const char* section, const char* key, Bounds bounds) {
  Field f{section, key, kNumberList, anything(), std::move(bounds), nullptr, nullptr};
  f.get_list = [](const Config& c) { return c.*section_member.*member; };
  f.set_list = [](Config& c, const std::vector<double>& v) { c.*section_member.*member = v; };
  return f;
}

// A key of a section holding a std::vector<std::string>; `bounds` applies to every element.
template <auto section_member, auto member>
Field strings_field(const char* section, const char* key, Bounds bounds) {
  Field f{section, key, kStringList, anything(), std::move(bounds), nullptr, nullptr};
  f.get_strings = [](const Config& c) { return c.*section_member.*member; };
  f.set_strings = [](Config& c, const std::vector<std::string>& v) {
    c.*section_member.*member = v;
  };
  return f;
}

// KEY(model, d_model, at_least(1)) is the TOML key `d_model` of `[model]`, stored in
// Config::model.d_model: the TOML names are the C++ names, spelled once. LIST_KEY is the same
// for a list of numbers, STRINGS_KEY for a list of strings.
#define KEY(section, key, bounds) \
  section_field<&Config::section, &decltype(Config::section)::key>(#section, #key, bounds)
#define LIST_KEY(section, key, bounds) \
  list_field<&Config::section, &decltype(Config::section)::key>(#section, #key, bounds)
#define STRINGS_KEY(section, key, bounds) \
  strings_field<&Config::section, &decltype(Config::section)::key>(#section, #key, bounds)

// Every key except those of [encoding] and [task], which depend on the encoding and the task.
const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      top_level_field<&Config::out_dir>("out_dir", a_path()),

      KEY(model, vocab_size, at_least(1)),
      KEY(model, d_model, at_least(1)),
      KEY(model, n_layers, at_least(1)),
      KEY(model, n_heads, at_least(1)),
      KEY(model, d_inner, at_least(1)),
      KEY(model, activation, one_of({"relu", "gelu"})),
      KEY(model, pre_ln, anything()),
      KEY(model, tie_embeddings, anything()),
      KEY(model, sink_logit, anything()),
      KEY(model, sink_token, anything()),
      KEY(model, init_std, greater_than(0)),

      KEY(memory, mem_len, at_least(0)),
      KEY(memory, same_length, anything()),
      KEY(memory, continue_positions, anything()),
      KEY(memory, half_loss, anything()),

      KEY(data, path, a_path()),
      STRINGS_KEY(data, include, a_path()),  // each pattern a non-empty glob
      STRINGS_KEY(data, exclude, a_path()),
      KEY(data, valid_fraction, half_open(0, 1)),
      KEY(data, test_fraction, half_open(0, 1)),  // with valid_fraction: sum < 1 (check_consistency)
      KEY(data, split, one_of({"position", "file"})),
      KEY(data, separator, anything()),

      KEY(train, seq_len, at_least(1)),
      KEY(train, batch_size, at_least(1)),
      KEY(train, steps, at_least(0)),
      KEY(train, lr, greater_than(0)),
      KEY(train, min_lr_ratio, closed(0, 1)),
      KEY(train, warmup_steps, at_least(0)),
      KEY(train, weight_decay, at_least(0)),
      KEY(train, beta1, half_open(0, 1)),
      KEY(train, beta2, half_open(0, 1)),
      KEY(train, eps, greater_than(0)),
      KEY(train, grad_clip, at_least(0)),
      KEY(train, seed, anything()),
      KEY(train, log_every, at_least(1)),
      KEY(train, eval_every, at_least(0)),
      KEY(train, eval_batches, at_least(0)),
      KEY(train, eval_passkey_instances, at_least(0)),
      KEY(train, threads, at_least(0)),
      KEY(train, save_state_every, at_least(0)),
      KEY(train, randomized_positions, anything()),
      KEY(train, max_position, at_least(1)),
      KEY(train, pose_target_len, at_least(0)),  // 0 = off; else > train.seq_len (below)
      KEY(train, pose_variant, one_of({"code", "paper"})),
      KEY(train, passkey_fraction, closed(0, 1)),
      KEY(train, init_from, (Bounds{.path = true})),  // "" = no parent
      KEY(train, init_optimizer, anything()),

      KEY(eval, seq_len, at_least(0)),   // 0 = train.seq_len
      KEY(eval, mem_len, at_least(-1)),  // -1 = memory.mem_len
      // Each factor finite and > 0 (it scales a segment length) or >= 0 (a memory length).
      LIST_KEY(eval, length_factors,
               (Bounds{.min = 0, .min_included = false, .max_included = false})),
      LIST_KEY(eval, memory_factors, (Bounds{.min = 0, .max_included = false})),
      KEY(eval, stride, at_least(-1)),   // -1 = off; 0 refused below, with the reason
      KEY(eval, copy_distance, anything()),
      KEY(eval, copy_min_match, at_least(1)),
      KEY(eval, batches, at_least(0)),
      KEY(eval, split, one_of({"valid", "test"})),
      KEY(eval, batch_size, at_least(0)),
      KEY(eval, gate_threshold, closed(0, 1)),
      LIST_KEY(eval, passkey_length_factors,
               (Bounds{.min = 0, .min_included = false, .max_included = false})),
      LIST_KEY(eval, passkey_depths, closed(0, 1)),
      KEY(eval, passkey_instances, at_least(1)),
      KEY(eval, passkey_filler, one_of({"corpus", "sentence", "sentence_shifted"})),
      KEY(eval, passkey_format, one_of({"paper", "compact"})),
      KEY(eval, passkey_seed, anything()),
      KEY(eval, stream_length, at_least(0)),  // 0 = off; else > sinks + recent + 1 (below)
      KEY(eval, stream_sinks, at_least(0)),
      KEY(eval, stream_recent, at_least(0)),  // 0 = train.seq_len - 1 - stream_sinks
      KEY(eval, stream_positions, one_of({"cache", "text"})),
      STRINGS_KEY(eval, stream_modes, one_of({"sinks", "window", "recompute", "dense", "memory"})),
  };
  return fields;
}

#undef KEY
#undef LIST_KEY
#undef STRINGS_KEY

const Field* find_field(const std::string& section, const std::string& key) {
  for (const auto& f : schema())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

std::vector<std::string> keys_of_section(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& f : schema())
    if (f.section == section) keys.push_back(f.key);
  return keys;
}

// ---------------------------------------------------------------------------------------------
// Step 1: reading settings
// ---------------------------------------------------------------------------------------------

std::string where_in_file(const std::string& source_name, const toml::source_region& region) {
  return source_name + ":" + std::to_string(region.begin.line);
}

// Every key of the file, in file order. Known sections are opened up; everything else at the top
// level (out_dir, a misspelled section) stays a top-level setting and is judged later.
std::vector<Setting> settings_from_toml(const std::string& text, const std::string& source_name) {
  if (const TomlLimitProblem p = toml_limit_problem(text); !p.what.empty())
    fail(p.line ? source_name + ":" + std::to_string(p.line) : source_name, p.what);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    fail(where_in_file(source_name, e.source()),
         "TOML syntax error: " + std::string(e.description()));
  }
  std::vector<Setting> settings;
  for (auto&& [name, node] : root) {
    const std::string section(name.str());
    if (is_section(section) && node.is_table()) {
      for (auto&& [key, value] : *node.as_table())
        settings.push_back(setting_from_node(section, std::string(key.str()), value,
                                             where_in_file(source_name, value.source()),
                                             source_name));
    } else {
      settings.push_back(
          setting_from_node("", section, node, where_in_file(source_name, node.source())));
    }
  }
  // toml++ keeps keys sorted by name; report problems in the order they were written.
  std::stable_sort(settings.begin(), settings.end(), [](const Setting& a, const Setting& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return settings;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// "model.d_model=256": the value is read as TOML (256, true, 1e-3, "shaw"); text that is not a
// TOML value (shaw, runs/x) is taken as a bare string.
Setting setting_from_override(const std::string& text) {
  // Messages quote the argument; a very long one (a fuzzer's) only by its start.
  const std::string where =
      "--set " + (text.size() <= 200 ? text : text.substr(0, 200) + "...");
  const auto equals = text.find('=');
  if (equals == std::string::npos) fail(where, "expected KEY=VALUE, e.g. model.d_model=256");
  const std::string name = trim(text.substr(0, equals));
  const std::string raw_value = trim(text.substr(equals + 1));
  if (name.empty()) fail(where, "expected KEY=VALUE, but KEY is empty");

  std::string section, key = name;
  if (const auto dot = name.find('.'); dot != std::string::npos)
    section = name.substr(0, dot), key = name.substr(dot + 1);

  Setting s;
  std::optional<toml::table> parsed;
  if (const TomlLimitProblem p = toml_limit_problem(raw_value); !p.what.empty())
    fail(where, p.what);
  try {
    parsed = toml::parse("value = " + raw_value);
  } catch (const toml::parse_error&) {
  }
  if (parsed && parsed->size() == 1 && parsed->get("value")) {
    s = setting_from_node(section, key, *parsed->get("value"), where);
  } else {
    s.section = section, s.key = key, s.where = where;
    s.value = raw_value, s.written_type = "string";
  }
  s.line = s.column = 0;
  s.bare_text = raw_value;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Steps 2-4: from settings to a Config
// ---------------------------------------------------------------------------------------------

// [encoding] and [task] are sections whose keys depend on a choice made in them: `encoding.type`
// names an encoding and `task.name` a task, and the other keys of the section are the options
// that encoding or task declares (its OptionSpec list). A Choice is one such section, chosen.
struct Choice {
  std::string section;   // "encoding"
  std::string selector;  // "type": the key that names the entry
  std::string what;      // "encoding type": "unknown encoding type 'x'"
  std::string noun;      // "encoding": "for encoding 'shaw'", "encoding 'none' takes no options"
  std::string plural;    // "encodings": "registered encodings: none, ..."
  std::string name = {}; // the entry chosen
  const std::vector<OptionSpec>* options = nullptr;  // its options
  const ConfigRule* rule = nullptr;                  // its rule between keys (may be empty)
};

// The choice is made before anything else, by the last `SECTION.SELECTOR` (overrides come after
// the file), or by the default.
Choice choose(Choice c, const std::string& default_name, const std::vector<Setting>& settings,
              const std::vector<ChoiceEntry>& catalogue, const std::string& source_name) {
  const Setting* chosen = nullptr;
  for (const auto& s : settings)
    if (s.section == c.section && s.key == c.selector) chosen = &s;

  std::string name = default_name;
  if (chosen) name = std::get<std::string>(value_as(*chosen, kString));
  for (const auto& entry : catalogue) {
    if (entry.name == name) {
      c.name = entry.name;
      c.options = &entry.options;
      c.rule = &entry.rule;
      return c;
    }
  }
  std::vector<std::string> names;
  for (const auto& entry : catalogue) names.push_back(entry.name);
  fail(chosen ? chosen->where : source_name,
       "unknown " + c.what + " '" + name + "'" + did_you_mean(name, names) + "; registered " +
           c.plural + ": " + join(names, ", "));
}

// A key of [encoding] or [task] other than the selector: one of the chosen entry's options.
void apply_choice_option(const Setting& s, const Choice& c, Options& options) {
  const OptionSpec* spec = nullptr;
  std::vector<std::string> keys;
  for (const auto& o : *c.options) {
    keys.push_back(o.key);
    if (o.key == s.key) spec = &o;
  }
  if (!spec) {
    if (keys.empty())
      fail(s.where, "unknown key '" + s.name() + "': " + c.noun + " '" + c.name +
                        "' takes no options");
    fail(s.where, "unknown key '" + s.name() + "' for " + c.noun + " '" + c.name + "'" +
                      did_you_mean(s.key, keys, c.section + ".") +
                      "; its options are: " + join(keys, ", "));
  }
  const OptionValue value = value_as(s, spec->default_value.index());
  if (const double* x = std::get_if<double>(&value); x && !std::isfinite(*x))
    fail(s.where, s.name() + " must be a finite number, got " + option_to_string(value));
  // Encodings and tasks keep their integer options as int: 2^32 must not wrap to 0.
  if (value.index() == kInteger)
    check_bounds(s, value,
                 closed(std::numeric_limits<std::int32_t>::min(),
                        std::numeric_limits<std::int32_t>::max()),
                 " to fit its C++ type");
  check_bounds(s, value, Bounds{.min = spec->min, .max = spec->max, .choices = spec->choices});
  options.set(spec->key, value);
}

// A key that is not in a known section, or a known section written as something else.
[[noreturn]] void reject_top_level(const Setting& s) {
  if (is_section(s.key))
    fail(s.where, "'" + s.key + "' must be a section ([" + s.key + "]), got " +
                      with_article(s.written_type));
  if (s.written_type == "table")
    fail(s.where, "unknown section [" + s.key + "]" + did_you_mean(s.key, kSections) +
                      "; sections are: " + join(kSections, ", "));
  std::vector<std::string> candidates = keys_of_section("");
  candidates.insert(candidates.end(), kSections.begin(), kSections.end());
  fail(s.where, "unknown key '" + s.key + "'" + did_you_mean(s.key, candidates));
}

[[noreturn]] void reject_unknown_key(const Setting& s) {
  std::string hint = did_you_mean(s.key, keys_of_section(s.section), s.section + ".");
  if (hint.empty()) {
    // Perhaps the right key in the wrong section: `model.mem_len` for `memory.mem_len`.
    std::vector<std::string> elsewhere;
    for (const auto& f : schema())
      if (f.key == s.key && !f.section.empty()) elsewhere.push_back("'" + f.name() + "'");
    if (!elsewhere.empty()) hint = " (did you mean " + join(elsewhere, " or ") + "?)";
  }
  fail(s.where, "unknown key '" + s.name() + "'" + hint);
}

// A list of numbers: an array whose every element is a number within the field's bounds. Each
// element is judged on its own, so a message names it: `eval.length_factors[1] must be > 0`.
void apply_list(const Setting& s, const Field& field, Config& config) {
  if (s.written_type != "array") value_as(s, kNumberList);  // fails: "expected an array of ..."
  std::vector<double> numbers;
  for (const Setting& e : s.elements) {
    if (!e.value || !(e.value->index() == kInteger || e.value->index() == kFloat))
      fail(e.where, e.name() + ": expected a number, got " + with_article(e.written_type));
    const OptionValue value = value_as(e, kFloat);
    check_bounds(e, value, field.bounds);
    numbers.push_back(std::get<double>(value));
  }
  field.set_list(config, numbers);
}

// A list of strings, judged like a list of numbers: `quick.toml:4: data.include[1]: expected a
// string, got an integer`.
void apply_strings(const Setting& s, const Field& field, Config& config) {
  if (s.written_type != "array") value_as(s, kStringList);  // fails: "expected an array of ..."
  std::vector<std::string> strings;
  for (const Setting& e : s.elements) {
    if (!e.value || e.value->index() != kString)
      fail(e.where, e.name() + ": expected a string, got " + with_article(e.written_type));
    check_bounds(e, *e.value, field.bounds);
    strings.push_back(std::get<std::string>(*e.value));
  }
  field.set_strings(config, strings);
}

void apply_setting(const Setting& s, const Choice& encoding, const Choice& task, Config& config) {
  if (!s.section.empty() && !is_section(s.section))  // only from --set: files keep them top-level
    fail(s.where, "unknown section [" + s.section + "]" + did_you_mean(s.section, kSections) +
                      "; sections are: " + join(kSections, ", "));
  if (s.section == encoding.section) {
    if (s.key != encoding.selector) apply_choice_option(s, encoding, config.encoding.options);
    return;  // the type was resolved by choose
  }
  if (s.section == task.section) {
    if (s.key != task.selector) apply_choice_option(s, task, config.task.options);
    return;  // the name was resolved by choose
  }
  const Field* field = find_field(s.section, s.key);
  if (!field && s.section.empty()) reject_top_level(s);
  if (!field) reject_unknown_key(s);
  if (field->kind == kNumberList) return apply_list(s, *field, config);
  if (field->kind == kStringList) return apply_strings(s, *field, config);

  const OptionValue value = value_as(s, field->kind);
  if (const double* x = std::get_if<double>(&value); x && !std::isfinite(*x))
    fail(s.where, s.name() + " must be a finite number, got " + option_to_string(value));
  check_bounds(s, value, field->limits, " to fit its C++ type");
  check_bounds(s, value, field->bounds);
  field->set(config, value);
}

// Rules between keys, checked once every key has its final value. `where_set` says where each
// key was last written; a rule broken by defaults alone is blamed on the config as a whole.
void check_consistency(const Config& config, const Choice& encoding, const Choice& task,
                       const std::map<std::string, std::string>& where_set,
                       const std::string& source_name) {
  auto blame = [&](const std::vector<std::string>& keys) {
    for (const std::string& key : keys)
      if (auto it = where_set.find(key); it != where_set.end()) return it->second;
    return source_name;
  };
  const auto& m = config.model;
  if (m.d_model % m.n_heads != 0)
    fail(blame({"model.d_model", "model.n_heads"}),
         "model.d_model (" + std::to_string(m.d_model) + ") must be divisible by model.n_heads (" +
             std::to_string(m.n_heads) + ")");
  // Positions the run will need exist. Randomized positions (Ruoss et al. 2023) sample the
  // M + L key positions of a window from [0, train.max_position).
  const auto& t = config.train;
  const std::int64_t sink = m.sink_token ? 1 : 0;  // the prepended sink takes a position too
  if (t.randomized_positions &&
      t.max_position < std::int64_t(t.seq_len) + config.memory.mem_len + sink)
    fail(blame({"train.max_position", "train.randomized_positions", "train.seq_len",
                "memory.mem_len", "model.sink_token"}),
         "train.max_position (" + std::to_string(t.max_position) +
             ") must be at least train.seq_len + memory.mem_len" +
             (sink ? std::string(" + 1 (model.sink_token)") : std::string()) + " (" +
             std::to_string(std::int64_t(t.seq_len) + config.memory.mem_len + sink) +
             ") with train.randomized_positions: a window samples that many distinct positions");
  // The prepended sink token (model.sink_token; model/transformer.hpp): a learned token at the
  // start of every sequence read from an empty memory. Training rows and evaluation rows each
  // start a sequence; a memory would carry a row's states into the next one, which then starts
  // without its sink, so memory is off in training and in the chunked evaluations (the
  // streaming evaluation keeps the sink as the first cached entry, eval/streaming_cache.hpp).
  if (m.sink_token) {
    auto sink_fail = [&](const std::vector<std::string>& keys, const std::string& why) {
      std::vector<std::string> blamed = keys;
      blamed.push_back("model.sink_token");
      fail(blame(blamed), keys.front() + ": " + why + " (model.sink_token = true)");
    };
    if (config.task.name != "lm")
      sink_fail({"task.name"}, "the prepended sink token is for language models (task.name = "
                               "\"lm\"), not task '" + config.task.name + "'");
    if (config.memory.mem_len > 0)
      sink_fail({"memory.mem_len"},
                "the sink token is prepended to every training row, which a memory would "
                "continue without it: set memory.mem_len = 0 (got " +
                    std::to_string(config.memory.mem_len) + ")");
    if (config.eval.mem_len > 0)
      sink_fail({"eval.mem_len"}, "the chunked evaluation reads rows that each start with the "
                                  "sink, without memory: set eval.mem_len to 0 or -1 (got " +
                                      std::to_string(config.eval.mem_len) + ")");
    if (!config.eval.memory_factors.empty())
      sink_fail({"eval.memory_factors"},
                "state reuse continues rows without their sink; leave eval.memory_factors empty");
    if (t.pose_target_len > 0)
      sink_fail({"train.pose_target_len"},
                "PoSE chooses every position of a row itself, the sink's has no place in it; "
                "set train.pose_target_len = 0");
  }
  // PoSE (data/pose_sampling.hpp): the ids skip from [0, L) to cover [0, L'), L' > L, in the
  // rows of a text stream without memory.
  if (t.pose_target_len > 0) {
    const std::string L = std::to_string(t.seq_len), Lt = std::to_string(t.pose_target_len);
    auto pose_fail = [&](const std::vector<std::string>& keys, const std::string& why) {
      std::vector<std::string> blamed = {"train.pose_target_len"};  // where it was set, first
      blamed.insert(blamed.end(), keys.begin(), keys.end());
      fail(blame(blamed), "train.pose_target_len (" + Lt + "): " + why);
    };
    if (t.pose_target_len <= t.seq_len)
      pose_fail({}, "the PoSE target length must be above train.seq_len (" + L +
                        "): the skipping ids cover [0, target) with rows of train.seq_len tokens");
    if (t.seq_len < 2)
      pose_fail({"train.seq_len"}, "PoSE cuts a row into two chunks: train.seq_len must be >= 2");
    if (config.task.name != "lm")
      pose_fail({"task.name"}, "PoSE cuts its chunks from a text stream, for language models "
                               "(task.name = \"lm\"), not task '" + config.task.name + "'");
    if (config.memory.mem_len > 0)
      pose_fail({"memory.mem_len"},
                "PoSE rows do not continue each other, so there is nothing to remember: set "
                "memory.mem_len = 0 (got " + std::to_string(config.memory.mem_len) + ")");
    if (config.memory.continue_positions)
      pose_fail({"memory.continue_positions"},
                "PoSE chooses the positions itself; memory.continue_positions must be false");
    if (t.randomized_positions)
      pose_fail({"train.randomized_positions"},
                "PoSE and randomized positions (its RandPos baseline) are two ways to choose "
                "training positions; set only one");
    // train.passkey_fraction > 0 is allowed: the instance rows take the batch's skipping ids
    // (tasks/make_source.cpp).
  }
  if (t.init_optimizer && t.init_from.empty())
    fail(blame({"train.init_optimizer"}),
         "train.init_optimizer = true needs train.init_from (the run whose Adam moments to "
         "start from)");
  // Evaluation lengths are train.seq_len x factor, held as int.
  for (const char* key :
       {"eval.length_factors", "eval.memory_factors", "eval.passkey_length_factors"}) {
    const auto& factors = std::string(key) == "eval.length_factors"   ? config.eval.length_factors
                          : std::string(key) == "eval.memory_factors" ? config.eval.memory_factors
                                                                      : config.eval.passkey_length_factors;
    for (double f : factors)
      if (double(t.seq_len) * f > double(std::numeric_limits<std::int32_t>::max()))
        fail(blame({key, "train.seq_len"}),
             std::string(key) + ": train.seq_len (" + std::to_string(t.seq_len) + ") x " +
                 number_text(f) + " is more positions than an int holds (2^31 - 1)");
  }
  // Each byte of the corpus goes to exactly one split, and train must keep some.
  const auto& d = config.data;
  if (d.valid_fraction + d.test_fraction >= 1.0)
    fail(blame({"data.test_fraction", "data.valid_fraction"}),
         "data.valid_fraction (" + number_text(d.valid_fraction) + ") + data.test_fraction (" +
             number_text(d.test_fraction) + ") must be below 1: the rest is the train split");
  // Passkey retrieval (tasks/passkey.hpp) reads and writes text: a language model's business.
  const auto& e = config.eval;
  const bool passkey_eval = !e.passkey_length_factors.empty();
  if ((passkey_eval || t.passkey_fraction > 0) && config.task.name != "lm")
    fail(blame({passkey_eval ? "eval.passkey_length_factors" : "train.passkey_fraction",
                "task.name"}),
         std::string(passkey_eval ? "eval.passkey_length_factors" : "train.passkey_fraction") +
             ": passkey retrieval is for language models (task.name = \"lm\"), not task '" +
             config.task.name + "'");
  if (t.eval_passkey_instances > 0 && !passkey_eval)
    fail(blame({"train.eval_passkey_instances", "eval.passkey_length_factors"}),
         "train.eval_passkey_instances = " + std::to_string(t.eval_passkey_instances) +
             ": retrieval read during training reads the passkey grid, but "
             "eval.passkey_length_factors is empty (e.g. [1, 4])");
  if (t.eval_passkey_instances > 0 && t.eval_every == 0)
    fail(blame({"train.eval_passkey_instances", "train.eval_every"}),
         "train.eval_passkey_instances = " + std::to_string(t.eval_passkey_instances) +
             ": retrieval is read every train.eval_every steps, and train.eval_every is 0 "
             "(only at the end); set it (e.g. 1000)");
  if (passkey_eval && e.passkey_depths.empty())
    fail(blame({"eval.passkey_depths", "eval.passkey_length_factors"}),
         "eval.passkey_depths is empty: the passkey evaluation of eval.passkey_length_factors "
         "needs at least one depth (e.g. [0, 0.25, 0.5, 0.75, 1])");
  // Sliding-window evaluation: a window moves by 1 to its own length, on a text stream.
  if (e.stride == 0)
    fail(blame({"eval.stride"}),
         "eval.stride = 0: a sliding window must move by at least 1 byte (1 <= eval.stride <= "
         "the evaluated length; -1 = off)");
  if (e.stride > 0) {
    if (config.task.name != "lm")
      fail(blame({"eval.stride", "task.name"}),
           "eval.stride: sliding-window evaluation reads a text stream, for language models "
           "(task.name = \"lm\"), not task '" + config.task.name + "'");
    // The shortest window: the main evaluation's segment, or a length factor's.
    std::int64_t shortest = e.seq_len > 0 ? e.seq_len : t.seq_len;
    std::string which = e.seq_len > 0 ? "eval.seq_len" : "train.seq_len";
    for (double f : e.length_factors)
      if (const auto len = std::int64_t(std::llround(double(t.seq_len) * f)); len < shortest) {
        shortest = len;
        which = "train.seq_len x " + number_text(f) + " (eval.length_factors)";
      }
    if (e.stride > shortest)
      fail(blame({"eval.stride"}),
           "eval.stride (" + std::to_string(e.stride) + ") is above the shortest evaluated "
           "length, " + which + " = " + std::to_string(shortest) + " bytes: a window cannot "
           "move by more than its own length");
  }
  // Loss by copy distance reads text for repeated strings: a language model's business.
  if (e.copy_distance && config.task.name != "lm")
    fail(blame({"eval.copy_distance", "task.name"}),
         "eval.copy_distance: the loss by copy distance is for language models (task.name = "
         "\"lm\"), not task '" + config.task.name + "'");
  // The streaming cache (eval/streaming_cache.hpp): a text stream, a cache of at least one
  // recent token, and bytes left to score after the first S + R + 1.
  if (e.stream_length > 0) {
    if (config.task.name != "lm")
      fail(blame({"eval.stream_length", "task.name"}),
           "eval.stream_length: the streaming evaluation reads a text stream, for language "
           "models (task.name = \"lm\"), not task '" + config.task.name + "'");
    const std::int64_t S = e.stream_sinks;
    const std::int64_t R = e.stream_recent > 0 ? e.stream_recent : t.seq_len - 1 - S;
    if (R < 1)
      fail(blame({"eval.stream_recent", "eval.stream_sinks", "train.seq_len"}),
           "eval.stream_recent = 0 means train.seq_len - 1 - eval.stream_sinks = " +
               std::to_string(R) + " recent tokens: the cache needs at least 1 (lower "
               "eval.stream_sinks or set eval.stream_recent)");
    if (S + R + 1 >= e.stream_length)
      fail(blame({"eval.stream_length", "eval.stream_sinks", "eval.stream_recent"}),
           "eval.stream_sinks + eval.stream_recent = " + std::to_string(S) + " + " +
               std::to_string(R) + " reaches beyond the stream (eval.stream_length = " +
               std::to_string(e.stream_length) + "): every mode scores the bytes after the "
               "first S + R + 1, so the stream must be longer than S + R + 1 bytes");
    if (e.stream_modes.empty())
      fail(blame({"eval.stream_modes"}),
           "eval.stream_modes is empty: name at least one of sinks, window, recompute, dense, memory");
    for (std::size_t i = 0; i < e.stream_modes.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (e.stream_modes[i] == e.stream_modes[j])  // two equal rows a summary would count twice
          fail(blame({"eval.stream_modes"}),
               "eval.stream_modes names '" + e.stream_modes[i] + "' twice: each mode is "
               "evaluated once");
  }
  // That every instance fits its length is the rule of task "lm" (tasks/lm.cpp).
  // The rules of the chosen encoding and task (learned's max_len covers the evaluated lengths,
  // a generated task's tokens fit the vocabulary), written by their owners.
  for (const Choice* choice : {&encoding, &task})
    if (*choice->rule)
      if (const std::optional<ConfigProblem> problem = (*choice->rule)(config))
        fail(blame(problem->keys), problem->message);
}

Config build_config(const std::vector<Setting>& settings, const std::string& source_name,
                    const ConfigChoices& choices) {
  Config config;
  const Choice encoding =
      choose(Choice{.section = "encoding", .selector = "type", .what = "encoding type",
                    .noun = "encoding", .plural = "encodings"},
             EncodingConfig{}.type, settings, choices.encodings, source_name);
  config.encoding.type = encoding.name;
  config.encoding.options = Options::defaults(*encoding.options);
  const Choice task = choose(Choice{.section = "task", .selector = "name", .what = "task",
                                    .noun = "task", .plural = "tasks"},
                             TaskConfig{}.name, settings, choices.tasks, source_name);
  config.task.name = task.name;
  config.task.options = Options::defaults(*task.options);

  std::map<std::string, std::string> where_set;
  for (const auto& s : settings) {
    apply_setting(s, encoding, task, config);
    where_set[s.name()] = s.where;
  }
  check_consistency(config, encoding, task, where_set, source_name);
  return config;
}

// ---------------------------------------------------------------------------------------------
// Writing TOML
// ---------------------------------------------------------------------------------------------

std::string toml_value(const OptionValue& v) {
  switch (v.index()) {
    case kBoolean: return std::get<bool>(v) ? "true" : "false";
    case kInteger: return std::to_string(std::get<std::int64_t>(v));
    case kFloat: return toml_float(std::get<double>(v));
    default: return toml_string(std::get<std::string>(v));
  }
}

// [2.0, 0.5]; [] when empty.
std::string toml_list(const std::vector<double>& numbers) {
  std::string out = "[";
  for (std::size_t i = 0; i < numbers.size(); ++i) out += (i ? ", " : "") + toml_float(numbers[i]);
  return out + "]";
}

// ["*.py", "lib/*"]; [] when empty.
std::string toml_strings(const std::vector<std::string>& strings) {
  std::string out = "[";
  for (std::size_t i = 0; i < strings.size(); ++i) out += (i ? ", " : "") + toml_string(strings[i]);
  return out + "]";
}

// `key = value` of one schema field.
std::string toml_line(const Field& f, const Config& config) {
  const std::string value = f.kind == kNumberList   ? toml_list(f.get_list(config))
                            : f.kind == kStringList ? toml_strings(f.get_strings(config))
                                                    : toml_value(f.get(config));
  return toml_key(f.key) + " = " + value + "\n";
}

// The selector and the options of [encoding] or [task].
std::string toml_choice(const std::string& selector, const std::string& name,
                        const Options& options) {
  std::string out = selector + " = " + toml_string(name) + "\n";
  for (const auto& [key, value] : options.values())
    out += toml_key(key) + " = " + toml_value(value) + "\n";
  return out;
}

}  // namespace

void check_path_argument(const std::string& where, const std::string& path) {
  if (path.empty()) fail(where, "expected a path, got \"\"");
  if (has_control_character(path))
    fail(where, "a path may not hold control characters (NUL, line breaks), got " +
                    toml_string(path));
}

Config config_from_string(const std::string& toml_text, const std::string& source_name,
                          const ConfigChoices& choices, const std::vector<std::string>& overrides) {
  std::vector<Setting> settings = settings_from_toml(toml_text, source_name);
  for (const auto& o : overrides) settings.push_back(setting_from_override(o));
  return build_config(settings, source_name, choices);
}

Config load_config(const std::string& path, const ConfigChoices& choices,
                   const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, "config file not found");
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a config file");
  const std::optional<std::string> text = read_toml_file(path);
  if (!text) fail(path, "cannot read config file");
  return config_from_string(*text, path, choices, overrides);
}

std::string config_to_toml(const Config& config) {
  std::ostringstream out;
  out << "# poslab configuration, fully resolved: every key, defaults included.\n";
  for (const auto& f : schema())  // top-level keys must come before the first [section]
    if (f.section.empty()) out << toml_line(f, config);

  for (const auto& section : kSections) {
    out << "\n[" << section << "]\n";
    if (section == "encoding")
      out << toml_choice("type", config.encoding.type, config.encoding.options);
    if (section == "task") out << toml_choice("name", config.task.name, config.task.options);
    for (const auto& f : schema())
      if (f.section == section) out << toml_line(f, config);
  }
  return out.str();
}

namespace {

// A config as TOML, without what may differ between two runs of the same experiment: where it
// was written, how many threads computed it and how often it saved its training state.
std::string comparable_toml(Config config) {
  config.out_dir = "-";
  config.train.threads = 0;
  config.train.save_state_every = 0;
  return config_to_toml(config);
}

}  // namespace

std::string experiment_difference(const Config& made, const Config& planned) {
  std::istringstream a(comparable_toml(made)), b(comparable_toml(planned));
  std::string line_a, line_b, section;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a));
    const bool more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return "";
    if (!more_a) line_a = "(nothing)";
    if (!more_b) line_b = "(nothing)";
    if (line_a != line_b)
      return (section.empty() ? "" : "in " + section + ": ") + "the run has " + line_a +
             ", the study gives " + line_b;
    if (!line_a.empty() && line_a.front() == '[') section = line_a;
  }
}

std::vector<std::vector<std::string>> differing_settings(const std::vector<Config>& configs) {
  // Each config as [("section.key", "value")] in file order (config_to_toml writes one key per
  // line).
  std::vector<std::vector<std::pair<std::string, std::string>>> settings;
  for (const Config& config : configs) {
    std::istringstream text(comparable_toml(config));
    std::vector<std::pair<std::string, std::string>> pairs;
    std::string line, section;
    while (std::getline(text, line)) {
      if (line.empty() || line.front() == '#') continue;
      if (line.front() == '[') {
        section = line.substr(1, line.find(']') - 1) + ".";
        continue;
      }
      const std::size_t equals = line.find(" = ");
      if (equals == std::string::npos) continue;
      pairs.emplace_back(section + line.substr(0, equals), line.substr(equals + 3));
    }
    settings.push_back(std::move(pairs));
  }
  // Every key any config has (an encoding's options are written only for it), in order met.
  std::vector<std::string> keys;
  for (const auto& pairs : settings)
    for (const auto& pair : pairs)
      if (std::find(keys.begin(), keys.end(), pair.first) == keys.end()) keys.push_back(pair.first);
  std::vector<std::vector<std::string>> differing(configs.size());
  for (const std::string& key : keys) {
    std::vector<const std::string*> values;  // this key's value in each config, if it has it
    for (const auto& pairs : settings) {
      const auto it = std::find_if(pairs.begin(), pairs.end(),
                                   [&](const auto& pair) { return pair.first == key; });
      values.push_back(it == pairs.end() ? nullptr : &it->second);
    }
    const bool all_equal = std::all_of(values.begin(), values.end(), [&](const std::string* v) {
      return v && values[0] && *v == *values[0];
    });
    if (all_equal) continue;
    for (std::size_t i = 0; i < configs.size(); ++i)
      differing[i].push_back(key + " = " + (values[i] ? *values[i] : "(not set)"));
  }
  return differing;
}

}  // namespace poslab
