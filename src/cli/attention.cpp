// `poslab attention`: the attention weights of a trained run on a text of your choice, written
// as numpy arrays for the notebooks (notebooks/inside_encodings.ipynb).
//
//   poslab attention --run runs/xl --input "hello world" --mem-text "the previous segment"
//
// What it does, step by step:
//   1. Reads RUN/config.toml and RUN/checkpoint/ (the model exactly as trained).
//   2. Encodes the texts as bytes: token = byte value, batch B = 1.
//   3. With --mem-text and a run trained with memory (memory.mem_len = M > 0): the memory text
//      goes through the model first, filling its memory as a previous segment would.
//   4. The input goes through as one segment; every layer's attention weights are kept.
// Steps 3 and 4 are eval/attention_weights.hpp; this file reads the run and writes the arrays.
//
// Output, in --out (default RUN/attention/):
//   layer{n}.npy   float32 [H, L, K]: row i = query i of the input, column j = key j; the memory
//                  keys come first. Each row sums to 1 over the keys query i may see (j <= i + M)
//                  and is exactly 0 on the others (the causal mask).
//   tokens.json    {"input", "memory", "mem_len" (= memory rows M), "keys" (one label per key
//                  column: the byte as a character, or an escape such as "\n", "\x80"),
//                  "key_bytes", "key_positions", "query_positions", "n_layers", "n_heads",
//                  "encoding", "run"}
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xnpy.hpp>

#include "cli/byte_labels.hpp"
#include "cli/commands.hpp"
#include "config/load.hpp"
#include "eval/attention_weights.hpp"
#include "model/transformer.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

// tokens.json: what the rows and columns of the arrays are.
std::string tokens_json(const RunDirectory& run, const Config& cfg, const std::string& input,
                        const std::string& memory_text, const AttentionWeights& w) {
  const int M = w.memory_rows;
  const std::string memory_keys = memory_text.substr(memory_text.size() - std::size_t(M));
  const std::string key_text = memory_keys + input;
  nlohmann::json keys = nlohmann::json::array(), key_bytes = nlohmann::json::array();
  for (unsigned char c : key_text) {
    keys.push_back(byte_label(c));
    key_bytes.push_back(int(c));
  }
  const nlohmann::json info = {
      {"run", run.path().string()},
      {"encoding", cfg.encoding.type},
      {"n_layers", cfg.model.n_layers},
      {"n_heads", cfg.model.n_heads},
      {"input", input},
      {"memory", memory_text},
      {"mem_len", M},
      {"keys", keys},
      {"key_bytes", key_bytes},
      {"query_positions", w.query_positions},
      {"key_positions", w.key_positions},
  };
  // Text that is not valid UTF-8 is written with U+FFFD in its place (the labels are exact).
  return info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

int run_attention(const AttentionOptions& options, std::ostream& out) {
  RunDirectory run = RunDirectory::open(options.run_dir);
  const Config cfg = load_config(run.file("config.toml").string(), registered_choices());
  require_checkpoint(run.path(), run.path().string());
  if (options.input.empty()) throw std::runtime_error("--input: expected a non-empty text");
  set_threads(1);  // one short sequence: threads would cost more than they save

  TransformerLM<float> model(cfg.model, cfg.encoding, cfg.memory);
  load_checkpoint(run.path(), model.arena());
  const std::vector<std::int32_t> input = byte_tokens(options.input, cfg.model.vocab_size, "--input");

  // 3. The memory, if the run has one and a text for it was given.
  std::string memory_text;
  std::vector<std::int32_t> memory;
  if (options.mem_text_given && !options.mem_text.empty()) {
    if (cfg.memory.mem_len > 0) {
      memory_text = options.mem_text;
      memory = byte_tokens(memory_text, cfg.model.vocab_size, "--mem-text");
    } else {
      out << "poslab attention: this run has no memory (memory.mem_len = 0): --mem-text is "
             "ignored, the input attends to itself only\n";
    }
  }
  const AttentionWeights weights = attention_weights(model, memory, input);
  const int H = cfg.model.n_heads, L = int(input.size()), M = weights.memory_rows, K = M + L;

  const std::filesystem::path dir =
      options.out_dir.empty() ? run.path() / "attention" : std::filesystem::path(options.out_dir);
  std::filesystem::create_directories(dir);
  for (int n = 0; n < cfg.model.n_layers; ++n)
    write_file_atomically(dir / ("layer" + std::to_string(n) + ".npy"),
                          xt::dump_npy(weights.layers[n]));
  write_file_atomically(dir / "tokens.json",
                        tokens_json(run, cfg, options.input, memory_text, weights));

  out << "poslab attention: '" << cfg.encoding.type << "', " << cfg.model.n_layers
      << " layers x " << H << " heads; input " << L << " bytes, memory " << M
      << " rows\n  wrote " << (dir / "layer*.npy").string() << " ([H, L, K] = [" << H << ", "
      << L << ", " << K << "]) and " << (dir / "tokens.json").string() << "\n";
  return 0;
}

}  // namespace poslab
