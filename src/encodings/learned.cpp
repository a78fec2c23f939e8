// Learned absolute encoding (Gehring et al. 2017; GPT, BERT), hook (a):
//
//   x_0[b, i] = sqrt(d) E[token] + U[pos_i],   U [max_len, d] learned, init N(0, init_std)
//
// A table row exists only for positions 0..max_len-1: a longer sequence (or continued positions
// under recurrence) is an error, reported with the position and the table size, never silently
// clamped. Backward: dU[pos_i] += sum over the batch of dx_0[b, i].
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "encodings/registry.hpp"

namespace poslab {

namespace {
template <class T>
class Learned : public Encoding<T> {
 public:
  Learned(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        d_(s.d_model),
        max_len_(int(o.get_int("max_len"))),
        init_std_(o.get_double("init_std")) {
    U_ = arena.add("learned.U", {std::size_t(max_len_), std::size_t(d_)}, false);
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    T* u = arena.value(U_);
    for (std::size_t n = 0; n < U_.size; ++n) u[n] = T(rng.normal(0.0, init_std_));
  }

  void embed_forward(const AttentionGeometry& g, T* x) override {
    const T* U = arena_.value(U_);
    for (int i = 0; i < g.q_len; ++i) {
      const std::int64_t pos = g.q_pos[i];
      if (pos < 0 || pos >= max_len_)
        throw std::out_of_range(
            "encoding 'learned': position " + std::to_string(pos) +
            " has no row in its table of max_len = " + std::to_string(max_len_) +
            " positions; raise encoding.max_len or evaluate on shorter sequences");
      for (int b = 0; b < g.batch; ++b) {
        T* row = x + (long(b) * g.q_len + i) * d_;
        for (int c = 0; c < d_; ++c) row[c] += U[pos * d_ + c];
      }
    }
  }

  void embed_backward(const AttentionGeometry& g, const T* dx) override {
    T* dU = arena_.grad(U_);
    for (int i = 0; i < g.q_len; ++i)
      for (int b = 0; b < g.batch; ++b) {
        const T* row = dx + (long(b) * g.q_len + i) * d_;
        for (int c = 0; c < d_; ++c) dU[g.q_pos[i] * d_ + c] += row[c];
      }
  }

 private:
  ParameterArena<T>& arena_;
  int d_, max_len_;
  double init_std_;
  Param U_;
};

// A table has rows for positions 0..max_len-1: the training length and the main evaluation
// length must fit (longer length factors are evaluated and reported as not possible, by design),
// or with randomized positions every position below train.max_position (with PoSE, below
// train.pose_target_len). Checked by the config
// loader, so a config that cannot run fails before anything is written.
std::optional<ConfigProblem> max_len_covers_positions(const Config& config) {
  if (!config.encoding.options.has("max_len")) return std::nullopt;
  const std::int64_t max_len = config.encoding.options.get_int("max_len");
  const auto& t = config.train;
  const int main_len = config.eval.seq_len > 0 ? config.eval.seq_len : t.seq_len;
  std::int64_t needed =
      t.randomized_positions ? std::int64_t(t.max_position) : std::max(t.seq_len, main_len);
  std::string what = t.randomized_positions ? "train.max_position"
                     : main_len > t.seq_len ? "eval.seq_len"
                                            : "train.seq_len";
  if (t.pose_target_len > needed)  // PoSE's ids reach pose_target_len - 1
    needed = t.pose_target_len, what = "train.pose_target_len";
  if (config.model.sink_token && !t.randomized_positions)  // the sink at 0, x_i at i + 1
    needed += 1, what += " + 1 (model.sink_token)";
  if (max_len >= needed) return std::nullopt;
  return ConfigProblem{{"encoding.max_len", what},
                       "encoding.max_len (" + std::to_string(max_len) + ") must be at least " +
                           what + " (" + std::to_string(needed) +
                           "): encoding 'learned' has a row per position"};
}

}  // namespace

EncodingInfo learned_encoding_info() {
  return {"learned",
          EncodingFamily::absolute,
          "absolute: a learned vector per position added to the token embeddings",
          "Gehring et al. 2017; Radford et al. 2018",
          {{"max_len", std::int64_t(1024), "number of positions in the table (0..max_len-1)", 1,
            1 << 20},
           {"init_std", 0.02, "std of the N(0, std) initialisation", 0, 10}},
          factory_float<Learned>(),
          factory_double<Learned>(),
          max_len_covers_positions};
}

}  // namespace poslab
