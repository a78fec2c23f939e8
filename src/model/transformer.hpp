// The language model: token embedding, a positional encoding, N blocks with memory, and a
// softmax output layer.
//
//   x_0 = sqrt(d) * E[tokens]  (+ PE(pos) for absolute encodings: hook (a))     [B, L, d]
//   x_{n+1} = Block_n(x_n, mem_n)                                               [B, L, d]
//   logits = x_N W_out + b_out   (W_out = E^T when tied; LN_f(x_N) with pre-LN)  [B, L, V]
//   loss = weighted mean of -log softmax(logits)[target]
//
// Positions. A segment's queries sit at positions offset + 0..L-1 and its keys, memory first, at
// offset - M .. offset + L - 1. By default offset = 0 for every segment: absolute encodings
// restart at 0 on every segment, which is exactly the failure case of state reuse that
// Transformer-XL describes; relative encodings only see i - j and do not care.
// memory.continue_positions passes the stream position as offset instead. A caller may also
// give the keys' positions outright, memory rows first, then the segment, whose positions the
// queries share: PoSE's skipping ids (data/pose_batcher.hpp, no memory) and the streaming
// cache's positions (eval/streaming_cache.hpp: sinks and recent tokens in memory).
//
// The prepended sink token (model.sink_token; Xiao et al. 2023, section 3.3, "pre-training with
// a learnable sink token"). The paper adds "a learnable placeholder token" at the start of every
// pre-training sample, so that one token, not the first few of the text, becomes the attention
// sink a streaming cache keeps. Here it is one extra vocabulary id, SINK = vocab_size, with its
// own row of E ([V + 1, d]; the output layer still scores only the V real tokens). Whenever a
// forward pass starts from an empty memory (every training row, every evaluation row, the first
// step of a stream) the model reads
//
//   input    [SINK, x_0, x_1, ..., x_{L-1}]         L + 1 columns              [B, L + 1]
//   position  offset + 0, offset + 1, ..., offset + L   (given positions: [1 + L], the sink's first)
//   target    (none), x_1, x_2, ..., x_L             the sink's output is not scored
//
// so the L scored predictions are the same as without the sink, each with one more key in view:
// the sink. Logits and token losses stay [B L] (the sink's column is dropped before the output
// layer and gets no gradient from it). With memory already filled (a stream's later steps), the
// sink is not prepended again: it is the memory's first row.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/arena.hpp"
#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "core/parallel_loops.hpp"
#include "encodings/registry.hpp"
#include "model/block.hpp"
#include "nn/cross_entropy.hpp"
#include "nn/embedding.hpp"

namespace poslab {

template <class T>
class TransformerLM {
 public:
  TransformerLM(const ModelConfig& model, const EncodingConfig& encoding,
                const MemoryConfig& memory)
      : TransformerLM(model, memory,
                      [&](const EncodingShape& shape, ParameterArena<T>& arena) {
                        const auto* info = find_encoding(encoding.type);
                        if (!info)
                          throw std::invalid_argument("unknown encoding '" + encoding.type + "'");
                        Options options = Options::defaults(info->options);
                        for (const auto& [k, v] : encoding.options.values()) options.set(k, v);
                        return info->make<T>(options, shape, arena);
                      }) {}

  // Builds the encoding with make_encoding instead of the registry: for tests that put an
  // encoding no config can name into a whole model (the conformance kit's planted bugs).
  using MakeEncoding =
      std::function<std::unique_ptr<Encoding<T>>(const EncodingShape&, ParameterArena<T>&)>;
  TransformerLM(const ModelConfig& model, const MemoryConfig& memory,
                const MakeEncoding& make_encoding)
      : cfg_(model), memory_cfg_(memory) {
    const std::size_t V = model.vocab_size, d = model.d_model;
    if (model.d_model % model.n_heads != 0)
      throw std::invalid_argument("model.d_model must be divisible by model.n_heads");
    // E [V, d], or [V + 1, d] with the sink token's row V last.
    E_ = arena_.add("embedding", {V + (model.sink_token ? 1 : 0), d});
    const EncodingShape shape{model.d_model, model.n_heads, model.d_model / model.n_heads,
                              model.n_layers};
    encoding_ = make_encoding(shape, arena_);
    const Activation act = activation_from_name(model.activation);
    for (int n = 0; n < model.n_layers; ++n)
      blocks_.push_back(std::make_unique<Block<T>>(arena_, n, model.d_model, model.n_heads,
                                                   model.d_inner, act, model.pre_ln,
                                                   model.sink_logit));
    if (model.pre_ln) ln_f_ = std::make_unique<LayerNorm<T>>(arena_, "ln_f.", model.d_model);
    if (!model.tie_embeddings) W_out_ = arena_.add("output.W", {d, V});
    b_out_ = arena_.add("output.b", {V}, false);
    arena_.allocate();
  }

  // Seeded initialisation: N(0, init_std) for matrices and tables, LN gains 1, biases 0.
  void init(std::uint64_t seed) {
    Rng rng(seed);
    const double std = cfg_.init_std;
    auto normal = [&](T* w, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) w[i] = T(rng.normal(0.0, std));
    };
    const std::size_t V = cfg_.vocab_size, d = cfg_.d_model;
    normal(arena_.value(E_), V * d);  // the V token rows
    for (auto& b : blocks_) b->init(rng, std);
    if (ln_f_) ln_f_->init();
    if (!cfg_.tie_embeddings) normal(arena_.value(W_out_), W_out_.size);
    encoding_->init(arena_, rng);
    // The sink token's row, drawn last: every other parameter starts as without the sink.
    if (cfg_.sink_token) normal(arena_.value(E_) + V * d, d);
  }

  // Runs one segment. tokens, targets [B, L]; weights [B, L] or nullptr (all 1).
  // position_offset: see the top of this file. With memory enabled, the memory of the previous
  // call is used and (if update_memory) replaced. positions [M + L] or nullptr, M =
  // memory_rows() at the call: the position ids of the keys, the M memory rows first, then the
  // segment's columns (the queries' positions), the same for every row. Without memory that is
  // [L] (PoSE). They take the place of position_offset, randomized positions and same_length's
  // window (the caller chose the keys). With the sink token prepended (model.sink_token and an
  // empty memory, sink_prepended()) they are [1 + L], the sink's first. Returns the weighted
  // mean loss.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, const T* weights, int B,
                 int L, std::int64_t position_offset = 0, bool update_memory = true,
                 const std::int64_t* positions = nullptr) {
    const int d = cfg_.d_model, V = cfg_.vocab_size;
    if (blocks_.empty() || blocks_[0]->memory_batch() != B) reset_memory(B);
    const int M = blocks_.empty() ? 0 : blocks_[0]->memory_rows();
    // The sink token starts every sequence read from an empty memory (top of this file).
    sink_prepended_ = cfg_.sink_token && M == 0;
    const int Lin = L + (sink_prepended_ ? 1 : 0);  // columns the blocks read
    if (positions)
      set_given_geometry(B, Lin, M, positions);
    else
      set_geometry(B, Lin, M, position_offset);
    const std::size_t sB = B, sL = L, sd = d;
    ensure_shape(x_, {std::size_t(cfg_.n_layers + 1), sB * std::size_t(Lin), sd});
    if (sink_prepended_) {  // tokens_ [B, L + 1] = [SINK, x_0 .. x_{L-1}] per row
      tokens_.resize(std::size_t(B) * Lin);
      for (int b = 0; b < B; ++b) {
        tokens_[std::size_t(b) * Lin] = sink_id();
        std::copy_n(tokens + long(b) * L, L, tokens_.begin() + long(b) * Lin + 1);
      }
    } else {
      tokens_.assign(tokens, tokens + long(B) * L);
    }

    // x_0 = sqrt(d) E[tokens] + (a) PE
    T* x0 = layer_input(0);
    embedding_forward<T>(tokens_.data(), arena_.value(E_), x0, B * Lin, d, embed_scale());
    encoding_->embed_forward(geometry_, x0);
    for (int n = 0; n < cfg_.n_layers; ++n)
      blocks_[n]->forward(layer_input(n), geometry_, *encoding_, layer_input(n + 1),
                          inference_only_ ? &inference_ : nullptr);
    last_forward_inference_ = inference_only_;
    if (update_memory && memory_cfg_.mem_len > 0)
      for (auto& b : blocks_)
        b->update_memory(B, geometry_.k_len, memory_cfg_.mem_len, memory_sinks_);

    // Output layer and loss.
    const T* top = layer_input(cfg_.n_layers);
    if (sink_prepended_) {  // the token columns 1..L of each row, [B L, d]: the sink's is dropped
      ensure_shape(top_tokens_, {sB * sL, sd});
      for (int b = 0; b < B; ++b)
        std::copy_n(top + (long(b) * Lin + 1) * d, long(L) * d,
                    top_tokens_.data() + long(b) * L * d);
      top = top_tokens_.data();
    }
    if (ln_f_) {
      ensure_shape(final_, {sB * sL, sd});
      ln_f_->forward(top, final_.data(), B * L);
      top = final_.data();
    }
    ensure_shape(logits_, {sB * sL, std::size_t(V)});
    ensure_shape(dlogits_, {sB * sL, std::size_t(V)});
    ensure_shape(token_loss_, {sB * sL});
    // logits [B L, V] = top [B L, d] E^T [d, V]   (or top W_out [d, V])
    const auto top_rows = matrix(top, B * L, d);
    if (cfg_.tie_embeddings)
      parallel_multiply(matrix(logits_), top_rows, matrix(arena_.value(E_), V, d).t());
    else
      parallel_multiply(matrix(logits_), top_rows, matrix(arena_.value(W_out_), d, V));
    const T* b_out = arena_.value(b_out_);
    T* logits = logits_.data();
#pragma omp parallel for schedule(static)
    for (long n = 0; n < long(B) * L; ++n)
      for (int v = 0; v < V; ++v) logits[n * V + v] += b_out[v];
    return cross_entropy_forward_backward<T>(logits_.data(), targets, weights, dlogits_.data(),
                                             token_loss_.data(), B * L, V);
  }

  // Gradients of the last forward's loss, accumulated into the arena's gradients.
  void backward() {
    if (last_forward_inference_)
      throw std::logic_error("backward() after an evaluation-only forward pass (the attention "
                             "weights it needs were not kept)");
    const int B = geometry_.batch, Lin = geometry_.q_len, d = cfg_.d_model, V = cfg_.vocab_size;
    const int L = Lin - (sink_prepended_ ? 1 : 0);  // scored columns (the sink's is not)
    const int N = B * L;
    const std::size_t sN = N, sd = d;
    ensure_shape(dx_, {std::size_t(cfg_.n_layers + 1), std::size_t(B) * Lin, sd});
    parallel_fill(dx_.data(), long(dx_.size()), T(0));
    // With the sink, the output layer saw the gathered token rows top_tokens_ [N, d]: their
    // gradient goes to dtop_tokens_ first, then into the token columns of dlayer(n_layers).
    if (sink_prepended_) ensure_zeros(dtop_tokens_, {sN, sd});
    T* dtop = sink_prepended_ ? dtop_tokens_.data() : dlayer(cfg_.n_layers);
    const T* top_in = sink_prepended_ ? top_tokens_.data() : layer_input(cfg_.n_layers);
    const T* top = ln_f_ ? final_.data() : top_in;
    if (ln_f_) ensure_zeros(dfinal_, {sN, sd});
    T* dtop_pre = ln_f_ ? dfinal_.data() : dtop;
    // logits = top W_out + b  (or top E^T + b)
    if (cfg_.tie_embeddings) {
      // dtop += dlogits [N, V] E [V, d],   dE += dlogits^T [V, N] top [N, d]
      parallel_multiply(matrix(dtop_pre, N, d), matrix(dlogits_), matrix(arena_.value(E_), V, d),
                        T(1), T(1));
      parallel_multiply(matrix(arena_.grad(E_), V, d), matrix(dlogits_).t(), matrix(top, N, d),
                        T(1), T(1));
      add_column_sums(dlogits_.data(), N, V, arena_.grad(b_out_));  // db += sum over rows
    } else {
      linear_backward<T>(dlogits_.data(), top, arena_.value(W_out_), dtop_pre,
                         arena_.grad(W_out_), arena_.grad(b_out_), N, d, V);
    }
    if (ln_f_) ln_f_->backward(dfinal_.data(), top_in, dtop, N);
    if (sink_prepended_)  // scatter into the token columns 1..L; the sink's column stays 0
      for (int b = 0; b < B; ++b)
        std::copy_n(dtop + long(b) * L * d, long(L) * d,
                    dlayer(cfg_.n_layers) + (long(b) * Lin + 1) * d);
    for (int n = cfg_.n_layers - 1; n >= 0; --n)
      blocks_[n]->backward(dlayer(n + 1), geometry_, *encoding_, dlayer(n));
    encoding_->embed_backward(geometry_, dlayer(0));
    // dE[token] += sqrt(d) dx_0, the sink's row included
    embedding_backward<T>(tokens_.data(), dlayer(0), arena_.grad(E_), B * Lin, d, embed_scale());
  }

  // Evaluation only: forward passes from now on keep nothing for backward, and all layers share
  // one set of attention buffers, the scores made a chunk of batch rows at a time
  // (nn/inference_scratch.hpp). Same results as the training forward. Returns the previous state.
  bool set_inference_only(bool on) {
    const bool was = inference_only_;
    inference_only_ = on;
    return was;
  }
  // The shared buffers of evaluation-only passes (tests lower score_budget_bytes to 0).
  InferenceScratch<T>& inference_scratch() { return inference_; }
  void reset_memory(int B = 0) {
    for (auto& b : blocks_) b->reset_memory(B);
  }
  // Randomized positions (Ruoss et al. 2023), for training: every forward pass draws the K
  // positions of its keys (memory first, then the segment, whose positions the queries share)
  // as a sorted sample of distinct integers from [0, max_position). Off by default.
  void enable_randomized_positions(std::uint64_t seed, int max_position) {
    position_rng_ = std::make_unique<Rng>(seed);
    max_position_ = max_position;
    randomized_ = true;
  }
  // Turns the sampling on or off (evaluation is always contiguous); returns the previous state.
  bool set_randomized_positions(bool on) {
    const bool was = randomized_;
    randomized_ = on && position_rng_ != nullptr;
    return was;
  }

  // The state a training carries from step to step besides the parameters and Adam's moments
  // (resumable training, train/training_state.hpp): every layer's memory and the generator of
  // randomized positions.
  struct CarriedState {
    int batch = 0, rows = 0;       // memory [n_layers, batch, rows, d]
    std::vector<T> memory;
    std::string position_rng;      // empty without randomized positions
  };
  CarriedState carried_state() const {
    CarriedState s;
    if (!blocks_.empty()) s.batch = blocks_[0]->memory_batch(), s.rows = blocks_[0]->memory_rows();
    const long per_layer = long(s.batch) * s.rows * cfg_.d_model;
    s.memory.resize(per_layer * blocks_.size());
    for (std::size_t n = 0; n < blocks_.size(); ++n)
      blocks_[n]->copy_memory_to(s.memory.data() + n * per_layer);
    if (position_rng_) s.position_rng = position_rng_->state();
    return s;
  }
  void restore_carried_state(const CarriedState& s) {
    const long per_layer = long(s.batch) * s.rows * cfg_.d_model;
    if (s.memory.size() != std::size_t(per_layer) * blocks_.size() || s.rows > memory_cfg_.mem_len)
      throw std::invalid_argument("a memory of " + std::to_string(s.rows) + " rows (" +
                                  std::to_string(s.memory.size()) + " values) does not fit this "
                                  "model (memory.mem_len = " + std::to_string(memory_cfg_.mem_len) + ")");
    if (s.position_rng.empty() != (position_rng_ == nullptr))
      throw std::invalid_argument("the saved state and the model disagree on randomized positions");
    std::optional<Rng> rng;  // parsed before anything changes
    if (position_rng_) (rng = *position_rng_)->restore(s.position_rng);
    for (std::size_t n = 0; n < blocks_.size(); ++n)
      blocks_[n]->restore_memory(s.batch, memory_cfg_.mem_len, s.rows,
                                 s.memory.data() + n * per_layer);
    if (rng) *position_rng_ = *rng;
  }

  // Memory length used from now on (evaluation may use another one than training).
  void set_mem_len(int mem_len) { memory_cfg_.mem_len = mem_len; }
  // Attention sinks (StreamingLLM, eval/streaming_cache.hpp): from now on the memory keeps its
  // first `sinks` rows when it evicts (Block::update_memory); 0 = the last mem_len rows, as
  // Transformer-XL. Returns the previous value.
  int set_memory_sinks(int sinks) {
    const int was = memory_sinks_;
    memory_sinks_ = sinks;
    return was;
  }
  int mem_len() const { return memory_cfg_.mem_len; }
  // The prepended sink token (top of this file): its id (vocab_size, the row after the V token
  // rows of E), and whether the last forward pass put it in front of its rows (the model has
  // one and the memory was empty). Then geometry() and the attention weights have L + 1
  // columns, the sink's first; logits() and token_loss() never include it.
  std::int32_t sink_id() const { return cfg_.vocab_size; }
  bool sink_prepended() const { return sink_prepended_; }
  int memory_rows() const { return blocks_.empty() ? 0 : blocks_[0]->memory_rows(); }

  ParameterArena<T>& arena() { return arena_; }
  const ParameterArena<T>& arena() const { return arena_; }
  Encoding<T>& encoding() { return *encoding_; }
  Block<T>& block(int n) { return *blocks_[n]; }
  const ModelConfig& config() const { return cfg_; }
  const AttentionGeometry& geometry() const { return geometry_; }
  // Of the last forward pass: logits [B*L, V] and per-token loss [B*L].
  const xt::xtensor<T, 2>& logits() const { return logits_; }
  const xt::xtensor<T, 1>& token_loss() const { return token_loss_; }

 private:
  T embed_scale() const { return std::sqrt(T(cfg_.d_model)); }
  T* layer_input(int n) { return x_.data() + long(n) * x_.shape(1) * x_.shape(2); }
  T* dlayer(int n) { return dx_.data() + long(n) * dx_.shape(1) * dx_.shape(2); }

  void set_geometry(int B, int L, int M, std::int64_t offset) {
    const std::int64_t shift = memory_cfg_.continue_positions ? offset : 0;
    q_pos_.resize(L);
    k_pos_.resize(M + L);
    if (randomized_) {
      sample_sorted_positions(M + L);
      std::copy(k_pos_.begin() + M, k_pos_.end(), q_pos_.begin());
    } else {
      std::iota(q_pos_.begin(), q_pos_.end(), shift);
      std::iota(k_pos_.begin(), k_pos_.end(), shift - M);
    }
    geometry_ = AttentionGeometry{B, L, M, M + L, cfg_.n_heads, cfg_.d_model / cfg_.n_heads,
                                  memory_cfg_.same_length ? memory_cfg_.mem_len : 0,
                                  q_pos_.data(), k_pos_.data()};
  }

  // Keys at the caller's positions [M + L], memory rows first; the queries at the last L
  // (PoSE: M = 0; the streaming cache: its sinks and recent tokens). No same_length window.
  void set_given_geometry(int B, int L, int M, const std::int64_t* positions) {
    k_pos_.assign(positions, positions + M + L);
    q_pos_.assign(positions + M, positions + M + L);
    geometry_ = AttentionGeometry{B, L, M, M + L, cfg_.n_heads, cfg_.d_model / cfg_.n_heads,
                                  /*window=*/0, q_pos_.data(), k_pos_.data()};
  }

  // k_pos_ <- a sorted sample of K distinct integers from [0, max_position_), by selection
  // sampling (Knuth's algorithm S): walk the range once, keep each value with probability
  // (still needed) / (still left). O(max_position) per step, no allocation.
  void sample_sorted_positions(int K) {
    if (K > max_position_)
      throw std::invalid_argument("randomized positions: a window of " + std::to_string(K) +
                                  " keys needs train.max_position >= " + std::to_string(K) +
                                  ", got " + std::to_string(max_position_));
    int needed = K, taken = 0;
    for (int value = 0; value < max_position_ && needed > 0; ++value) {
      const int left = max_position_ - value;
      if (position_rng_->uniform() * left < needed) {
        k_pos_[taken++] = value;
        --needed;
      }
    }
  }

  ModelConfig cfg_;
  MemoryConfig memory_cfg_;
  std::unique_ptr<Rng> position_rng_;
  int max_position_ = 0;
  bool randomized_ = false;
  int memory_sinks_ = 0;  // set_memory_sinks
  ParameterArena<T> arena_;
  Param E_, W_out_, b_out_;
  std::unique_ptr<Encoding<T>> encoding_;
  std::vector<std::unique_ptr<Block<T>>> blocks_;
  std::unique_ptr<LayerNorm<T>> ln_f_;

  AttentionGeometry geometry_;
  std::vector<std::int64_t> q_pos_, k_pos_;
  std::vector<std::int32_t> tokens_;  // [B, L] or, with the sink prepended, [B, L + 1]
  bool sink_prepended_ = false;
  xt::xtensor<T, 3> x_, dx_;
  xt::xtensor<T, 2> final_, dfinal_, logits_, dlogits_;
  xt::xtensor<T, 2> top_tokens_, dtop_tokens_;  // sink prepended: the token rows [B L, d]
  xt::xtensor<T, 1> token_loss_;
  bool inference_only_ = false, last_forward_inference_ = false;
  InferenceScratch<T> inference_;  // shared by all layers' evaluation-only attention
};

}  // namespace poslab
