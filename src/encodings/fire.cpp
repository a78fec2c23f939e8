// FIRE, functional interpolation for relative positions: Li, You, Guruganesh, Ainslie, Ontanon,
// Zaheer, Sanghai, Yang, Kumar & Bhojanapalli (2023), "Functional Interpolation for Relative
// Positions Improves Long Context Transformers", ICLR 2024, section 3.
//
// The bias is a learned *function* of the distance, evaluated on a normalised distance so that
// longer contexts map into the input range seen in training ("progressive interpolation"):
//
//   S_ij = q_i . k_j / sqrt(d_h)  +  f_theta( psi(i - j) / psi(max(i, L_thr)) )_h    (not scaled)
//
//   psi(x)   = log(c x + 1)                       c > 0 learned: a log scale for distances
//   f_theta  = MLP 1 -> hidden (ReLU) -> H        one output per head
//   L_thr    > 0 learned threshold: short queries (i <= L_thr) all share the normaliser
//              psi(L_thr), so the bias of a short context is not blown up by a tiny psi(i)
//
// with i = q_pos[i] (the query's own position) and i - j = q_pos[i] - k_pos[j] >= 0 (memory keys
// included; a visible key to the right of its query is refused). The input u = psi(i-j)/psi(N_i),
// N_i = max(i, L_thr), lies in [0, 1] for every causal pair.
//
// Family. FIRE depends on i - j and, through N_i, on the query position itself, so it is not
// exactly relative: for queries at or below L_thr it is (shifting every position changes nothing
// while they stay below), beyond it the same distance gives a smaller input as i grows. poslab
// registers it as EncodingFamily::relative_normalized and the conformance kit checks both
// halves of that statement. Note also that under state reuse with positions restarted per
// segment (memory.continue_positions = false), i is the position inside the segment, so the
// normaliser only sees the segment length; continue_positions gives it the stream position.
//
// Choices where the paper leaves freedom (defaults follow the paper's reference code):
//   - c = softplus(c_raw) > 0, init c_init = 0.1 (the reference code stores c and takes |c|).
//   - L_thr = exp(log_L), init threshold_init = 512, learned unless learn_threshold = false. The
//     log parametrisation makes Adam move L_thr by a relative amount per step (the reference code
//     learns a multiplier of a fixed 512, which behaves the same way near the start).
//   - f_theta: w1, b1 [hidden] then W2 [hidden, H]. w1, b1 ~ U(-1, 1) and W2 ~ U(+-1/sqrt(hidden)),
//     PyTorch's default Linear init that the reference code relies on. The output layer has no
//     bias: a per-head constant is added to every logit of a row and cancels in the softmax.
//   - One set of parameters per layer (layer{n}.fire.*), as the reference code builds one module
//     per attention layer; `shared` uses one set (fire.*) for all layers. No weight decay.
//     In the arena: w1, b1 [hidden], W2 [hidden, H], c [1] (holds c_raw), log_L [1].
//
// Computation. f_theta costs O(hidden * H) per input, so it is evaluated once per *distinct*
// input, not once per (i, j) pair:
//   - queries with i <= L_thr share N = L_thr: their inputs depend on the distance only, one
//     entry per distance in [dmin, dmax] (K entries with contiguous positions);
//   - each query beyond L_thr has its own N_i: one entry per distance of its row.
//   entry n: u_n = psi(d_n) / psi(N_n);   Hid = relu(u w1^T + b1) [N, hidden];
//   OutT = W2^T Hid^T [H, N] (one gemm per block of entries);
//   scores[b, h, i, j] += OutT[h, index_ij]                      (gather, distance_bias.hpp)
// Backward recomputes the entries and the hidden layer (no per-layer cache):
//   dOutT[h, n] = sum_{b,i,j : index = n} dS;   dW2 += Hid^T dOut;   dHid = dOut W2^T;
//   dpre = dHid * [pre > 0];  dw1 += dpre^T u,  db1 += sum dpre,  du = dpre w1;
//   du/dc = (d/(1 + c d) - u N/(1 + c N)) / psi(N);   du/dL = -u c / ((1 + c L) psi(L)) if N = L;
//   dc_raw = dc sigmoid(c_raw),   dlog_L = dL * L.
// Option `naive` evaluates the MLP for every visible (b, h, i, j) cell instead (the reference
// the tests compare against).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/blas.hpp"
#include "core/buffer.hpp"
#include "encodings/distance_bias.hpp"
#include "encodings/geometry_key.hpp"
#include "encodings/registry.hpp"
#include "encodings/softplus.hpp"

namespace poslab {

namespace {

// The distance of a visible cell; a key to the right of its query has no psi.
inline std::int64_t causal_distance(std::int64_t d) {
  if (d < 0)
    throw std::invalid_argument(
        "fire: a visible key has a larger position than its query (positions must follow the "
        "causal mask)");
  return d;
}

template <class T>
class Fire : public Encoding<T> {
 public:
  Fire(const Options& o, const EncodingShape& s, ParameterArena<T>& arena)
      : arena_(arena),
        H_(s.n_heads),
        n_layers_(s.n_layers),
        hidden_(int(o.get_int("hidden"))),
        c_init_(o.get_double("c_init")),
        threshold_init_(o.get_double("threshold_init")),
        learn_threshold_(o.get_bool("learn_threshold")),
        shared_(o.get_bool("shared")),
        naive_(o.get_bool("naive")) {
    if (H_ <= 0 || hidden_ <= 0) throw std::invalid_argument("fire: needs n_heads, hidden > 0");
    if (!(c_init_ > 0)) throw std::invalid_argument("fire: c_init must be > 0");
    if (!(threshold_init_ > 0)) throw std::invalid_argument("fire: threshold_init must be > 0");
    const std::size_t hid = hidden_, H = H_;
    const int sets = shared_ ? 1 : s.n_layers;
    for (int n = 0; n < sets; ++n) {
      const std::string prefix = shared_ ? "fire." : "layer" + std::to_string(n) + ".fire.";
      Set p;
      p.w1 = arena.add(prefix + "w1", {hid}, false);
      p.b1 = arena.add(prefix + "b1", {hid}, false);
      p.W2 = arena.add(prefix + "W2", {hid, H}, false);
      p.c = arena.add(prefix + "c", {1}, false);
      if (learn_threshold_) p.log_L = arena.add(prefix + "log_L", {1}, false);
      sets_.push_back(p);
    }
  }

  void init(ParameterArena<T>& arena, Rng& rng) override {
    auto uniform = [&](Param p, double bound) {
      T* w = arena.value(p);
      for (std::size_t i = 0; i < p.size; ++i) w[i] = T((2 * rng.uniform() - 1) * bound);
    };
    for (const Set& p : sets_) {
      uniform(p.w1, 1.0);
      uniform(p.b1, 1.0);
      uniform(p.W2, 1.0 / std::sqrt(double(hidden_)));
      arena.value(p.c)[0] = T(softplus_inverse(c_init_));
      if (learn_threshold_) arena.value(p.log_L)[0] = T(std::log(threshold_init_));
    }
  }

  bool has_score_terms() const override { return true; }

  void scores_forward(int layer, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                      T /*scale*/, T* scores) override {
    const Set& p = sets_[check(layer, g)];
    const Scalars sc = scalars(p);
    if (naive_) return naive_forward(p, sc, g, scores);
    const int N = build_entries(g, sc);
    const int H = H_;
    const auto out = matrix(entries_.table(H, N));  // OutT [H, N]
    for (int s = 0; s < N; s += kBlock) {
      const int nb = std::min(kBlock, N - s);
      hidden_layer(p, s, nb);
      // OutT[:, s:s+nb] = W2^T Hid^T      [H, nb] = [H, hidden] . [hidden, nb]
      multiply(out.column_block(s, nb), W2(p).t(), hidden_rows(nb).t());
    }
    entries_.gather(g, scores);  // += OutT[h, index_ij]
  }

  void scores_backward(int layer, const AttentionGeometry& g, const T* /*q*/, const T* /*k*/,
                       T /*scale*/, const T* dscores, T* /*dq*/, T* /*dk*/) override {
    const Set& p = sets_[check(layer, g)];
    const Scalars sc = scalars(p);
    if (naive_) return naive_backward(p, sc, g, dscores);
    const int N = build_entries(g, sc);
    const int hid = hidden_;
    // dOutT[h, n] = sum_{b, i, j : index_ij = n} dS[b, h, i, j]
    const auto dout = matrix(entries_.scatter(g, dscores, N));  // [H, N]
    const T* w1 = arena_.value(p.w1);
    T* dw1 = arena_.grad(p.w1);
    T* db1 = arena_.grad(p.b1);
    double dc = 0, dL = 0;
    ensure_shape(dhid_, {std::size_t(kBlock), std::size_t(hid)});
    for (int s = 0; s < N; s += kBlock) {
      const int nb = std::min(kBlock, N - s);
      hidden_layer(p, s, nb);
      const auto dOut = dout.column_block(s, nb);  // dOutT[:, s:s+nb], [H, nb]
      // dW2 += Hid^T dOut       [hidden, H] = [hidden, nb] . [nb, H]
      multiply(W2_grad(p), hidden_rows(nb).t(), dOut.t(), T(1), T(1));
      // dHid = dOut W2^T        [nb, hidden] = [nb, H] . [H, hidden]
      multiply(matrix(dhid_).row_block(0, nb), dOut.t(), W2(p).t());
      for (int r = 0; r < nb; ++r) {
        const int n = s + r;
        const T* pre = pre_.data() + long(r) * hid;
        const T* dh = dhid_.data() + long(r) * hid;
        T du = 0;
        for (int m = 0; m < hid; ++m) {
          if (!(pre[m] > 0)) continue;  // ReLU: no gradient where it is off
          dw1[m] += dh[m] * u_[n];
          db1[m] += dh[m];
          du += dh[m] * w1[m];
        }
        accumulate_scalars(sc, dist_[n], thr_[n], npos_[n], double(du), dc, dL);
      }
    }
    finish_scalars(p, sc, dc, dL);
  }

 private:
  static constexpr int kBlock = 4096;  // entries per MLP block: bounds the hidden buffers

  struct Set {
    Param w1, b1, W2, c, log_L;  // log_L only with learn_threshold
  };
  // The scalars of a set: c = softplus(c_raw), L_thr, and psi(L_thr) = log(1 + c L_thr).
  struct Scalars {
    double c, L, psi_L;
  };

  Scalars scalars(const Set& p) const {
    const double c = softplus(double(arena_.value(p.c)[0]));
    const double L =
        learn_threshold_ ? std::exp(double(arena_.value(p.log_L)[0])) : threshold_init_;
    return {c, L, std::log1p(c * L)};
  }

  int check(int layer, const AttentionGeometry& g) const {
    if (g.n_heads != H_)
      throw std::invalid_argument("fire: geometry does not match the shape it was built for");
    if (layer < 0 || layer >= n_layers_) throw std::out_of_range("fire: no such layer");
    return shared_ ? 0 : layer;
  }

  // The normalising position of query i: max(q_pos[i], L_thr). Thresholded (N = L_thr) when
  // L_thr >= q_pos[i]; only those inputs depend on L_thr.
  static bool thresholded(const Scalars& sc, std::int64_t q_pos) { return sc.L >= double(q_pos); }

  // u = psi(d) / psi(N), psi(x) = log(1 + c x)
  static double input(const Scalars& sc, std::int64_t d, bool thr, std::int64_t q_pos) {
    const double psi_N = thr ? sc.psi_L : std::log1p(sc.c * double(q_pos));
    return std::log1p(sc.c * double(d)) / psi_N;
  }

  // Fills dist_, npos_, thr_, u_ (one per entry) and the entry index [L, K] of entries_. Returns
  // the number of entries.
  // The entries and the index depend only on the mask, the positions and which queries are
  // within the threshold; a training step asks in the forward and backward pass of every
  // layer, mostly with the same three, so they are kept and only u (which depends on c and
  // L_thr) is recomputed when those stay the same.
  int build_entries(const AttentionGeometry& g, const Scalars& sc) {
    const int L = g.q_len, K = g.k_len;
    std::vector<char>& within = within_now_;  // a member: a training step allocates nothing
    within.resize(L);
    for (int i = 0; i < L; ++i) within[i] = thresholded(sc, g.q_pos[i]);
    if (entries_key_.same_as_last(g) && within == within_) return compute_inputs(sc);
    within_.clear();  // until the index below is complete (an error leaves nothing cached)
    dist_.clear();
    npos_.clear();
    thr_.clear();
    int* index = entries_.clear_index(g);
    // Shared block: every thresholded query, one entry per distance in [lo, hi].
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
    for (int i = 0; i < L; ++i)
      if (thresholded(sc, g.q_pos[i]))
        for (int j = 0; j < K; ++j)
          if (g.visible(i, j)) {
            const std::int64_t d = causal_distance(g.q_pos[i] - g.k_pos[j]);
            lo = std::min(lo, d);
            hi = std::max(hi, d);
          }
    if (hi - lo >= std::numeric_limits<int>::max() / 2)
      throw std::invalid_argument("fire: position range too large");
    for (std::int64_t d = lo; d <= hi; ++d) push_entry(d, 0, true);
    for (int i = 0; i < L; ++i) {
      const std::int64_t qp = g.q_pos[i];
      int* idx = index + long(i) * K;
      if (thresholded(sc, qp)) {
        for (int j = 0; j < K; ++j)
          if (g.visible(i, j)) idx[j] = int(g.q_pos[i] - g.k_pos[j] - lo);
        continue;
      }
      // A query beyond the threshold: its own block over the distances of its row.
      std::int64_t rlo = std::numeric_limits<std::int64_t>::max(), rhi = -1;
      for (int j = 0; j < K; ++j)
        if (g.visible(i, j)) {
          const std::int64_t d = causal_distance(qp - g.k_pos[j]);
          rlo = std::min(rlo, d);
          rhi = std::max(rhi, d);
        }
      const int first = int(dist_.size());
      for (std::int64_t d = rlo; d <= rhi; ++d) push_entry(d, qp, false);
      for (int j = 0; j < K; ++j)
        if (g.visible(i, j)) idx[j] = first + int(qp - g.k_pos[j] - rlo);
    }
    within_ = within;
    return compute_inputs(sc);
  }

  // u_[n] = input(entry n) for the current c and L_thr. Returns the number of entries.
  int compute_inputs(const Scalars& sc) {
    const int N = int(dist_.size());
    u_.resize(N);
    for (int n = 0; n < N; ++n) u_[n] = T(input(sc, dist_[n], thr_[n], npos_[n]));
    return N;
  }
  void push_entry(std::int64_t d, std::int64_t q_pos, bool thr) {
    dist_.push_back(d);
    npos_.push_back(q_pos);
    thr_.push_back(thr);
  }

  // W2 of a set and its gradient, [hidden, H].
  ConstMatrixView<T> W2(const Set& p) const { return matrix(arena_.value(p.W2), hidden_, H_); }
  MatrixView<T> W2_grad(const Set& p) { return matrix(arena_.grad(p.W2), hidden_, H_); }
  // The first nb rows of hid_ [kBlock, hidden]: the hidden layer of the current block.
  ConstMatrixView<T> hidden_rows(int nb) const { return matrix(hid_).row_block(0, nb); }

  // pre_ = u w1^T + b1, hid_ = relu(pre_), for entries s .. s+nb-1      [nb, hidden] each
  void hidden_layer(const Set& p, int s, int nb) {
    const int hid = hidden_;
    ensure_shape(pre_, {std::size_t(kBlock), std::size_t(hid)});
    ensure_shape(hid_, {std::size_t(kBlock), std::size_t(hid)});
    const T* w1 = arena_.value(p.w1);
    const T* b1 = arena_.value(p.b1);
    for (int r = 0; r < nb; ++r) {
      const T u = u_[s + r];
      T* pre = pre_.data() + long(r) * hid;
      T* h = hid_.data() + long(r) * hid;
      for (int m = 0; m < hid; ++m) {
        pre[m] = u * w1[m] + b1[m];
        h[m] = pre[m] > 0 ? pre[m] : T(0);
      }
    }
  }

  // For an input u = psi(dist) / psi(N) with gradient du: dc += du du/dc, and dL += du du/dL if
  // the normaliser is the threshold (N = L_thr; otherwise N = q_pos).
  static void accumulate_scalars(const Scalars& sc, std::int64_t dist, bool thr,
                                 std::int64_t q_pos, double du, double& dc, double& dL) {
    if (du == 0) return;
    const double d = double(dist);
    const double Npos = thr ? sc.L : double(q_pos);
    const double psi_N = thr ? sc.psi_L : std::log1p(sc.c * Npos);
    const double u = std::log1p(sc.c * d) / psi_N;
    dc += du * (d / (1 + sc.c * d) - u * Npos / (1 + sc.c * Npos)) / psi_N;
    if (thr) dL += du * (-u * sc.c / ((1 + sc.c * sc.L) * psi_N));
  }

  // c = softplus(c_raw): dc_raw = dc sigmoid(c_raw);  L = exp(log_L): dlog_L = dL L.
  void finish_scalars(const Set& p, const Scalars& sc, double dc, double dL) {
    arena_.grad(p.c)[0] += T(dc * sigmoid(double(arena_.value(p.c)[0])));
    if (learn_threshold_) arena_.grad(p.log_L)[0] += T(dL * sc.L);
  }

  // ------------------------------------------------------------------------------------------
  // Naive reference: the MLP evaluated for every visible (b, h, i, j). O(B H L K hidden).
  // ------------------------------------------------------------------------------------------
  // scores [B, Hc, L, K]: block (b, h - h0) for the call's heads h = h0 .. h0 + Hc - 1.
  void naive_forward(const Set& p, const Scalars& sc, const AttentionGeometry& g, T* scores) {
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_, Hc = g.heads();
    const T* w1 = arena_.value(p.w1);
    const T* b1 = arena_.value(p.b1);
    const T* W2 = arena_.value(p.W2);
    for (int b = 0; b < B; ++b)
      for (int h = g.head_begin; h < g.head_end(); ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const std::int64_t d = causal_distance(g.q_pos[i] - g.k_pos[j]);
            const T u = T(input(sc, d, thresholded(sc, g.q_pos[i]), g.q_pos[i]));
            T f = 0;
            for (int m = 0; m < hidden_; ++m)
              f += W2[long(m) * H + h] * std::max(T(0), u * w1[m] + b1[m]);
            scores[((long(b) * Hc + h - g.head_begin) * L + i) * K + j] += f;
          }
  }

  void naive_backward(const Set& p, const Scalars& sc, const AttentionGeometry& g,
                      const T* dscores) {
    require_all_heads(g, "fire");
    const int B = g.batch, L = g.q_len, K = g.k_len, H = H_;
    const T* w1 = arena_.value(p.w1);
    const T* b1 = arena_.value(p.b1);
    const T* W2 = arena_.value(p.W2);
    T* dw1 = arena_.grad(p.w1);
    T* db1 = arena_.grad(p.b1);
    T* dW2 = arena_.grad(p.W2);
    double dc = 0, dL = 0;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < K; ++j) {
            if (!g.visible(i, j)) continue;
            const T ds = dscores[((long(b) * H + h) * L + i) * K + j];
            const std::int64_t d = causal_distance(g.q_pos[i] - g.k_pos[j]);
            const bool thr = thresholded(sc, g.q_pos[i]);
            const T u = T(input(sc, d, thr, g.q_pos[i]));
            T du = 0;
            for (int m = 0; m < hidden_; ++m) {
              const T pre = u * w1[m] + b1[m];
              if (!(pre > 0)) continue;
              dW2[long(m) * H + h] += ds * pre;
              const T dpre = ds * W2[long(m) * H + h];
              dw1[m] += dpre * u;
              db1[m] += dpre;
              du += dpre * w1[m];
            }
            accumulate_scalars(sc, d, thr, g.q_pos[i], double(du), dc, dL);
          }
    finish_scalars(p, sc, dc, dL);
  }

  ParameterArena<T>& arena_;
  int H_, n_layers_, hidden_;
  double c_init_, threshold_init_;
  bool learn_threshold_, shared_, naive_;
  std::vector<Set> sets_;  // one per layer, or one if shared

  // Work buffers, rebuilt on every call (they depend on the parameters c and L_thr).
  std::vector<std::int64_t> dist_, npos_;  // per entry: distance, query position
  std::vector<char> thr_;                  // per entry: normaliser is L_thr
  std::vector<T> u_;                       // per entry: the MLP input
  xt::xtensor<T, 2> pre_, hid_, dhid_;     // [kBlock, hidden]
  // Entry index [L, K] of each visible cell and the table OutT [H, N] (f per entry and head; dOut
  // in backward), gathered into the scores and scattered back by distance_bias.hpp.
  DistanceBias<T> entries_;
  GeometryKey entries_key_;   // the mask and positions of the entries and index
  std::vector<char> within_;  // [L]: which queries were within the threshold
  std::vector<char> within_now_;  // [L]: the same for the current call (work buffer)
};

}  // namespace

EncodingInfo fire_encoding_info() {
  return {"fire",
          EncodingFamily::relative_normalized,
          "FIRE: learned MLP bias f(psi(i - j) / psi(max(i, L_thr))), psi(x) = log(c x + 1), "
          "c and L_thr learned, per layer",
          "Li et al. 2023",
          {
              {"hidden", std::int64_t(32), "hidden width of the MLP 1 -> hidden (ReLU) -> H", 1,
               4096},
              {"c_init", 0.1, "initial c of psi(x) = log(c x + 1) (c = softplus of a parameter)",
               1e-6},
              {"threshold_init", 512.0,
               "initial L_thr: queries at positions <= L_thr share the normaliser psi(L_thr)", 1},
              {"learn_threshold", true,
               "learn L_thr (as log L_thr); false keeps it at threshold_init"},
              {"shared", false, "one MLP, c and L_thr for all layers instead of one set per layer"},
              {"naive", false,
               "evaluate the MLP for every (b, h, i, j) cell (slow reference for tests)"},
          },
          factory_float<Fire>(),
          factory_double<Fire>()};
}

}  // namespace poslab
