// The streaming evaluation with attention sinks and its baselines: what and why are in
// streaming_cache.hpp; this file is the how.
#include "eval/streaming_cache.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <memory>
#include <numeric>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "eval/memory_estimate.hpp"
#include "eval/mode.hpp"
#include "eval/rows.hpp"
#include "eval/sliding_window.hpp"
#include "tasks/make_source.hpp"

namespace poslab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The model's evaluation state for one pass, restored when the pass ends (or throws).
class PassState {
 public:
  PassState(TransformerLM<float>& model, int mem_len, int sinks)
      : model_(model),
        mem_len_(model.mem_len()),
        sinks_(model.set_memory_sinks(sinks)),
        inference_only_(model.set_inference_only(true)),
        randomized_(model.set_randomized_positions(false)) {
    model.set_mem_len(mem_len);
    model.reset_memory();
  }
  ~PassState() {
    model_.set_mem_len(mem_len_);
    model_.set_memory_sinks(sinks_);
    model_.set_inference_only(inference_only_);
    model_.set_randomized_positions(randomized_);
    model_.reset_memory();
  }

 private:
  TransformerLM<float>& model_;
  int mem_len_, sinks_;
  bool inference_only_, randomized_;
};

// With a prepended sink token (model.sink_token) the stream the model reads is [SINK, tokens]:
// token t is stream entry u = t + 1, and the sink is entry 0 (the model prepends it on the
// first step, whose memory is empty). Without one, u = t.
int sink_offset(const TransformerLM<float>& model) { return model.config().sink_token ? 1 : 0; }

// sinks, window: token by token, the memory of S + R rows keeping its first S (S = 0: window).
StreamResult read_with_cache(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                             int sinks, int recent, StreamPositions positions, long first_target) {
  const auto T = static_cast<std::int64_t>(tokens.size());
  const int off = sink_offset(model);
  StreamResult r;
  r.first_target = first_target;
  const auto start = Clock::now();
  PassState state(model, sinks + recent, sinks);
  for (std::int64_t t = 0; t + 1 < T; ++t) {  // input tokens[t], target tokens[t + 1]
    // Before the step the memory holds M = min(u, S + R) rows (u = t + off, the stream entry of
    // token t): entries 0..u-1 while u <= S + R, then the sinks 0..S-1 and the recent u-R..u-1
    // (Block::update_memory evicted the rest). On the first step of a model with a sink token
    // the memory is empty and the model prepends the sink: entry 0 of the keys [1 + 1].
    const std::int64_t u = t + off;
    const std::vector<std::int64_t> pos = stream_step_positions(positions, sinks, recent, u);
    const int prepended = (off == 1 && t == 0) ? 1 : 0;
    if (std::int64_t(model.memory_rows()) + prepended + 1 != std::int64_t(pos.size()))
      throw std::logic_error("streaming cache: the memory holds " +
                             std::to_string(model.memory_rows()) + " rows at step " +
                             std::to_string(t) + ", the cache policy " +
                             std::to_string(pos.size() - 1));
    // One query [1, 1] over keys [1, M + 1]; the memory then drops token t - R (if full).
    model.forward(&tokens[std::size_t(t)], &tokens[std::size_t(t + 1)], nullptr, 1, 1, 0,
                  /*update_memory=*/true, pos.data());
    if (t + 1 >= first_target) r.token_losses.push_back(model.token_loss().data()[0]);
  }
  r.seconds = seconds_since(start);
  return r;
}

// dense: segments of `segment` tokens; the memory keeps the whole stream read so far, so token t
// attends to tokens 0..t at their text positions, as with an unbounded cache.
StreamResult read_dense(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                        int segment, long first_target) {
  const auto T = static_cast<std::int64_t>(tokens.size());
  const int off = sink_offset(model);  // the sink token, if any, is stream entry 0
  StreamResult r;
  r.first_target = first_target;
  const auto start = Clock::now();
  PassState state(model, int(T) + off, /*sinks=*/0);
  std::vector<std::int64_t> pos;
  for (std::int64_t t0 = 0; t0 + 1 < T; t0 += segment) {
    const int len = int(std::min<std::int64_t>(segment, T - 1 - t0));  // inputs t0 .. t0+len-1
    // keys: memory (the sink) and 0..t0-1, then the segment t0..t0+len-1, at entries 0..
    pos.resize(std::size_t(off + t0 + len));
    std::iota(pos.begin(), pos.end(), std::int64_t(0));
    model.forward(&tokens[std::size_t(t0)], &tokens[std::size_t(t0 + 1)], nullptr, 1, len, 0,
                  /*update_memory=*/true, pos.data());
    for (int i = 0; i < len; ++i)  // target t0 + i + 1
      if (t0 + i + 1 >= first_target) r.token_losses.push_back(model.token_loss().data()[i]);
  }
  r.seconds = seconds_since(start);
  return r;
}

// memory: Transformer-XL's segment recurrence (Dai et al. 2019, section 3.2; the state reuse of
// the state-reuse study): segments of `segment` tokens, each attending to itself (causally) and to
// the cached layer inputs of the `memory` tokens before it, h~_tau = [SG(h_{tau-1}) o h_tau].
// The memory keeps its last `memory` rows after each segment. Positions are text positions (a
// relative encoding sees only i - j): keys t0 - M' .. t0 + len - 1 for M' cached rows.
StreamResult read_with_memory(TransformerLM<float>& model, const std::vector<std::int32_t>& tokens,
                              int segment, int memory, long first_target) {
  const auto T = static_cast<std::int64_t>(tokens.size());
  const int off = sink_offset(model);  // the sink token, if any, is stream entry 0
  StreamResult r;
  r.first_target = first_target;
  const auto start = Clock::now();
  PassState state(model, memory, /*sinks=*/0);
  std::vector<std::int64_t> pos;
  for (std::int64_t t0 = 0; t0 + 1 < T; t0 += segment) {
    const int len = int(std::min<std::int64_t>(segment, T - 1 - t0));  // inputs t0 .. t0+len-1
    const auto cached = std::int64_t(model.memory_rows());             // M' = min(t0, memory)
    const int prepended = (off == 1 && t0 == 0) ? 1 : 0;  // the sink, on the first segment
    pos.resize(std::size_t(cached + prepended + len));  // keys: memory, (sink,) the segment
    std::iota(pos.begin(), pos.end(), t0 + off - cached - prepended);
    model.forward(&tokens[std::size_t(t0)], &tokens[std::size_t(t0 + 1)], nullptr, 1, len, 0,
                  /*update_memory=*/true, pos.data());
    for (int i = 0; i < len; ++i)  // target t0 + i + 1
      if (t0 + i + 1 >= first_target) r.token_losses.push_back(model.token_loss().data()[i]);
  }
  r.seconds = seconds_since(start);
  return r;
}

// recompute: windows of A = S + R + 1 tokens moving by 1 (eval/sliding_window.hpp); window s
// scores target tokens[s + A], so the targets start at A.
StreamResult read_recomputing(TransformerLM<float>& model,
                              const std::vector<std::int32_t>& tokens, int attended, int batch,
                              long first_target) {
  if (first_target < attended)
    throw std::invalid_argument(
        "streaming cache, recompute: a window of " + std::to_string(attended) +
        " tokens first predicts tokens[" + std::to_string(attended) + "], not tokens[" +
        std::to_string(first_target) + "] (score from S + R + 1 on)");
  StreamResult r;
  r.first_target = first_target;
  const auto start = Clock::now();
  std::vector<float> losses;
  evaluate_sliding_window(model, tokens,
                          SlidingWindowOptions{.attn_len = attended, .stride = 1, .batch = batch},
                          &losses);
  r.seconds = seconds_since(start);
  r.token_losses.assign(losses.begin() + (first_target - attended), losses.end());
  return r;
}

}  // namespace

StreamPositions stream_positions_from_name(const std::string& name) {
  if (name == "cache") return StreamPositions::cache;
  if (name == "text") return StreamPositions::text;
  throw std::invalid_argument("stream positions must be cache or text, got '" + name + "'");
}

StreamMode stream_mode_from_name(const std::string& name) {
  for (StreamMode m : {StreamMode::sinks, StreamMode::window, StreamMode::recompute,
                       StreamMode::dense, StreamMode::memory})
    if (stream_mode_name(m) == name) return m;
  throw std::invalid_argument("stream mode must be sinks, window, recompute, dense or memory, got '" +
                              name + "'");
}

std::string stream_mode_name(StreamMode mode) {
  switch (mode) {
    case StreamMode::sinks: return "sinks";
    case StreamMode::window: return "window";
    case StreamMode::recompute: return "recompute";
    case StreamMode::dense: return "dense";
    case StreamMode::memory: return "memory";
  }
  return "";
}

std::vector<std::int64_t> stream_step_positions(StreamPositions positions, int sinks, int recent,
                                                std::int64_t t) {
  const std::int64_t S = sinks, R = recent;
  const std::int64_t M = std::min(t, S + R);  // cached tokens before step t
  std::vector<std::int64_t> pos(std::size_t(M + 1));  // [M + 1]: memory, then token t
  if (positions == StreamPositions::cache || t <= S + R) {
    // cache: slots 0..M (pos-shift); text, nothing evicted yet: tokens 0..t are slots 0..t.
    std::iota(pos.begin(), pos.end(), std::int64_t(0));
    return pos;
  }
  // text, after eviction: sinks 0..S-1, recent t-R..t-1, the current token t.
  std::iota(pos.begin(), pos.begin() + S, std::int64_t(0));
  std::iota(pos.begin() + S, pos.end(), t - R);
  return pos;
}

StreamResult evaluate_stream_cache(TransformerLM<float>& model,
                                   const std::vector<std::int32_t>& tokens, StreamMode mode,
                                   const StreamOptions& o) {
  const int S = o.sinks, R = o.recent;
  if (S < 0 || R < 1 || o.first_target < 0 || o.dense_segment < 1 || o.batch < 1)
    throw std::invalid_argument("streaming cache: need sinks >= 0, recent >= 1, first_target "
                                ">= 0, dense_segment >= 1 and batch >= 1, got sinks " +
                                std::to_string(S) + ", recent " + std::to_string(R));
  const long first = o.first_target > 0 ? o.first_target : long(S) + R + 1;
  if (first < 1 || first >= long(tokens.size()))
    throw std::invalid_argument("streaming cache: a stream of " + std::to_string(tokens.size()) +
                                " tokens has no target at or after tokens[" +
                                std::to_string(first) + "] (sinks + recent = " +
                                std::to_string(S + R) + ")");
  StreamResult r;
  switch (mode) {
    case StreamMode::sinks: r = read_with_cache(model, tokens, S, R, o.positions, first); break;
    case StreamMode::window: r = read_with_cache(model, tokens, 0, S + R, o.positions, first); break;
    case StreamMode::recompute:  // with a sink token, each window is [SINK, S + R tokens]
      r = read_recomputing(model, tokens, S + R + 1 - sink_offset(model), o.batch, first);
      break;
    case StreamMode::dense: r = read_dense(model, tokens, o.dense_segment, first); break;
    case StreamMode::memory:
      r = read_with_memory(model, tokens, o.dense_segment, S + R, first);
      break;
  }
  r.tokens = long(r.token_losses.size());
  double sum = 0;
  for (float l : r.token_losses) sum += l;
  r.loss = r.tokens > 0 ? sum / double(r.tokens) : 0;
  return r;
}

std::vector<StreamBucket> stream_buckets(const StreamResult& r, int width) {
  std::vector<StreamBucket> buckets;
  for (long k = 0; k < r.tokens; ++k) {
    const long target = r.first_target + k;  // its stream position
    const long low = target / width * width;
    if (buckets.empty() || buckets.back().low != low)
      buckets.push_back({.low = low, .high = low + width});
    buckets.back().tokens += 1;
    buckets.back().loss += r.token_losses[std::size_t(k)];
  }
  for (StreamBucket& b : buckets) b.loss /= double(b.tokens);
  if (!buckets.empty())  // the last bucket ends with the stream
    buckets.back().high = std::min(buckets.back().high, r.first_target + r.tokens);
  return buckets;
}

// ---------------------------------------------------------------------------------------------
// The mode: one row per streaming mode
// ---------------------------------------------------------------------------------------------

std::vector<std::int32_t> stream_tokens(const Config& cfg) {
  const auto split = corpus_split_tokens(cfg, evaluation_split(cfg));
  if (std::int64_t(split->size()) < cfg.eval.stream_length)
    throw std::runtime_error("eval.stream_length = " + std::to_string(cfg.eval.stream_length) +
                             " is longer than the " + cfg.eval.split + " split (eval.split), "
                             "which holds " + std::to_string(split->size()) + " tokens");
  return {split->begin(), split->begin() + cfg.eval.stream_length};
}

StreamOptions stream_options(const Config& cfg) {
  const auto& e = cfg.eval;
  return {.sinks = e.stream_sinks,
          .recent = e.stream_recent > 0 ? e.stream_recent
                                        : cfg.train.seq_len - 1 - e.stream_sinks,
          .positions = stream_positions_from_name(e.stream_positions),
          .dense_segment = cfg.train.seq_len,
          .batch = evaluation_batch_size(cfg)};
}

void check_stream_memory(const Config& cfg, const std::string& what) {
  if (cfg.eval.stream_length == 0) return;
  const auto& modes = cfg.eval.stream_modes;
  const bool dense = std::find(modes.begin(), modes.end(), "dense") != modes.end();
  check_memory(cfg, 1, cfg.train.seq_len, dense ? cfg.eval.stream_length : 0,
               /*training=*/false, what + " (eval.stream_length = " +
                                       std::to_string(cfg.eval.stream_length) + ")");
  stream_tokens(cfg);
}

namespace {

// The numbers of one streaming mode's row, and its line to `out`.
void stream_row(TransformerLM<float>& model, const Config& cfg,
                const std::vector<std::int32_t>& tokens, const StreamOptions& options,
                const std::string& name, nlohmann::json& row, std::ostream& out) {
  const StreamMode mode = stream_mode_from_name(name);
  const int S = row["stream_sinks"].get<int>(), kept = row["mem_len"].get<int>();
  reset_peak_memory();
  const StreamResult r = evaluate_stream_cache(model, tokens, mode, options);
  nlohmann::json low = nlohmann::json::array(), high = nlohmann::json::array(),
                 scored = nlohmann::json::array(), loss = nlohmann::json::array();
  for (const StreamBucket& b : stream_buckets(r, cfg.train.seq_len)) {
    low.push_back(b.low);
    high.push_back(b.high);
    scored.push_back(b.tokens);
    loss.push_back(b.loss);
  }
  row.update({{"loss", r.loss},
              {"tokens", r.tokens},
              {"seconds", r.seconds},
              {"tokens_per_second", double(r.tokens) / r.seconds},
              {"peak_memory_mb", peak_memory_mb()},
              {"loss_by_stream_position",
               {{"low", low}, {"high", high}, {"tokens", scored}, {"loss", loss}}}});
  const std::string cache =
      mode == StreamMode::dense       ? "no eviction"
      : mode == StreamMode::recompute ? "windows of " + std::to_string(kept + 1) + " recomputed"
                                      : std::to_string(S) + " sinks + " +
                                            std::to_string(kept - S) + " recent";
  out << std::fixed << std::setprecision(4) << "eval stream " << std::setw(9) << name << ": "
      << cache << ", " << row["stream_positions"].get<std::string>() << " positions | loss "
      << r.loss << " over " << r.tokens << " bytes of " << cfg.eval.stream_length << " | "
      << std::setprecision(0) << double(r.tokens) / r.seconds << " tokens/s" << std::endl;
}

}  // namespace

std::vector<nlohmann::json> evaluate_stream_rows(TransformerLM<float>& model, const Config& cfg,
                                                 std::ostream& out) {
  const StreamOptions options = stream_options(cfg);
  const std::vector<std::int32_t> tokens = stream_tokens(cfg);
  std::vector<nlohmann::json> rows;
  for (const std::string& name : cfg.eval.stream_modes) {
    const StreamMode mode = stream_mode_from_name(name);
    const int S = mode == StreamMode::sinks ? options.sinks : 0;
    const int kept = mode == StreamMode::dense ? cfg.eval.stream_length - 1  // no eviction
                                               : options.sinks + options.recent;  // S + R
    const std::string positions =
        mode == StreamMode::dense || mode == StreamMode::memory ? "text"
        : mode == StreamMode::recompute                         ? "cache"
                                                                : cfg.eval.stream_positions;
    nlohmann::json row = {{"kind", "stream_" + name},
                          {"factor", 1.0},
                          {"seq_len", cfg.eval.stream_length},
                          {"mem_len", kept},
                          {"split", cfg.eval.split},
                          {"stream_sinks", S},
                          {"stream_recent", kept - S},
                          {"stream_positions", positions}};
    try {
      stream_row(model, cfg, tokens, options, name, row, out);
    } catch (const std::exception& e) {
      row["error"] = e.what();
      row["loss"] = nullptr;
      out << "eval stream " << name << ": not possible: " << e.what() << std::endl;
    }
    rows.push_back(row);
  }
  return rows;
}

std::string stream_rows_csv(const std::vector<nlohmann::json>& rows) {
  std::string csv = "kind,stream_sinks,stream_recent,stream_positions,position_low,"
                    "position_high,tokens,loss\n";
  for (const nlohmann::json& row : rows) {
    const nlohmann::json& b = row["loss_by_stream_position"];
    for (std::size_t i = 0; i < b["low"].size(); ++i) {
      std::ostringstream line;
      line << std::setprecision(9) << row["kind"].get<std::string>() << ","
           << row["stream_sinks"].get<int>() << "," << row["stream_recent"].get<int>() << ","
           << row["stream_positions"].get<std::string>() << "," << b["low"][i].get<long>()
           << "," << b["high"][i].get<long>() << "," << b["tokens"][i].get<long>() << ","
           << b["loss"][i].get<double>() << "\n";
      csv += line.str();
    }
  }
  return csv;
}

namespace {

// The streaming modes of one run, the stream and the dense mode's memory checked.
class StreamEvaluation : public PreparedEvaluation {
 public:
  explicit StreamEvaluation(const Config& cfg) : cfg_(cfg) {
    check_stream_memory(cfg, "the streaming evaluation");
  }
  void evaluate(TransformerLM<float>& model, const BeforeEach& before_each, EvalRows& rows,
                std::ostream& out) override {
    before_each();  // one unit: the modes share the stream
    for (nlohmann::json& row : evaluate_stream_rows(model, cfg_, out)) rows.push_back(row);
  }

 private:
  Config cfg_;
};

}  // namespace

EvalMode stream_eval_mode() {
  return {.name = "stream",
          .measures = "the loss of one long stream read with bounded caches: attention sinks, "
                      "window, recomputation, dense (Xiao et al. 2023, StreamingLLM)",
          .wanted = [](const Config& cfg) { return cfg.eval.stream_length > 0; },
          .prepare = [](const Config& cfg, const RunFacts&) -> std::unique_ptr<PreparedEvaluation> {
            return std::make_unique<StreamEvaluation>(cfg);
          }};
}

}  // namespace poslab
