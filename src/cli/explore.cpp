// `poslab explore RUN [RUN...]`: the attention explorer, a web page that opens from disk and
// shows what trained models do with positions, computed by poslab and only drawn by the page.
// What it shows is computed in eval/ (attention_maps.hpp: steps 1-3 below; positional_terms.hpp:
// the positional part of the score); this file loads the runs, chooses the texts, and writes
// the page's data and files.
//
//   poslab explore runs/sinusoidal runs/alibi --out runs/explorer
//
// For every run (a finished `poslab train` of a language model) and every text (four windows of
// the first run's test split, and --text FILE if given), at each length factor f (1, 2, 4, 8 x
// the run's training length T = train.seq_len):
//   1. The M = memory.mem_len bytes before the input go through the model first (filling its
//      memory), then the input, L = f T bytes, as one segment (the same two passes as
//      `poslab attention`).
//   2. The attention weights of every layer and head, pooled into blocks of at most 128 x 128
//      (the mass a block of queries gives a block of keys), one byte per block.
//   3. The loss of every input token (the model's cross-entropy on the next byte).
// And per run, once: the positional part of the score against the distance i - j, per layer and
// head, as far as the encoding exposes it. Losses and positional terms are stored to 4
// significant digits.
//
// Output (--out, default explorer/): index.html, lib/ (web/vendor, page.js, explore.js,
// poslab.css), data/index.js (runs, texts, what was computed; per run the settings in which the
// runs' configs differ, config/differences.hpp, which head the run's column) and
// data/r{run}_t{text}_f{factor}.js (one setting each; the page loads them as scripts when they
// are shown: a page opened from file:// may not fetch files, but may load scripts). Written into
// a staging directory beside --out and swapped into place at the end; what --out may be is
// core/site_directory.hpp's rule.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/byte_labels.hpp"
#include "cli/commands.hpp"
#include "config/differences.hpp"
#include "config/load.hpp"
#include "core/site_directory.hpp"
#include "data/corpus.hpp"
#include "encodings/rope_scaling.hpp"
#include "eval/attention_maps.hpp"
#include "eval/positional_terms.hpp"
#include "model/transformer.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct LoadedRun {
  std::string path;
  Config cfg;
  std::unique_ptr<TransformerLM<float>> model;
};

struct Text {
  std::string name;    // "test split @ 123456" or the --text file's name
  std::string source;  // where it came from
  std::vector<std::int32_t> tokens;
};

LoadedRun load_run(const std::string& path) {
  RunDirectory run = RunDirectory::open(path);
  LoadedRun loaded{path, load_config(run.file("config.toml").string(), registered_choices()), {}};
  require_checkpoint(run.path(), path);
  if (loaded.cfg.task.name != "lm")
    throw std::runtime_error(path + ": task '" + loaded.cfg.task.name +
                             "': the explorer shows language models (task.name = \"lm\") only");
  loaded.model = std::make_unique<TransformerLM<float>>(loaded.cfg.model, loaded.cfg.encoding,
                                                        loaded.cfg.memory);
  load_checkpoint(run.path(), loaded.model->arena());
  return loaded;
}

std::string base64(const std::vector<std::uint8_t>& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint32_t(bytes[i]) << 16) |
                            (i + 1 < bytes.size() ? std::uint32_t(bytes[i + 1]) << 8 : 0) |
                            (i + 2 < bytes.size() ? std::uint32_t(bytes[i + 2]) : 0);
    out += digits[(n >> 18) & 63];
    out += digits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? digits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? digits[n & 63] : '=';
  }
  return out;
}

// x to 4 significant digits: the double nearest to that decimal, which the JSON writer prints
// as the short decimal ("2.828", not the float's 2.828000068664551).
double rounded(double x) {
  if (!std::isfinite(x)) return x;
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return std::strtod(text, nullptr);
}

std::vector<std::string> labels(const std::int32_t* tokens, int n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.push_back(byte_label(static_cast<unsigned char>(tokens[i])));
  return out;
}

// `count` windows of `length` bytes spread evenly over the first run's test split (its
// validation split if it has no test split: neither was trained on).
std::vector<Text> split_windows(const Config& cfg, int count, std::size_t length) {
  std::vector<Text> texts;
  const CorpusSplit split = load_corpus(cfg.data);
  const bool has_test = !split.test.empty();
  const std::vector<std::int32_t>& test = has_test ? split.test : split.valid;
  const std::string split_name = has_test ? "test" : "validation";
  if (test.size() < length)
    throw std::runtime_error("the " + split_name + " split of " + cfg.data.path + " has " +
                             std::to_string(test.size()) + " bytes; the explorer needs " +
                             std::to_string(length) + " per text (memory + longest factor x "
                             "seq_len + 1)");
  for (int t = 0; t < count; ++t) {
    const std::size_t start =
        count == 1 ? 0 : (test.size() - length) * std::size_t(t) / std::size_t(count - 1);
    texts.push_back({split_name + " split, byte " + std::to_string(start),
                     cfg.data.path + " (" + split_name + " split)",
                     std::vector<std::int32_t>(test.begin() + start,
                                               test.begin() + start + length)});
  }
  return texts;
}

// The texts: the split's windows (split_windows), then the --text file (whole, however long).
std::vector<Text> choose_texts(const Config& cfg, int count, std::size_t length,
                               const std::string& text_file) {
  std::vector<Text> texts;
  if (count > 0) texts = split_windows(cfg, count, length);
  if (!text_file.empty()) {
    std::ifstream in(text_file, std::ios::binary);
    if (!in) throw std::runtime_error("--text: cannot read " + text_file);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string s = bytes.str();
    if (s.size() < 2) throw std::runtime_error("--text " + text_file + ": needs at least 2 bytes");
    Text text{fs::path(text_file).filename().string(), text_file, {}};
    for (unsigned char c : s) text.tokens.push_back(c);
    texts.push_back(std::move(text));
  }
  return texts;
}

// The positional terms (eval/positional_terms.hpp) as the page reads them.
json positional_json(LoadedRun& run, int max_distance) {
  const PositionalTerms terms = positional_terms(*run.model, run.cfg.encoding, max_distance);
  if (terms.kind == "none") return {{"kind", terms.kind}, {"note", terms.note}};
  json layers = json::array();
  for (const auto& heads : terms.layers) {
    json by_head = json::array();
    for (const auto& by_distance : heads) {
      json values = json::array();
      for (float v : by_distance) values.push_back(rounded(v));
      by_head.push_back(values);
    }
    layers.push_back(by_head);
  }
  return {{"kind", terms.kind}, {"note", terms.note}, {"layers", layers}};
}

// One setting: run r on text t at length factor f (eval/attention_maps.hpp), as the page's
// data. Throws if the model cannot take the input (e.g. a learned table shorter than L).
json explore_one(LoadedRun& run, const Text& text, int factor) {
  const int M = run.cfg.memory.mem_len, L = factor * run.cfg.train.seq_len;
  const PooledAttention pooled = pooled_attention(*run.model, text.tokens.data(), M, L);
  json maps = json::array();
  for (const auto& heads : pooled.maps) {
    json by_head = json::array();
    for (const auto& bytes : heads) by_head.push_back(base64(bytes));
    maps.push_back(by_head);
  }
  json losses = json::array();
  for (float loss : pooled.token_loss) losses.push_back(rounded(loss));
  const std::int32_t* memory = text.tokens.data();
  return {{"factor", factor}, {"L", L}, {"memory_rows", pooled.memory_rows},
          {"block", pooled.block}, {"rows", pooled.rows}, {"cols", pooled.cols},
          {"maps", maps}, {"loss", losses},
          {"memory", labels(memory, pooled.memory_rows)}, {"input", labels(memory + M, L + 1)}};
}

// "r{run}_t{text}_f{factor}": a setting's name and data file.
std::string setting_key(std::size_t run, std::size_t text, int factor) {
  std::ostringstream key;
  key << "r" << run << "_t" << text << "_f" << factor;
  return key.str();
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

std::string js_value(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Bad options, before any work (nothing is made yet).
void check_options(const ExploreOptions& options) {
  if (options.runs.empty()) throw std::runtime_error("poslab explore: name at least one run");
  if (options.texts < 0) throw std::runtime_error("--texts must be >= 0");
  if (options.texts == 0 && options.text_file.empty())
    throw std::runtime_error("--texts 0 needs --text FILE: there would be nothing to show");
}

// What sets each run apart (its column's header): "encoding.scaling = "yarn"", ... A rope
// scaling's options are listed only for the runs whose scaling reads them (issue 51: a run of
// scaling none was listed with "encoding.group_size = 8, encoding.neighbor_window = 1024",
// the defaults of Self-Extend's options, beside a Self-Extend run).
std::vector<std::vector<std::string>> run_differences(const std::vector<LoadedRun>& runs) {
  std::vector<Config> configs;
  for (const LoadedRun& r : runs) configs.push_back(r.cfg);
  std::vector<std::vector<std::string>> differs = differing_settings(configs);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Options& o = runs[r].cfg.encoding.options;
    if (!o.has("scaling")) continue;
    std::erase_if(differs[r], [&](const std::string& setting) {
      const std::string prefix = "encoding.";
      if (setting.rfind(prefix, 0) != 0) return false;
      const std::string key = setting.substr(prefix.size(), setting.find(" = ") - prefix.size());
      return o.has(key) && !rope_scaling_option_matters(o.get_string("scaling"), key);
    });
  }
  return differs;
}

// Every setting of run r: data/KEY.js written, or settings[KEY] = {"missing": why}. Returns
// the run's positional terms (null if no setting could be run).
json write_run_settings(LoadedRun& run, std::size_t r, const std::vector<Text>& texts,
                        const std::vector<int>& factors, const fs::path& data_dir,
                        json& settings) {
  const int T = run.cfg.train.seq_len, M = run.cfg.memory.mem_len;
  const int max_factor = *std::max_element(factors.begin(), factors.end());
  json positional;
  for (std::size_t t = 0; t < texts.size(); ++t)
    for (int factor : factors) {
      const std::string key = setting_key(r, t, factor);
      if (std::size_t(M + factor * T + 1) > texts[t].tokens.size()) {
        settings[key] = {{"missing", "the text is shorter than memory + " +
                                         std::to_string(factor) + " x " + std::to_string(T) +
                                         " + 1 bytes"}};
        continue;
      }
      json data;
      try {
        data = explore_one(run, texts[t], factor);
      } catch (const std::exception& e) {
        settings[key] = {{"missing", e.what()}};
        continue;
      }
      // The positional terms read the queries of the first text at 1x (the first setting).
      if (positional.is_null()) positional = positional_json(run, max_factor * T + M - 1);
      write_text(data_dir / (key + ".js"),
                 "poslabExplore.add(\"" + key + "\", " + js_value(data) + ");\n");
      settings[key] = {{"file", "data/" + key + ".js"}};
    }
  return positional;
}

// The page: web/explore.html as index.html, and what it loads into lib/.
void copy_page(const fs::path& staging) {
  const fs::path web = fs::path(POSLAB_SOURCE_DIR) / "web";
  fs::copy(web / "vendor", staging / "lib", fs::copy_options::recursive);
  for (const char* asset : {"poslab.css", "page.js", "explore.js"})
    fs::copy_file(web / asset, staging / "lib" / asset);
  fs::copy_file(web / "explore.html", staging / "index.html");
}

void print_summary(std::ostream& out, const fs::path& out_dir, std::size_t runs,
                   std::size_t texts, const std::vector<int>& factors) {
  std::uintmax_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out_dir))
    if (entry.is_regular_file()) total += entry.file_size();
  out << "poslab explore: " << runs << " run(s), " << texts << " text(s), lengths";
  for (int f : factors) out << " " << f << "x";
  out << "\n  wrote " << (out_dir / "index.html").string() << "  (" << std::fixed
      << std::setprecision(1) << double(total) / 1e6 << " MB; open it in a browser: file://"
      << fs::absolute(out_dir / "index.html").lexically_normal().string() << ")\n";
}

}  // namespace

int run_explore(const ExploreOptions& options, std::ostream& out) {
  check_options(options);
  const fs::path out_dir =
      options.out_dir.empty() ? fs::path("explorer") : fs::path(options.out_dir);
  std::vector<fs::path> inputs(options.runs.begin(), options.runs.end());
  if (!options.text_file.empty()) inputs.push_back(options.text_file);
  // Checked before any work (nothing is made yet); written beside out_dir, swapped in at the end.
  SiteDirectory site = SiteDirectory::prepare(out_dir, "explorer", inputs);
  set_threads(1);
  std::vector<LoadedRun> runs;
  for (const std::string& path : options.runs) runs.push_back(load_run(path));
  const std::vector<int>& factors = options.factors;
  const int max_factor = *std::max_element(factors.begin(), factors.end());
  std::size_t need = 0;  // bytes per text: memory + longest input + its last target
  for (const LoadedRun& r : runs)
    need = std::max(need, std::size_t(r.cfg.memory.mem_len + max_factor * r.cfg.train.seq_len + 1));
  const std::vector<Text> texts = choose_texts(runs[0].cfg, options.texts, need, options.text_file);
  const std::vector<std::vector<std::string>> differs = run_differences(runs);

  site.make_staging();
  const fs::path& staging = site.staging();
  fs::create_directories(staging / "data");
  json index_runs = json::array(), index_texts = json::array(), settings = json::object();
  for (const Text& text : texts)
    index_texts.push_back({{"name", text.name}, {"source", text.source},
                           {"bytes", text.tokens.size()}});
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const LoadedRun& run = runs[r];
    const json positional =
        write_run_settings(runs[r], r, texts, factors, staging / "data", settings);
    index_runs.push_back({{"path", run.path},
                          {"name", fs::path(run.path).lexically_normal().filename().string()},
                          {"encoding", run.cfg.encoding.type},
                          {"differs", differs[r]},
                          {"n_layers", run.cfg.model.n_layers},
                          {"n_heads", run.cfg.model.n_heads},
                          {"seq_len", run.cfg.train.seq_len},
                          {"mem_len", run.cfg.memory.mem_len},
                          {"positional", positional}});
  }
  const json index = {{"runs", index_runs}, {"texts", index_texts}, {"factors", factors},
                      {"max_rows", kMaxMapRows}, {"settings", settings}};
  write_text(staging / "data" / "index.js", "window.POSLAB_EXPLORE = " + js_value(index) + ";\n");
  copy_page(staging);
  site.commit();
  print_summary(out, out_dir, runs.size(), texts.size(), factors);
  return 0;
}

}  // namespace poslab
