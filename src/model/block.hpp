// One transformer layer with segment-level recurrence (Transformer-XL, Dai et al. 2019).
//
// The layer keeps a memory of its own inputs from earlier segments, mem [B, M, d], and attends
// over the concatenation [mem ; x]:
//
//   post-LN (Vaswani et al., Transformer-XL; the default)     pre-LN (option)
//     c  = [mem ; x]                                            c  = LN_1([mem ; x])
//     h  = LN_1(x + Attn(c))                                    h  = x + Attn(c)
//     y  = LN_2(h + FFN(h))                                     y  = h + FFN(LN_2(h))
//
// After the forward pass the memory becomes the last mem_len rows of [mem ; x]. It is a copy,
// so no gradient ever flows into it (stop-gradient, SG(.) in the paper).
#pragma once

#include <algorithm>
#include <string>

#include "core/buffer.hpp"
#include "core/parallel_loops.hpp"
#include "encodings/encoding.hpp"
#include "nn/attention.hpp"
#include "nn/feedforward.hpp"
#include "nn/layernorm.hpp"

namespace poslab {

template <class T>
class Block {
 public:
  Block(ParameterArena<T>& arena, int layer, int d_model, int n_heads, int d_inner,
        Activation act, bool pre_ln, bool sink_logit = false)
      : layer_(layer),
        d_(d_model),
        pre_ln_(pre_ln),
        attn(arena, prefix(layer) + "attn.", d_model, n_heads, sink_logit),
        ln_1(arena, prefix(layer) + "ln_1.", d_model),
        ff(arena, prefix(layer) + "ff.", d_model, d_inner, act),
        ln_2(arena, prefix(layer) + "ln_2.", d_model) {}

  void init(Rng& rng, double std) {
    attn.init(rng, std);
    ff.init(rng, std);
    ln_1.init();
    ln_2.init();
  }

  // x [B, L, d] -> y [B, L, d]. g.mem_len must equal memory_rows(). With `inference` (the
  // scratch shared by all layers, nn/inference_scratch.hpp) the attention keeps nothing for
  // backward; the layer's own [B, L, d] and [B, K, d] buffers are used either way.
  void forward(const T* x, const AttentionGeometry& g, Encoding<T>& enc, T* y,
               InferenceScratch<T>* inference = nullptr) {
    const int B = g.batch, L = g.q_len, M = g.mem_len, K = g.k_len, d = d_;
    const std::size_t sB = B, sL = L, sK = K, sd = d;
    ensure_shape(cat_, {sB, sK, sd});
    ensure_shape(a_, {sB, sL, sd});
    ensure_shape(h_, {sB, sL, sd});
    ensure_shape(f_, {sB, sL, sd});
    // c = [mem ; x]
#pragma omp parallel for schedule(static) if (long(B) * K * d >= kParallelLoopMinElements)
    for (int b = 0; b < B; ++b) {
      std::copy_n(mem_.data() + long(b) * mem_.shape(1) * d, long(M) * d, cat_.data() + long(b) * K * d);
      std::copy_n(x + long(b) * L * d, long(L) * d, cat_.data() + (long(b) * K + M) * d);
    }
    if (!pre_ln_) {
      ensure_shape(r1_, {sB, sL, sd});
      ensure_shape(r2_, {sB, sL, sd});
      attend(cat_.data(), g, enc, inference);
      add(x, a_.data(), r1_.data(), B * L * d);  // r1 = x + Attn(c)
      ln_1.forward(r1_.data(), h_.data(), B * L);  // h = LN_1(r1)
      ff.forward(h_.data(), f_.data(), B * L);
      add(h_.data(), f_.data(), r2_.data(), B * L * d);  // r2 = h + FFN(h)
      ln_2.forward(r2_.data(), y, B * L);                 // y = LN_2(r2)
    } else {
      ensure_shape(c_norm_, {sB, sK, sd});
      ensure_shape(h_norm_, {sB, sL, sd});
      ln_1.forward(cat_.data(), c_norm_.data(), B * K);  // c = LN_1([mem ; x])
      attend(c_norm_.data(), g, enc, inference);
      add(x, a_.data(), h_.data(), B * L * d);  // h = x + Attn(c)
      ln_2.forward(h_.data(), h_norm_.data(), B * L);
      ff.forward(h_norm_.data(), f_.data(), B * L);
      add(h_.data(), f_.data(), y, B * L * d);  // y = h + FFN(LN_2(h))
    }
  }

  // dy [B, L, d] -> dx [B, L, d] (accumulated). Gradients of memory rows are dropped.
  void backward(const T* dy, const AttentionGeometry& g, Encoding<T>& enc, T* dx) {
    const int B = g.batch, L = g.q_len, M = g.mem_len, K = g.k_len, d = d_;
    const std::size_t sB = B, sL = L, sK = K, sd = d;
    if (!pre_ln_) {
      ensure_shape(dcat_, {sB, sK, sd});  // written by the attention's backward
      ensure_zeros(dr2_, {sB, sL, sd});
      ensure_zeros(dr1_, {sB, sL, sd});
      ln_2.backward(dy, r2_.data(), dr2_.data(), B * L);
      // r2 = h + FFN(h): dh = dr2 + FFN'(dr2), accumulated into dr2 itself.
      ensure_shape(dh_, {sB, sL, sd});
      std::copy(dr2_.begin(), dr2_.end(), dh_.begin());
      ff.backward(dr2_.data(), h_.data(), dh_.data(), B * L);
      ln_1.backward(dh_.data(), r1_.data(), dr1_.data(), B * L);
      // r1 = x + Attn(c)
      add_into(dx, dr1_.data(), B * L * d);
      attn.backward(dr1_.data(), cat_.data(), g, enc, layer_, dcat_.data());
    } else {
      ensure_zeros(dcat_, {sB, sK, sd});
      ensure_zeros(dh_norm_, {sB, sL, sd});
      ensure_shape(dc_norm_, {sB, sK, sd});  // written by the attention's backward
      ensure_shape(dh_, {sB, sL, sd});
      // y = h + FFN(LN_2(h))
      std::copy_n(dy, long(B) * L * d, dh_.data());
      ff.backward(dy, h_norm_.data(), dh_norm_.data(), B * L);
      ln_2.backward(dh_norm_.data(), h_.data(), dh_.data(), B * L);
      // h = x + Attn(LN_1([mem ; x]))
      add_into(dx, dh_.data(), B * L * d);
      attn.backward(dh_.data(), c_norm_.data(), g, enc, layer_, dc_norm_.data());
      ln_1.backward(dc_norm_.data(), cat_.data(), dcat_.data(), B * K);
    }
    // The segment rows of dc flow into dx; the memory rows stop here.
    if (M == 0)
      add_into(dx, dcat_.data(), long(B) * L * d);
    else
      for (int b = 0; b < B; ++b)
        add_into(dx + long(b) * L * d, dcat_.data() + (long(b) * K + M) * d, L * d);
  }

  // mem <- last `mem_len` rows of [mem ; x] (the cat_ of the last forward pass).
  // With sinks = S > 0 (StreamingLLM's attention sinks, eval/streaming_cache.hpp), the first S
  // rows of [mem ; x] stay in front instead, and the last mem_len - S rows follow them:
  //   K <= mem_len:  mem = [mem ; x]                            (nothing evicted yet)
  //   K >  mem_len:  mem = [mem ; x][0 : S] ++ [mem ; x][K - (mem_len - S) : K]
  // Since nothing is evicted before the memory holds mem_len >= S rows, the first S rows are
  // always the first S tokens the layer ever saw (since the last reset).
  // Both memory buffers are [B, mem_len, d] and only their first memory_rows() rows of each batch
  // element are in use, so neither a new segment nor a reset ever reallocates them.
  void update_memory(int B, int K, int mem_len, int sinks = 0) {
    const int new_rows = std::min(mem_len, K);
    const int kept_sinks = K > mem_len ? std::min(sinks, mem_len) : 0;  // rows kept from the front
    const int recent = new_rows - kept_sinks;                           // rows kept from the end
    ensure_shape(next_mem_, {std::size_t(B), std::size_t(mem_len), std::size_t(d_)});
    for (int b = 0; b < B; ++b) {
      const T* c = cat_.data() + long(b) * K * d_;  // [K, d]
      T* m = next_mem_.data() + long(b) * mem_len * d_;
      std::copy_n(c, long(kept_sinks) * d_, m);
      std::copy_n(c + long(K - recent) * d_, long(recent) * d_, m + long(kept_sinks) * d_);
    }
    std::swap(mem_, next_mem_);
    mem_rows_ = new_rows;
  }
  void reset_memory(int B) {
    mem_rows_ = 0;
    batch_ = B;
  }
  int memory_rows() const { return mem_rows_; }
  int memory_batch() const { return batch_; }
  // Saving and restoring the memory (resumable training): `rows` [B, memory_rows(), d] in use.
  void copy_memory_to(T* rows) const {
    for (int b = 0; b < batch_; ++b)
      std::copy_n(mem_.data() + long(b) * mem_.shape(1) * d_, long(mem_rows_) * d_,
                  rows + long(b) * mem_rows_ * d_);
  }
  void restore_memory(int B, int mem_len, int rows_in_use, const T* rows) {
    ensure_shape(mem_, {std::size_t(B), std::size_t(mem_len), std::size_t(d_)});
    for (int b = 0; b < B; ++b)
      std::copy_n(rows + long(b) * rows_in_use * d_, long(rows_in_use) * d_,
                  mem_.data() + long(b) * mem_len * d_);
    mem_rows_ = rows_in_use;
    batch_ = B;
  }

 private:
  // a_ = Attn(c), for training or for evaluation only.
  void attend(const T* c, const AttentionGeometry& g, Encoding<T>& enc,
              InferenceScratch<T>* inference) {
    if (inference)
      attn.forward_inference(c, g, enc, layer_, a_.data(), *inference);
    else
      attn.forward(c, g, enc, layer_, a_.data());
  }
  static std::string prefix(int layer) { return "layer" + std::to_string(layer) + "."; }
  static void add(const T* a, const T* b, T* out, long n) { parallel_add(a, b, out, n); }
  static void add_into(T* out, const T* a, long n) { parallel_add_into(out, a, n); }

  int layer_, d_;
  bool pre_ln_;

 public:
  Attention<T> attn;
  LayerNorm<T> ln_1;
  FeedForward<T> ff;
  LayerNorm<T> ln_2;

 private:
  xt::xtensor<T, 3> mem_, next_mem_;  // [B, mem_len, d], the first mem_rows_ rows in use
  int mem_rows_ = 0, batch_ = 0;
  xt::xtensor<T, 3> cat_, a_, h_, f_, r1_, r2_, c_norm_, h_norm_;
  xt::xtensor<T, 3> dcat_, dr1_, dr2_, dh_, dh_norm_, dc_norm_;
};

}  // namespace poslab
