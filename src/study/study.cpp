// Reading a study file (study.hpp): TOML -> Study -> one resolved Config per run.
//
// The steps:
//   1. parse_study reads the tables of the file with toml++, checks their shape (a name, axes
//      that are non-empty lists, variants with unique names) and turns every value into TOML
//      text, because the config loader takes settings as text (`--set key=value`).
//   2. [base] is written back out as a standalone config file (base_toml), remembering for each
//      of its lines the study line it came from.
//   3. expand_study walks the grid x variants, and resolves every run with
//      config_from_string(base_toml, study file, the run's overrides). The loader's errors say
//      "FILE:LINE: ..." for base_toml and "--set key=value: ..." for overrides; explain_error
//      turns both back into a line of the study file and the axis or variant at fault.
#include "study/study.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <unistd.h>

#include <toml++/toml.h>

#include "config/load.hpp"
#include "config/toml_text.hpp"
#include "data/corpus.hpp"
#include "tasks/make_source.hpp"
#include "train/init_from.hpp"
#include "train/registered_choices.hpp"

namespace poslab {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void fail_at(const std::string& where, const std::string& what) {
  throw ConfigError(where + ": " + what);
}

// "study.toml:12", or just "study.toml" when toml++ knows no line.
std::string at_line(const std::string& source, std::size_t line) {
  return line ? source + ":" + std::to_string(line) : source;
}

std::size_t line_of(const toml::node& node) { return node.source().begin.line; }

std::string join_words(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) out += (i ? separator : "") + words[i];
  return out;
}

// ---------------------------------------------------------------------------------------------
// Values as TOML text
// ---------------------------------------------------------------------------------------------

// Any TOML value as TOML text on one line; tables become inline tables.
std::string toml_text(const toml::node& node) {
  std::ostringstream out;
  switch (node.type()) {
    case toml::node_type::string: return toml_string(node.as_string()->get());
    case toml::node_type::integer: return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: return toml_float(node.as_floating_point()->get());
    case toml::node_type::boolean: return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::date: out << node.as_date()->get(); return out.str();
    case toml::node_type::time: out << node.as_time()->get(); return out.str();
    case toml::node_type::date_time: out << node.as_date_time()->get(); return out.str();
    case toml::node_type::array: {
      std::vector<std::string> items;
      for (const toml::node& item : *node.as_array()) items.push_back(toml_text(item));
      return "[" + join_words(items, ", ") + "]";
    }
    case toml::node_type::table: {
      std::vector<std::string> items;
      for (auto&& [key, value] : *node.as_table())
        items.push_back(toml_key(std::string(key.str())) + " = " + toml_text(value));
      return items.empty() ? "{}" : "{ " + join_words(items, ", ") + " }";
    }
    default: return "";
  }
}

StudyValue study_value(const toml::node& node) {
  StudyValue v;
  v.toml = toml_text(node);
  v.text = node.is_string() ? node.as_string()->get() : v.toml;  // shaw, not "shaw"
  return v;
}

// ---------------------------------------------------------------------------------------------
// Tables in file order
// ---------------------------------------------------------------------------------------------

// One `key = value` of a table. toml++ keeps a table's keys sorted by name; studies are read
// in the order they were written (the first axis is the outermost loop).
struct Entry {
  std::string key;
  const toml::node* node;
  std::size_t line, column;
};

void sort_by_position(std::vector<Entry>& entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
}

std::vector<Entry> entries_of(const toml::table& table) {
  std::vector<Entry> entries;
  for (auto&& [key, node] : table)
    entries.push_back({std::string(key.str()), &node, node.source().begin.line,
                       node.source().begin.column});
  sort_by_position(entries);
  return entries;
}

// The leaves of a table of settings, nested tables opened up and their keys joined with '.':
// `"train.seed" = 1`, `train.seed = 1` and `[x.train] seed = 1` all give the key "train.seed".
void collect_leaves(const toml::table& table, const std::string& prefix, std::vector<Entry>& out) {
  for (auto&& [key, node] : table) {
    const std::string name = prefix + std::string(key.str());
    if (node.is_table())
      collect_leaves(*node.as_table(), name + ".", out);
    else
      out.push_back({name, &node, node.source().begin.line, node.source().begin.column});
  }
}

std::vector<Entry> leaves_of(const toml::table& table) {
  std::vector<Entry> leaves;
  collect_leaves(table, "", leaves);
  sort_by_position(leaves);
  return leaves;
}

// ---------------------------------------------------------------------------------------------
// Checks on names and keys
// ---------------------------------------------------------------------------------------------

// Letters, digits, '_', '-' and '.', not starting with '.': safe as a directory name anywhere.
bool is_plain_name(const std::string& name) {
  return !name.empty() && name[0] != '.' &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '_' || c == '-' || c == '.';
         });
}

// A key of [sweep], [smoke] or a variant's `set`: a config key such as "encoding.term_a".
void check_setting_key(const std::string& source, const Entry& e, const std::string& table) {
  if (!is_plain_name(e.key) || e.key.back() == '.')
    fail_at(at_line(source, e.line), table + ": '" + e.key +
                                      "' is not a config key (write section.key, e.g. "
                                      "\"train.seed\")");
  if (e.key == "out_dir")
    fail_at(at_line(source, e.line),
         table + ": out_dir cannot be set here: the runner gives every run its own directory "
                 "(results/<study>/runs/<run>)");
  if (e.node->is_array_of_tables())
    fail_at(at_line(source, e.line), table + ": '" + e.key + "' is not a config value");
  if (e.key == "train.init_from")
    fail_at(at_line(source, e.line),
         table + ": train.init_from cannot be set here: a run that starts from another run of "
                 "the study is a [[variant]] with from = \"VARIANT\" (the runner sets "
                 "train.init_from to that run's directory)");
}

// Duplicate keys can only come from writing one key two ways ("train.seed" and train.seed).
void check_unique_keys(const std::string& source, const std::vector<Entry>& entries,
                       const std::string& table) {
  std::set<std::string> seen;
  for (const Entry& e : entries)
    if (!seen.insert(e.key).second)
      fail_at(at_line(source, e.line), table + ": '" + e.key + "' is set twice");
}

// ---------------------------------------------------------------------------------------------
// The tables of a study file
// ---------------------------------------------------------------------------------------------

const std::vector<std::string> kStudyTables = {"study", "base", "sweep", "variant", "smoke",
                                               "slurm"};

void read_study_table(const toml::node* node, Study& study) {
  if (!node) fail_at(study.source, "missing [study] table: a study needs [study] name = \"...\"");
  if (!node->is_table())
    fail_at(at_line(study.source, line_of(*node)), "'study' must be a table: [study]");
  for (const Entry& e : entries_of(*node->as_table())) {
    if (e.key != "name" && e.key != "description")
      fail_at(at_line(study.source, e.line),
           "unknown key 'study." + e.key + "'; [study] has name and description");
    if (!e.node->is_string())
      fail_at(at_line(study.source, e.line), "study." + e.key + " must be a string");
    (e.key == "name" ? study.name : study.description) = e.node->as_string()->get();
  }
  const std::string where = at_line(study.source, line_of(*node));
  if (study.name.empty())
    fail_at(where, "[study] needs a name: name = \"...\" (results go to results/<name>/)");
  if (!is_plain_name(study.name))
    fail_at(where, "study.name '" + study.name +
                    "' must be a plain directory name (letters, digits, '_', '-', '.')");
}

// A text and, for each of its lines, the study line it came from.
struct TextWithLines {
  std::string text;
  std::vector<std::size_t> lines;
  void add(const std::string& line, std::size_t source_line) {
    text += line + "\n";
    lines.push_back(source_line);
  }
};

// [base] -> a config file: its plain keys (out_dir) first, then one [section] per sub-table.
// Anything deeper is written as an inline table, for the loader to accept or reject.
void read_base_table(const toml::node* node, Study& study) {
  if (!node) return;  // no [base]: every default
  if (!node->is_table())
    fail_at(at_line(study.source, line_of(*node)), "'base' must be a table: [base]");
  const std::vector<Entry> entries = entries_of(*node->as_table());
  TextWithLines out;
  for (const Entry& e : entries)
    if (!e.node->is_table()) out.add(toml_key(e.key) + " = " + toml_text(*e.node), e.line);
  for (const Entry& e : entries) {
    if (!e.node->is_table()) continue;
    const std::vector<Entry> keys = entries_of(*e.node->as_table());
    // A table made only by dotted keys (base.model.d_model = 1) has no header line of its own.
    const std::size_t header_line = e.line ? e.line : (keys.empty() ? 0 : keys.front().line);
    std::string header = "[";  // (built piece by piece: g++ 12 warns falsely on "[" + s + "]")
    header += toml_key(e.key);
    header += "]";
    out.add(header, header_line);
    for (const Entry& k : keys) {
      out.add(toml_key(k.key) + " = " + toml_text(*k.node), k.line);
      study.base_key_lines[e.key + "." + k.key] = k.line ? k.line : header_line;
    }
  }
  study.base_toml = out.text;
  study.base_lines = out.lines;
}

void read_sweep_table(const toml::node* node, Study& study) {
  if (!node) return;
  if (!node->is_table())
    fail_at(at_line(study.source, line_of(*node)), "'sweep' must be a table: [sweep]");
  const std::vector<Entry> leaves = leaves_of(*node->as_table());
  check_unique_keys(study.source, leaves, "[sweep]");
  for (const Entry& e : leaves) {
    const std::string where = at_line(study.source, e.line);
    check_setting_key(study.source, e, "[sweep]");
    if (!e.node->is_array())
      fail_at(where, "[sweep] axis '" + e.key + "' must be a list of values, e.g. \"" + e.key +
                      "\" = [" + toml_text(*e.node) + ", ...]");
    SweepAxis axis{e.key, {}, e.line};
    std::set<std::string> seen;
    for (const toml::node& value : *e.node->as_array()) {
      axis.values.push_back(study_value(value));
      if (!seen.insert(axis.values.back().toml).second)
        fail_at(where, "[sweep] axis '" + e.key + "' lists the value " + axis.values.back().toml +
                        " twice");
    }
    if (axis.values.empty())
      fail_at(where, "[sweep] axis '" + e.key + "' is empty: an axis needs at least one value "
                  "(remove it to keep [base]'s value)");
    study.axes.push_back(std::move(axis));
  }
}

std::vector<StudySetting> read_settings(const toml::table& table, const std::string& what,
                                        const std::string& source) {
  const std::vector<Entry> leaves = leaves_of(table);
  check_unique_keys(source, leaves, what);
  std::vector<StudySetting> settings;
  for (const Entry& e : leaves) {
    check_setting_key(source, e, what);
    settings.push_back({e.key, study_value(*e.node), e.line});
  }
  return settings;
}

// Nearest name for a did-you-mean: the candidate with the smallest edit distance (Levenshtein),
// if it is within a third of the word's length (at least 2).
std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& name : names) {
    std::vector<std::size_t> row(name.size() + 1);
    for (std::size_t j = 0; j <= name.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= name.size(); ++j) {
        const std::size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (word[i - 1] != name[j - 1])});
        diagonal = above;
      }
    }
    if (row[name.size()] < best_distance) best = name, best_distance = row[name.size()];
  }
  return best_distance <= std::max<std::size_t>(2, word.size() / 3) ? best : "";
}

// Every `from` names a variant of the study, and following them never comes back to where it
// started (a cycle would have no run to train first).
void check_stages(const Study& study) {
  std::map<std::string, const Variant*> by_name;
  std::vector<std::string> names;
  for (const Variant& v : study.variants) by_name[v.name] = &v, names.push_back(v.name);
  for (const Variant& v : study.variants) {
    if (v.from.empty()) continue;
    const std::string where = at_line(study.source, v.from_line);
    if (v.from == v.name)
      fail_at(where, "variant '" + v.name + "' has from = \"" + v.from +
                      "\": a variant cannot start from its own runs");
    if (!by_name.count(v.from)) {
      const std::string near = nearest_name(v.from, names);
      fail_at(where, "variant '" + v.name + "' has from = \"" + v.from + "\", which is not a " +
                      "variant of this study" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                      "; its variants are: " + join_words(names, ", ") +
                      "; to start from a run outside this study, give its directory as "
                      "train.init_from in [base.train] (docs/06, \"Studies in stages\")");
    }
    // Follow the parents up: back at v is a cycle through v; a name seen twice is a cycle
    // further up (reported from its own variants); an unknown name is reported on its line.
    std::vector<std::string> chain = {v.name};
    std::set<std::string> seen = {v.name};
    for (const Variant* at = &v; !at->from.empty();) {
      const auto next = by_name.find(at->from);
      if (next == by_name.end()) break;
      at = next->second;
      chain.push_back(at->name);
      if (at->name == v.name)
        fail_at(where, "variants start from each other in a cycle: " + join_words(chain, " from ") +
                        "; one of them must start from scratch (no from)");
      if (!seen.insert(at->name).second) break;
    }
  }
}

void read_variants(const toml::node* node, Study& study) {
  if (!node) return;
  if (!node->is_array_of_tables())
    fail_at(at_line(study.source, line_of(*node)),
         "variants are written [[variant]] (one such table per variant), each with a name and "
         "a set = { ... } of overrides");
  std::set<std::string> names;
  for (const toml::node& item : *node->as_array()) {
    const std::size_t line = line_of(item);
    const std::string where = at_line(study.source, line);
    Variant variant{"", {}, line};
    for (const Entry& e : entries_of(*item.as_table())) {
      if (e.key == "name") {
        if (!e.node->is_string())
          fail_at(at_line(study.source, e.line), "variant name must be a string");
        variant.name = e.node->as_string()->get();
      } else if (e.key == "set") {
        if (!e.node->is_table())
          fail_at(at_line(study.source, e.line),
               "variant 'set' must be a table: set = { \"encoding.term_a\" = false }");
        variant.set = read_settings(*e.node->as_table(),
                                    "variant '" + variant.name + "' set", study.source);
      } else if (e.key == "from") {
        if (!e.node->is_string())
          fail_at(at_line(study.source, e.line),
               "variant 'from' must be a string: the name of the variant whose runs this one "
               "starts from");
        variant.from = e.node->as_string()->get();
        variant.from_line = e.line;
        if (variant.from.empty())
          fail_at(at_line(study.source, e.line),
               "variant 'from' is empty: name the variant whose runs this one starts from, or "
               "leave 'from' out to train from scratch");
      } else {
        fail_at(at_line(study.source, e.line),
             "unknown key '" + e.key + "' in [[variant]]; a variant has name, set and from");
      }
    }
    if (variant.name.empty()) fail_at(where, "[[variant]] needs a name: name = \"...\"");
    if (!is_plain_name(variant.name))
      fail_at(where, "variant name '" + variant.name +
                      "' must be a plain name (letters, digits, '_', '-', '.'): it names "
                      "directories");
    if (!names.insert(variant.name).second)
      fail_at(where, "duplicate variant name '" + variant.name + "'");
    for (const StudySetting& s : variant.set)
      for (const SweepAxis& axis : study.axes)
        if (s.key == axis.key)
          fail_at(at_line(study.source, s.line),
               "variant '" + variant.name + "' sets '" + s.key +
                   "', which is also a [sweep] axis; a run can take it from only one of them");
    study.variants.push_back(std::move(variant));
  }
  check_stages(study);
}

void read_smoke_table(const toml::node* node, Study& study) {
  if (!node) return;
  if (!node->is_table())
    fail_at(at_line(study.source, line_of(*node)), "'smoke' must be a table: [smoke]");
  study.smoke = read_settings(*node->as_table(), "[smoke]", study.source);
}

// A word that goes into an #SBATCH line: no whitespace or control character, which would end
// the option or the line, and not empty.
bool is_sbatch_word(const std::string& text) {
  return !text.empty() && std::none_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isspace(c) || std::iscntrl(c);
  });
}

void read_slurm_table(const toml::node* node, Study& study) {
  if (!node) return;
  if (!node->is_table())
    fail_at(at_line(study.source, line_of(*node)), "'slurm' must be a table: [slurm]");
  SlurmOptions& slurm = study.slurm;
  const std::string keys = "partition, account, time, mem, cpus_per_task, array_throttle, "
                           "max_array_size and extra";
  for (const Entry& e : entries_of(*node->as_table())) {
    const std::string where = at_line(study.source, e.line), key = "slurm." + e.key;
    std::string* text = e.key == "partition" ? &slurm.partition
                        : e.key == "account" ? &slurm.account
                        : e.key == "time"    ? &slurm.time
                        : e.key == "mem"     ? &slurm.mem
                                             : nullptr;
    int* number = e.key == "cpus_per_task"    ? &slurm.cpus_per_task
                  : e.key == "array_throttle" ? &slurm.array_throttle
                  : e.key == "max_array_size" ? &slurm.max_array_size
                                              : nullptr;
    if (text) {
      if (!e.node->is_string() || !is_sbatch_word(e.node->as_string()->get()))
        fail_at(where, key + " must be a non-empty string without spaces (it becomes an #SBATCH "
                          "option)");
      *text = e.node->as_string()->get();
    } else if (number) {
      if (!e.node->is_integer() || e.node->as_integer()->get() < 1 ||
          e.node->as_integer()->get() > 1000000)
        fail_at(where, key + " must be a whole number from 1 to 1000000");
      *number = static_cast<int>(e.node->as_integer()->get());
    } else if (e.key == "extra") {
      if (!e.node->is_array()) fail_at(where, key + " must be a list of strings: [\"--qos=short\"]");
      for (const toml::node& item : *e.node->as_array()) {
        if (!item.is_string() || !is_sbatch_word(item.as_string()->get()) ||
            item.as_string()->get().rfind("--", 0) != 0)
          fail_at(at_line(study.source, line_of(item)),
               key + ": each item is one sbatch option without spaces, starting with --: "
                     "\"--qos=short\"");
        slurm.extra.push_back(item.as_string()->get());
      }
    } else {
      fail_at(where, "unknown key '" + key + "'; [slurm] has " + keys);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Expansion: the runs and their configs
// ---------------------------------------------------------------------------------------------

// One override of a run, and where it came from in the study file.
struct AppliedSetting {
  std::string text;    // "train.seed=2"
  std::size_t line;
  std::string origin;  // "in [sweep] axis 'train.seed'"
};

// The loader reports "--set key=value: what" for an override and "FILE:N: what" for line N of
// base_toml. Both become "FILE:LINE: in <origin>: what (while resolving run 'ID')".
std::string explain_error(const Study& study, const std::vector<AppliedSetting>& applied,
                          const std::string& run_id, const std::string& message) {
  const std::string context = " (while resolving run '" + run_id + "')";
  for (const AppliedSetting& a : applied) {
    const std::string prefix = "--set " + a.text + ": ";
    if (message.rfind(prefix, 0) == 0)
      return at_line(study.source, a.line) + ": " + a.origin + ": " +
             message.substr(prefix.size()) + context;
  }
  const std::string file_prefix = study.source + ":";
  if (message.rfind(file_prefix, 0) == 0) {
    std::size_t n = 0;
    const char* first = message.data() + file_prefix.size();
    const char* last = message.data() + message.size();
    const auto [end, error] = std::from_chars(first, last, n);
    if (error == std::errc() && end != last && *end == ':' && n >= 1 &&
        n <= study.base_lines.size())
      return at_line(study.source, study.base_lines[n - 1]) + ": in [base]" +
             std::string(end, last) + context;
  }
  return message + context;
}

Config resolve_run(const Study& study, const std::vector<AppliedSetting>& applied,
                   const std::string& run_id) {
  std::vector<std::string> overrides;
  for (const AppliedSetting& a : applied) overrides.push_back(a.text);
  try {
    return config_from_string(study.base_toml, study.source, registered_choices(), overrides);
  } catch (const ConfigError& e) {
    throw ConfigError(explain_error(study, applied, run_id, e.what()));
  }
}

// Letters, digits and . _ + - stay; anything else becomes '_'.
std::string filesystem_safe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '.' || c == '_' || c == '+' || c == '-')) c = '_';
  }
  return out;
}

// File names are limited to 255 bytes: a long name keeps its beginning and gains a hash of
// the whole, so that it stays unique and the same from one invocation to the next.
std::string shorten(const std::string& name) {
  constexpr std::size_t kMax = 200;
  if (name.size() <= kMax) return name;
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return name.substr(0, kMax - 17) + "-" + hex;
}

}  // namespace

Study parse_study(const std::string& toml_text, const std::string& source_name) {
  if (const TomlLimitProblem p = toml_limit_problem(toml_text); !p.what.empty())
    fail_at(at_line(source_name, p.line), p.what);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    fail_at(at_line(source_name, e.source().begin.line),
         "TOML syntax error: " + std::string(e.description()));
  }
  Study study;
  study.source = source_name;
  for (const Entry& e : entries_of(root)) {
    if (std::find(kStudyTables.begin(), kStudyTables.end(), e.key) != kStudyTables.end()) continue;
    const std::string what = e.node->is_table() ? "table [" + e.key + "]" : "key '" + e.key + "'";
    fail_at(at_line(source_name, e.line),
         "unknown " + what +
             "; a study file has the tables [study], [base], [sweep], [[variant]], [smoke] and "
             "[slurm]");
  }
  read_study_table(root.get("study"), study);
  read_base_table(root.get("base"), study);
  read_sweep_table(root.get("sweep"), study);
  read_variants(root.get("variant"), study);  // after [sweep]: a variant may not set an axis
  read_smoke_table(root.get("smoke"), study);
  read_slurm_table(root.get("slurm"), study);
  return study;
}

Study load_study(const std::string& path) {
  const std::optional<std::string> text = read_toml_file(path);
  if (!text) fail_at(path, "cannot read the study file");
  return parse_study(*text, path);
}

std::vector<PlannedRun> expand_study(const Study& study, bool smoke,
                                     const std::vector<std::string>& command_line) {
  std::vector<AppliedSetting> smoke_settings, command_line_settings;
  for (const StudySetting& s : study.smoke)
    smoke_settings.push_back({s.override_text(), s.line, "in [smoke]"});
  for (const std::string& text : command_line)
    command_line_settings.push_back({text, 0, "in --set " + text + " (poslab run)"});

  // The smoke version keeps the first two values of a train.seed axis: seeds change no code
  // path, and two still give every interval and paired difference `poslab plot` draws. (The
  // other axes are the comparison itself; they are kept whole.) About a third of CI's study
  // smokes' time, for studies of three or four seeds.
  std::vector<SweepAxis> axes = study.axes;
  if (smoke)
    for (SweepAxis& axis : axes)
      if (axis.key == "train.seed" && axis.values.size() > kSmokeSeeds)
        axis.values.resize(kSmokeSeeds);

  // No variant is the same as one unnamed variant that sets nothing.
  std::vector<const Variant*> variants;
  for (const Variant& v : study.variants) variants.push_back(&v);
  if (variants.empty()) variants.push_back(nullptr);

  // The number of runs, computed without overflow (16 axes of 16 values would wrap to 0) and
  // bounded: each run is a directory and a line of the Slurm command list.
  constexpr std::size_t kMaxRuns = 100000;
  std::size_t grid_size = 1;
  std::string sizes;
  for (const SweepAxis& axis : axes) {
    sizes += (sizes.empty() ? "" : " x ") + std::to_string(axis.values.size());
    if (axis.values.size() > kMaxRuns / grid_size)
      fail_at(study.source, "the sweep has more than " + std::to_string(kMaxRuns) + " runs (" +
                             sizes + "...); a study may have at most " + std::to_string(kMaxRuns));
    grid_size *= axis.values.size();
  }
  if (grid_size * variants.size() > kMaxRuns)
    fail_at(study.source, "the study has " + std::to_string(grid_size) + " grid points x " +
                           std::to_string(variants.size()) + " variants, more than " +
                           std::to_string(kMaxRuns) + " runs");

  auto variant_named = [&study](const std::string& name) -> const Variant* {
    for (const Variant& v : study.variants)
      if (v.name == name) return &v;
    return nullptr;  // not reached: parse_study checked every `from`
  };
  auto index_of_variant = [&study](const std::string& name) {
    for (std::size_t i = 0; i < study.variants.size(); ++i)
      if (study.variants[i].name == name) return i;
    return std::size_t(0);
  };

  std::vector<PlannedRun> runs;
  std::map<std::string, std::string> id_of_dir;  // to catch two runs sharing a directory
  for (const Variant* variant : variants) {
    // `choice[a]` is the index of axis a's value; the last axis turns fastest (an odometer).
    std::vector<std::size_t> choice(axes.size(), 0);
    for (std::size_t point = 0; point < grid_size; ++point) {
      PlannedRun run;
      std::vector<std::string> id_parts, dir_parts;
      std::vector<AppliedSetting> applied;
      if (variant) {
        run.variant = variant->name;
        id_parts.push_back(variant->name);
        dir_parts.push_back(variant->name);
      }
      for (std::size_t a = 0; a < axes.size(); ++a) {
        const SweepAxis& axis = axes[a];
        const StudyValue& value = axis.values[choice[a]];
        run.sweep_values[axis.key] = value.text;
        id_parts.push_back(axis.key + "=" + value.text);
        dir_parts.push_back(axis.key + "-" + filesystem_safe(value.text));
        applied.push_back({axis.key + "=" + value.toml, axis.line,
                           "in [sweep] axis '" + axis.key + "' = " + value.toml});
      }
      // A later stage: its ancestors' `set`, the first stage's first, then its own.
      std::vector<const Variant*> lineage;
      for (const Variant* v = variant; v; v = v->from.empty() ? nullptr : variant_named(v->from))
        lineage.insert(lineage.begin(), v);
      for (const Variant* v : lineage)
        for (const StudySetting& s : v->set)
          applied.push_back({s.override_text(), s.line,
                             "in variant '" + v->name + "'" +
                                 (v == variant ? "" : " (inherited by '" + variant->name + "')")});

      run.id = id_parts.empty() ? "base" : join_words(id_parts, ",");
      run.dir_name = shorten(dir_parts.empty() ? "base" : join_words(dir_parts, "__"));
      if (variant && !variant->from.empty()) {
        // The parent: the run of variant `from` at this grid point; same id and directory but
        // for the variant's name (the first part of both).
        id_parts[0] = dir_parts[0] = variant->from;
        run.parent_id = join_words(id_parts, ",");
        run.parent = index_of_variant(variant->from) * grid_size + point;
        run.stage = int(lineage.size()) - 1;
        const std::string parent_dir = shorten(join_words(dir_parts, "__"));
        applied.push_back({"train.init_from=" + toml_string("runs/" + parent_dir),
                           variant->from_line,
                           "in variant '" + variant->name + "' (from = \"" + variant->from + "\")"});
      }
      if (auto [it, fresh] = id_of_dir.emplace(run.dir_name, run.id); !fresh)
        fail_at(study.source, "runs '" + it->second + "' and '" + run.id +
                               "' would share the directory '" + run.dir_name +
                               "'; make their values differ in letters or digits");

      // Resolve with [smoke] too, whether or not it is asked for: --smoke must never be the
      // first to find a mistake in it.
      std::vector<AppliedSetting> with_smoke = applied;
      with_smoke.insert(with_smoke.end(), smoke_settings.begin(), smoke_settings.end());
      // --set of `poslab run` comes last: the one word a user gives on the command line wins.
      applied.insert(applied.end(), command_line_settings.begin(), command_line_settings.end());
      const Config plain = resolve_run(study, applied, run.id);
      // A run of no steps (a zero-shot read of its parent, train.steps = 0) stays one in the
      // smoke version: [smoke]'s train.steps shrinks training, it must not start some.
      if (plain.train.steps == 0 && !smoke_settings.empty())
        with_smoke.push_back({"train.steps=0", 0,
                              "kept at 0 under [smoke]: run '" + run.id + "' trains no step"});
      with_smoke.insert(with_smoke.end(), command_line_settings.begin(),
                        command_line_settings.end());
      const Config smoked = resolve_run(study, with_smoke, run.id);
      run.config = smoke ? smoked : plain;
      for (const AppliedSetting& a : smoke ? with_smoke : applied) {
        run.overrides.push_back(a.text);
        const std::string key = a.text.substr(0, a.text.find('='));
        run.set_where[key] = a.line ? at_line(study.source, a.line) + ": " + a.origin : a.origin;
      }
      runs.push_back(std::move(run));

      for (std::size_t a = axes.size(); a-- > 0;) {  // next grid point
        if (++choice[a] < axes[a].values.size()) break;
        choice[a] = 0;
      }
    }
  }
  // Every child can start from its parent as both will be built: the same parameters, names
  // and shapes (train/init_from.hpp). Found here, not after the parents have trained.
  for (const PlannedRun& run : runs) {
    if (run.parent == PlannedRun::kNoParent) continue;
    const Variant* variant = variant_named(run.variant);
    try {
      check_same_parameters(runs[run.parent].config, run.config);
    } catch (const InitFromError& e) {
      fail_at(at_line(study.source, variant->from_line),
           "variant '" + variant->name + "' (from = \"" + variant->from + "\"): run '" + run.id +
               "' cannot start from run '" + run.parent_id + "': " + e.what() +
               " (checked before any run starts, nothing was written)");
    }
  }
  return runs;
}

void check_run_inputs(const Study& study, const PlannedRun& run) {
  if (run.config.task.name != "lm") return;  // a generated task reads no file
  // Where a key of this run was set: a variant, [sweep] or --set, else [base], else `unset`.
  auto where_set = [&](const std::string& key, const std::string& unset) {
    if (const auto set = run.set_where.find(key); set != run.set_where.end()) return set->second;
    if (const auto base = study.base_key_lines.find(key); base != study.base_key_lines.end())
      return at_line(study.source, base->second) + ": in [base]";
    return unset;
  };
  const std::string key = "data.path", path = run.config.data.path;
  const std::string where = where_set(key, study.source + ": not set (the default)");

  // What read_documents (data/corpus.cpp) needs: a file it can read, or a directory it can list.
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  std::string problem;
  if (path.empty()) problem = "is empty: name a text file or a directory of text files";
  else if (!fs::exists(status)) problem = "does not exist";
  else if (fs::is_directory(status)) {
    if (::access(path.c_str(), R_OK | X_OK) != 0) problem = "is a directory this user cannot read";
  } else if (!fs::is_regular_file(status)) problem = "is neither a file nor a directory";
  else if (::access(path.c_str(), R_OK) != 0) problem = "is a file this user cannot read";
  if (problem.empty() && fs::is_directory(status)) {
    // A directory whose files data.include / data.exclude all leave out: listed, not read.
    try {
      check_corpus_lists_files(path, CorpusFilter{run.config.data.include,
                                                  run.config.data.exclude});
    } catch (const std::runtime_error& e) {
      const std::string patterns_where =
          where_set(run.config.data.include.empty() ? "data.exclude" : "data.include", where);
      fail_at(patterns_where, std::string(e.what()) + " (the corpus of run '" + run.id +
                               "', data.path set at " + where +
                               "; checked before any run starts, nothing was written)");
    }
  }
  if (!problem.empty())
    fail_at(where, key + " = " + toml_string(path) + ": " + problem + " (the corpus of run '" +
                    run.id + "'; checked before any run starts, nothing was written)");
  // The stream of the streaming evaluation must fit in its split: `poslab train` checks it when
  // the run starts, which for a later stage is after its parents trained (issue 51).
  if (run.config.eval.stream_length > 0) {
    const Split split = run.config.eval.split == "test" ? Split::test : Split::valid;
    std::size_t tokens = 0;
    try {
      tokens = corpus_split_tokens(run.config, split)->size();
    } catch (const std::exception&) {
      return;  // a corpus without that split: the run's own start says so, as before
    }
    if (std::int64_t(tokens) < run.config.eval.stream_length)
      fail_at(where_set("eval.stream_length", study.source + ": not set"),
              "eval.stream_length = " + std::to_string(run.config.eval.stream_length) +
                  " is longer than the " + run.config.eval.split + " split (eval.split) of " +
                  key + " = " + toml_string(path) + ", which holds " + std::to_string(tokens) +
                  " tokens (run '" + run.id + "'; checked before any run starts, nothing was "
                  "written)");
  }
}

}  // namespace poslab
