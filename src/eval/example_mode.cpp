// An example evaluation mode, the one docs/07 ("Add an evaluation mode") builds: how much a
// language model gains from its context inside one segment.
//
// The held-out segments of the main length are read once without memory (eval/chunked.hpp's
// evaluate), and the row compares the mean loss of the byte at position 0, which sees no
// context (a unigram guess), with that of the byte at position L - 1, which sees L - 1 bytes:
//
//     context_gain = loss(position 0) - loss(position L - 1)        nats/byte
//
// the one-number version of the loss-by-position curve (Khandelwal et al. 2018, "Sharp Nearby,
// Fuzzy Far Away", ask the same question by shuffling the distant context).
//
// No config key turns it on (wanted is false): a run never evaluates it. The conformance kit of
// the modes (tests/test_eval_modes.cpp) prepares and checks it like the others; a mode of your
// own that runs in every run would say when in `wanted`, from its own keys.
#include <iomanip>
#include <memory>
#include <ostream>

#include "eval/chunked.hpp"
#include "eval/mode.hpp"
#include "eval/rows.hpp"

namespace poslab {
namespace {

class ContextGainEvaluation : public PreparedEvaluation {
 public:
  explicit ContextGainEvaluation(const Config& cfg) : cfg_(cfg) {
    evaluation_source(cfg, segment());  // before anything is written: the split is long enough
  }
  void evaluate(TransformerLM<float>& model, const BeforeEach& before_each, EvalRows& rows,
                std::ostream& out) override {
    before_each();
    auto source = evaluation_source(cfg_, segment());
    const EvalResult r = poslab::evaluate(model, *source, cfg_.eval.batches, /*mem_len=*/0);
    const double first = r.loss_by_position.front(), last = r.loss_by_position.back();  // [L]
    rows.push_back({{"kind", "example_context_gain"}, {"factor", 1.0},
                    {"seq_len", segment().seq_len}, {"mem_len", 0}, {"split", cfg_.eval.split},
                    {"loss", last}, {"first_position_loss", first},
                    {"context_gain", first - last}, {"tokens", r.tokens}});
    out << std::fixed << std::setprecision(4) << "eval example: loss " << first
        << " at position 0, " << last << " at position " << segment().seq_len - 1
        << " | context gain " << first - last << " nats/byte" << std::endl;
  }

 private:
  EvalSetting segment() const {
    return {.kind = "example_context_gain", .seq_len = cfg_.train.seq_len, .mem_len = 0};
  }
  Config cfg_;
};

}  // namespace

EvalMode example_eval_mode() {
  return {.name = "example_context_gain",
          .measures = "the loss at a segment's first byte minus that at its last: what the "
                      "context gives (docs/07's example)",
          .wanted = [](const Config&) { return false; },  // an example: no run asks for it
          .prepare = [](const Config& cfg, const RunFacts&) -> std::unique_ptr<PreparedEvaluation> {
            return std::make_unique<ContextGainEvaluation>(cfg);
          }};
}

}  // namespace poslab
