// `poslab attention`: the attention weights of a trained run on a text of your choice, written
// as numpy arrays for the notebooks (notebooks/inside_encodings.ipynb).
//
//   poslab attention --run runs/xl --input "hello world" --mem-text "the previous segment"
//
// What it does, step by step:
//   1. Reads RUN/config.toml and RUN/checkpoint/ (the model exactly as trained).
//   2. Encodes the texts as bytes: token = byte value, batch B = 1.
//   3. With --mem-text and a run trained with memory (memory.mem_len = M > 0): runs the memory
//      text through the model as one segment, which leaves the last min(M, its length) hidden
//      states of every layer in the memory, exactly as a previous segment would in evaluation.
//   4. Runs the input as one segment (L = its length) and keeps, per layer, the softmax output
//      of the attention, probs [B=1, H, L, K] with K = memory rows + L (attention.hpp).
//
// Output, in --out (default RUN/attention/):
//   layer{n}.npy   float32 [H, L, K]: row i = query i of the input, column j = key j; the memory
//                  keys come first. Each row sums to 1 over the keys query i may see (j <= i + M)
//                  and is exactly 0 on the others (the causal mask).
//   tokens.json    {"input", "memory", "mem_len" (= memory rows M), "keys" (one label per key
//                  column: the byte as a character, or an escape such as "\n", "\x80"),
//                  "key_bytes", "key_positions", "query_positions", "n_layers", "n_heads",
//                  "encoding", "run"}
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

#include "cli/byte_labels.hpp"
#include "cli/commands.hpp"
#include "config/load.hpp"
#include "model/transformer.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_dir.hpp"
#include "train/train.hpp"

namespace poslab {

namespace {

// Bytes as tokens; every byte must be a symbol of the model's vocabulary.
std::vector<std::int32_t> encode_bytes(const std::string& text, int vocab_size,
                                       const std::string& what) {
  std::vector<std::int32_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text) {
    if (int(c) >= vocab_size)
      throw std::runtime_error(what + ": byte " + std::to_string(int(c)) +
                               " is outside the model's vocabulary (model.vocab_size = " +
                               std::to_string(vocab_size) + ")");
    tokens.push_back(c);
  }
  return tokens;
}

// The targets of a forward pass are needed for its loss only; the next byte will do.
std::vector<std::int32_t> next_tokens(const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(tokens.back());
  return targets;
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
  const std::vector<std::int32_t> input = encode_bytes(options.input, cfg.model.vocab_size, "--input");

  // 3. The memory, if the run has one and a text for it was given.
  std::string memory_text;
  model.reset_memory(1);
  if (options.mem_text_given && !options.mem_text.empty()) {
    if (cfg.memory.mem_len > 0) {
      memory_text = options.mem_text;
      const auto mem = encode_bytes(memory_text, cfg.model.vocab_size, "--mem-text");
      const auto targets = next_tokens(mem);
      model.forward(mem.data(), targets.data(), nullptr, 1, int(mem.size()), 0, true);
    } else {
      out << "poslab attention: this run has no memory (memory.mem_len = 0): --mem-text is "
             "ignored, the input attends to itself only\n";
    }
  }
  const int M = model.memory_rows();

  // 4. The input, one segment after the memory text (its stream position, for runs that
  // continue positions across segments).
  const int L = int(input.size());
  const auto targets = next_tokens(input);
  model.forward(input.data(), targets.data(), nullptr, 1, L, std::int64_t(memory_text.size()),
                false);
  const AttentionGeometry& g = model.geometry();
  const int H = cfg.model.n_heads, K = g.k_len;
  if (g.mem_len != M || K != M + L)
    throw std::logic_error("poslab attention: unexpected attention geometry");

  const std::filesystem::path dir =
      options.out_dir.empty() ? run.path() / "attention" : std::filesystem::path(options.out_dir);
  std::filesystem::create_directories(dir);
  for (int n = 0; n < cfg.model.n_layers; ++n) {
    const auto& probs = model.block(n).attn.probs();  // [1, H, L, K]
    xt::xtensor<float, 3> p({std::size_t(H), std::size_t(L), std::size_t(K)});
    std::copy_n(probs.data(), p.size(), p.data());
    write_file_atomically(dir / ("layer" + std::to_string(n) + ".npy"), xt::dump_npy(p));
  }

  // tokens.json: what the rows and columns of the arrays are.
  const std::string memory_keys = memory_text.substr(memory_text.size() - std::size_t(M));
  const std::string key_text = memory_keys + options.input;
  nlohmann::json keys = nlohmann::json::array(), key_bytes = nlohmann::json::array();
  for (unsigned char c : key_text) {
    keys.push_back(byte_label(c));
    key_bytes.push_back(int(c));
  }
  const nlohmann::json info = {
      {"run", run.path().string()},
      {"encoding", cfg.encoding.type},
      {"n_layers", cfg.model.n_layers},
      {"n_heads", H},
      {"input", options.input},
      {"memory", memory_text},
      {"mem_len", M},
      {"keys", keys},
      {"key_bytes", key_bytes},
      {"query_positions", std::vector<std::int64_t>(g.q_pos, g.q_pos + L)},
      {"key_positions", std::vector<std::int64_t>(g.k_pos, g.k_pos + K)},
  };
  // Text that is not valid UTF-8 is written with U+FFFD in its place (the labels are exact).
  write_file_atomically(dir / "tokens.json",
                        info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");

  out << "poslab attention: '" << cfg.encoding.type << "', " << cfg.model.n_layers
      << " layers x " << H << " heads; input " << L << " bytes, memory " << M
      << " rows\n  wrote " << (dir / "layer*.npy").string() << " ([H, L, K] = [" << H << ", "
      << L << ", " << K << "]) and " << (dir / "tokens.json").string() << "\n";
  return 0;
}

}  // namespace poslab
