// `poslab explore RUN [RUN...]`: the attention explorer, a web page that opens from disk and
// shows what trained models do with positions, computed here and only drawn by the page.
//
//   poslab explore runs/sinusoidal runs/alibi --out runs/explorer
//
// For every run (a finished `poslab train` of a language model) and every text (four windows of
// the first run's test split, and --text FILE if given), at each length factor f (1, 2, 4, 8 x
// the run's training length T = train.seq_len):
//   1. The M = memory.mem_len bytes before the input go through the model first (filling its
//      memory, as the previous segment would in evaluation), then the input, L = f T bytes, as
//      one segment: the same two passes as `poslab attention` (attention.cpp).
//   2. The attention weights of every layer and head, probs [H, L, K = M + L], pooled into
//      blocks of b x b (b = ceil(L / 128): at most 128 rows; b = 1 up to 128 tokens). A block
//      holds the attention mass its queries give its keys, averaged over its queries:
//          A[qb, kb] = (1 / |qb|) sum_{i in qb} sum_{j in kb} P_ij
//      so that every row of blocks still sums to 1. Stored as one byte per block,
//      round(255 sqrt(A)) (the square root keeps weak attention visible; the page squares it),
//      at least 1 where A > 0: 0 is a masked block only (map_byte).
//   3. The loss of every input token (the model's cross-entropy on the next byte).
// And per run, once: the positional part of the score against the distance i - j, per layer and
// head, as far as the encoding exposes it (see positional_terms below).
//
// Output (--out, default explorer/): index.html, lib/ (web/vendor, page.js, explore.js,
// poslab.css), data/index.js (runs, texts, what was computed; per run the settings in which the
// runs' configs differ, config/differences.hpp, which head the run's column) and
// data/r{run}_t{text}_f{factor}.js (one setting each; the page loads them as scripts when they
// are shown: a page opened from file:// may not fetch files, but may load scripts). Written into
// a staging directory beside --out and swapped into place at the end; what --out may be is
// core/site_directory.hpp's rule.
#include <unistd.h>

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
#include "model/transformer.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int kMaxRows = 128;  // rows (and key columns per row of blocks) of a stored map

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

// The texts: `count` windows of `length` bytes spread evenly over the first run's test split
// (its validation split if it has no test split),
// then the --text file (whole, however long).
std::vector<Text> choose_texts(const Config& cfg, int count, std::size_t length,
                               const std::string& text_file) {
  std::vector<Text> texts;
  if (count > 0) {
    const CorpusSplit split = load_corpus(cfg.data);
    // The test split, or the validation split for a run configured without one
    // (data.test_fraction = 0): neither was trained on.
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
  }
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

// The positional part of the attention score against the distance d = i - j, for one query at
// position D (the largest distance shown) and keys at D - d, per layer and head, as far as the
// encoding exposes it:
//   - score terms (hook (c): T5, ALiBi, KERPLE, FIRE biases; Shaw's q.a^K; Transformer-XL's
//     (b) + (d) = (q + v) . W_kR R_{i-j}; DeBERTa's c2p): the encoding's scores_forward with the
//     keys set to 0, which removes every term that reads a key (XL's (c) u.k, DeBERTa's p2c) and
//     keeps the terms of positions alone or of the query. The query is the last query of the
//     first text at the first length factor (queries() of that layer); a bias does not depend
//     on it.
//   - RoPE (hook (b)): the q.k response, scale * R(D) q . R(D - d) k with q = k = (1, ..., 1):
//     RoFormer's long-term decay, the same for every head.
//   - a two-map method (Self-Extend, ReRoPE: rope with two score passes): the same q.k response
//     of the merged score, each key under the map its distance selects.
//   - absolute encodings (hook (a): sinusoidal, learned) and none: nothing to show; the
//     position is mixed into the content before any score.
json positional_terms(LoadedRun& run, int max_distance) {
  TransformerLM<float>& model = *run.model;
  Encoding<float>& enc = model.encoding();
  const int H = run.cfg.model.n_heads, d = run.cfg.model.d_model, dh = d / H;
  const int D = max_distance, K = D + 1;
  std::vector<std::int64_t> q_pos = {D}, k_pos(K);
  for (int j = 0; j < K; ++j) k_pos[j] = j;  // key j is at distance D - j
  const AttentionGeometry g{1, 1, D, K, H, dh, 0, q_pos.data(), k_pos.data()};
  const float scale = enc.score_scale(dh);
  std::string kind, note;
  // A two-map method (Self-Extend, ReRoPE; encodings/two_map_scores.hpp) computes the whole
  // q.k score as its score terms, with near and far keys under different position maps: its
  // positional part is the merged score's q.k response (q = k = (1, ..., 1) at every position),
  // map 1 below the window, map 2 beyond. Keys set to 0 would draw it as a flat 0 (issue 51).
  const bool two_maps = enc.has_score_terms() && !enc.has_content_term();
  if (two_maps) {
    kind = "q.k response";
    const Options& o = run.cfg.encoding.options;
    note = "the merged score of '" + run.cfg.encoding.type + "'" +
           (o.has("scaling") ? " with scaling " + o.get_string("scaling") : std::string()) +
           " (two position maps: near keys as plain RoPE, far keys at the method's positions) "
           "for q = k = (1, ..., 1) at every position: the same for every head";
  } else if (enc.has_score_terms()) {
    kind = "score terms";
    note = "the encoding's score terms with every key set to 0: biases exactly; terms of the "
           "query (Shaw's q.a^K, Transformer-XL's (b)+(d), DeBERTa's c2p) for the last query "
           "of the first text at the first length (1x by default); terms that read the key "
           "(XL's (c), DeBERTa's p2c) left out";
  } else if (enc.has_qk_transform()) {
    kind = "q.k response";
    note = "the q.k response of '" + run.cfg.encoding.type +
           "' (a rotation of q and k, as RoPE) with q = k = (1, ..., 1) at every position "
           "(RoFormer's long-term decay): the same for every head";
  } else {
    return {{"kind", "none"},
            {"note", "'" + run.cfg.encoding.type +
                         "' has no positional term in the score: positions (if any) are added "
                         "to the embeddings, mixed with the content before attention"}};
  }
  json layers = json::array();
  for (int n = 0; n < run.cfg.model.n_layers; ++n) {
    std::vector<float> q(d, 1.0f), k(std::size_t(K) * d, 0.0f), scores(std::size_t(H) * K, 0.0f);
    if (two_maps) {
      std::fill(k.begin(), k.end(), 1.0f);
      enc.scores_forward(n, g, q.data(), k.data(), scale, scores.data());
    } else if (kind == "score terms") {
      const auto& queries = model.block(n).attn.queries();  // [1, L, d] of the last forward
      const std::size_t last = queries.shape(1) - 1;
      std::copy_n(queries.data() + last * d, d, q.data());
      enc.scores_forward(n, g, q.data(), k.data(), scale, scores.data());
    } else {
      std::fill(k.begin(), k.end(), 1.0f);
      enc.qk_forward(n, g, q.data(), k.data());
      for (int h = 0; h < H; ++h)
        for (int j = 0; j < K; ++j) {
          double dot = 0;
          for (int c = h * dh; c < (h + 1) * dh; ++c)
            dot += double(q[c]) * k[std::size_t(j) * d + c];
          scores[std::size_t(h) * K + j] = float(scale * dot);
        }
    }
    json heads = json::array();
    for (int h = 0; h < H; ++h) {
      json by_distance = json::array();
      for (int dist = 0; dist <= D; ++dist)
        by_distance.push_back(rounded(scores[std::size_t(h) * K + (D - dist)]));
      heads.push_back(by_distance);
    }
    layers.push_back(heads);
  }
  return {{"kind", kind}, {"note", note}, {"layers", layers}};
}

// A block's mass A as one byte: round(255 sqrt(A)), but at least 1 where A > 0, so that 0
// means masked (keys after the query) only. A weight below (0.5 / 255)^2 = 3.8e-6 would round
// to 0 and be drawn white, as if it were missing.
std::uint8_t map_byte(double mass) {
  if (!(mass > 0)) return 0;
  return std::uint8_t(std::max(1L, std::lround(255.0 * std::sqrt(std::min(mass, 1.0)))));
}

// One setting: run r on text t at length factor f. Returns the data file's content, or throws
// (an input the model cannot take, e.g. a learned table shorter than L).
json explore_one(LoadedRun& run, const Text& text, int factor) {
  TransformerLM<float>& model = *run.model;
  const int T = run.cfg.train.seq_len, M = run.cfg.memory.mem_len;
  const int H = run.cfg.model.n_heads, L = factor * T;
  const std::int32_t* memory = text.tokens.data();
  const std::int32_t* input = memory + M;
  model.reset_memory(1);
  if (M > 0) model.forward(memory, memory + 1, nullptr, 1, M, 0, true);
  const int Mr = model.memory_rows();
  model.forward(input, input + 1, nullptr, 1, L, M, false);
  const int K = Mr + L;
  if (model.geometry().k_len != K) throw std::logic_error("poslab explore: unexpected geometry");

  const int b = (L + kMaxRows - 1) / kMaxRows;  // block size
  const int rows = (L + b - 1) / b, cols = (K + b - 1) / b;
  json maps = json::array();
  std::vector<std::uint8_t> bytes(std::size_t(rows) * cols);
  for (int n = 0; n < run.cfg.model.n_layers; ++n) {
    const auto& probs = model.block(n).attn.probs();  // [1, H, L, K]
    json heads = json::array();
    for (int h = 0; h < H; ++h) {
      const float* P = probs.data() + std::size_t(h) * L * K;
      std::fill(bytes.begin(), bytes.end(), 0);
      for (int qb = 0; qb < rows; ++qb) {
        const int i0 = qb * b, i1 = std::min(L, i0 + b);
        for (int kb = 0; kb < cols; ++kb) {
          const int j0 = kb * b, j1 = std::min(K, j0 + b);
          double mass = 0;  // A[qb, kb] = mean over the block's queries of their mass on its keys
          for (int i = i0; i < i1; ++i)
            for (int j = j0; j < j1; ++j) mass += P[std::size_t(i) * K + j];
          mass /= (i1 - i0);
          bytes[std::size_t(qb) * cols + kb] = map_byte(mass);
        }
      }
      heads.push_back(base64(bytes));
    }
    maps.push_back(heads);
  }
  json losses = json::array();
  const auto& token_loss = model.token_loss();  // [L]: loss of predicting input[i + 1]
  for (int i = 0; i < L; ++i) losses.push_back(rounded(token_loss(i)));
  return {{"factor", factor}, {"L", L}, {"memory_rows", Mr}, {"block", b}, {"rows", rows},
          {"cols", cols}, {"maps", maps}, {"loss", losses},
          {"memory", labels(memory, Mr)}, {"input", labels(input, L + 1)}};
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

}  // namespace

int run_explore(const ExploreOptions& options, std::ostream& out) {
  if (options.runs.empty()) throw std::runtime_error("poslab explore: name at least one run");
  if (options.texts < 0) throw std::runtime_error("--texts must be >= 0");
  if (options.texts == 0 && options.text_file.empty())
    throw std::runtime_error("--texts 0 needs --text FILE: there would be nothing to show");
  const fs::path out_dir =
      options.out_dir.empty() ? fs::path("explorer") : fs::path(options.out_dir);
  std::vector<fs::path> inputs(options.runs.begin(), options.runs.end());
  if (!options.text_file.empty()) inputs.push_back(options.text_file);
  // Checked before any work (nothing is made yet); written beside out_dir, swapped in at the end.
  SiteDirectory site = SiteDirectory::prepare(out_dir, "explorer", inputs);
  set_threads(1);
  std::vector<LoadedRun> runs;
  for (const std::string& path : options.runs) runs.push_back(load_run(path));
  const std::vector<int> factors = options.factors;
  const int max_factor = *std::max_element(factors.begin(), factors.end());
  std::size_t need = 0;  // bytes per text: memory + longest input + its last target
  for (const LoadedRun& r : runs)
    need = std::max(need, std::size_t(r.cfg.memory.mem_len + max_factor * r.cfg.train.seq_len + 1));
  const std::vector<Text> texts = choose_texts(runs[0].cfg, options.texts, need, options.text_file);
  std::vector<Config> configs;
  for (const LoadedRun& r : runs) configs.push_back(r.cfg);
  // What sets each run apart (its column's header): "encoding.scaling = "yarn"", ... A rope
  // scaling's options are listed only for the runs whose scaling reads them (issue 51: a run of
  // scaling none was listed with "encoding.group_size = 8, encoding.neighbor_window = 1024",
  // the defaults of Self-Extend's options, beside a Self-Extend run).
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

  site.make_staging();
  const fs::path& staging = site.staging();
  fs::create_directories(staging / "data");
  json index_runs = json::array(), index_texts = json::array(), settings = json::object();
  for (const Text& text : texts)
    index_texts.push_back({{"name", text.name}, {"source", text.source},
                           {"bytes", text.tokens.size()}});
  for (std::size_t r = 0; r < runs.size(); ++r) {
    LoadedRun& run = runs[r];
    const int T = run.cfg.train.seq_len, M = run.cfg.memory.mem_len;
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
        if (positional.is_null()) positional = positional_terms(run, max_factor * T + M - 1);
        write_text(staging / "data" / (key + ".js"),
                   "poslabExplore.add(\"" + key + "\", " + js_value(data) + ");\n");
        settings[key] = {{"file", "data/" + key + ".js"}};
      }
    index_runs.push_back({{"path", run.path},
                          {"name", fs::path(run.path).lexically_normal().filename().string()},
                          {"encoding", run.cfg.encoding.type},
                          {"differs", differs[r]},
                          {"n_layers", run.cfg.model.n_layers},
                          {"n_heads", run.cfg.model.n_heads},
                          {"seq_len", T},
                          {"mem_len", M},
                          {"positional", positional}});
  }
  const json index = {{"runs", index_runs}, {"texts", index_texts}, {"factors", factors},
                      {"max_rows", kMaxRows}, {"settings", settings}};
  write_text(staging / "data" / "index.js", "window.POSLAB_EXPLORE = " + js_value(index) + ";\n");

  const fs::path web = fs::path(POSLAB_SOURCE_DIR) / "web";
  fs::copy(web / "vendor", staging / "lib", fs::copy_options::recursive);
  for (const char* asset : {"poslab.css", "page.js", "explore.js"})
    fs::copy_file(web / asset, staging / "lib" / asset);
  fs::copy_file(web / "explore.html", staging / "index.html");

  site.commit();

  std::uintmax_t total = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out_dir))
    if (entry.is_regular_file()) total += entry.file_size();
  out << "poslab explore: " << runs.size() << " run(s), " << texts.size() << " text(s), lengths";
  for (int f : factors) out << " " << f << "x";
  out << "\n  wrote " << (out_dir / "index.html").string() << "  (" << std::fixed
      << std::setprecision(1) << double(total) / 1e6 << " MB; open it in a browser: file://"
      << fs::absolute(out_dir / "index.html").lexically_normal().string() << ")\n";
  return 0;
}

}  // namespace poslab
