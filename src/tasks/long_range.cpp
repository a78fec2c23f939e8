// long_range: the state-reuse task. A block of random tokens recurs G tokens later, where G is
// longer than a segment: only a model that remembers earlier segments can predict the repeat.
//
// Unlike the other tasks this is a STREAM, laid out like a text corpus (data/corpus.hpp): row b
// of batch t+1 continues row b of batch t, so first_of_pass is true only on the first batch after
// a reset, and Batch::start = t * L is the stream position of column 0. Each row is an endless
// sequence of episodes:
//
//   X f f ... f X f..f | X' f ... f X' f..f | ...      X = m random symbols, f = random filler
//   |<---- G ---->|                                     G = the gap, measured start to start
//
//   episode = X (m tokens), G - m filler, X again (m tokens), e filler (e uniform in 0..m)
//
// and each row starts with a uniform 0..G-1 filler tokens, so rows are out of phase. Each row draws
// from its own Rng, so row b's stream is the same whatever B and L: evaluations at different
// segment lengths read the same text, cut differently. Answers:
// tokens 2..m of every repeat (the first is as random as the filler). The token G positions
// before an answer is its source; nothing else in the stream is correlated at distance G.
//
// Why G > L: the query predicting an answer and the answer's source are G - 1 apart; with G > L
// they are never in the same segment. A model with no memory (mem_len = 0) sits at chance; with
// memory M the source is visible to a query at segment offset i when G - 1 <= i + M, so with
// L < G < L + M the late part of every repeat is reachable through one layer's memory (deeper
// layers reach further). Relative encodings can learn "read G - 1 back"; absolute encodings
// restarted every segment see the source and the query with unrelated position codes
// (Dai et al. 2019's argument for relative positions under state reuse).
//
// Evaluation sets (valid, test) are the first eval_batches batches of their streams. Instances
// are not made distinct (a stream has none), and longer_than does not apply (no instance sizes);
// gate is refused.
//
// Options: gap (default 0 = 1.5 * the training length, so L < G < L + M for any memory
// M > L / 2), block m (default 8), alphabet.
#include <algorithm>

#include "core/rng.hpp"
#include "tasks/task.hpp"
#include "tasks/tokens.hpp"

namespace poslab {
namespace {

class LongRange : public BatchSource {
 public:
  LongRange(const Options& o, const TaskSetup& s)
      : setup_(s), alphabet_(int(o.get_int("alphabet"))), block_(int(o.get_int("block"))) {
    check_task_setup("long_range", s);
    if (s.gate)
      task_error("long_range", "is a stream: it has no instance sizes, so no gate set");
    const std::int64_t gap = o.get_int("gap");
    gap_ = gap ? int(gap) : s.train_len * 3 / 2;
    if (gap_ <= s.train_len)
      task_error("long_range", "gap (" + std::to_string(gap_) +
                                   ") must be longer than the training segment (" +
                                   std::to_string(s.train_len) +
                                   "), so that only memory can predict a repeat");
    if (block_ > gap_)
      task_error("long_range", "block (" + std::to_string(block_) + ") must not exceed gap (" +
                                   std::to_string(gap_) + "): the two copies would overlap");
    rows_.resize(s.batch);
    seed_rows();
    start_streams();
  }

  int gap() const { return gap_; }

  bool next(Batch& out) override {
    if (setup_.evaluation() && index_ == setup_.eval_batches) reset();  // a fixed set: wrap around
    const int B = setup_.batch, L = setup_.len;
    out.resize(B, L, true);
    out.start = index_ * L;
    out.first_of_pass = index_ == 0;

    for (int b = 0; b < B; ++b) {
      Row& row = rows_[b];
      while (int(row.tokens.size() - row.head) < L + 1) append_episode(row);  // L inputs + 1
      const std::int32_t* t = row.tokens.data() + row.head;   // [L + 1] stream from column 0
      const std::uint8_t* a = row.answer.data() + row.head;   // [L + 1]
      std::int32_t* in = out.inputs.data() + std::size_t(b) * L;
      std::int32_t* tgt = out.targets.data() + std::size_t(b) * L;
      float* w = out.weights.data() + std::size_t(b) * L;
      for (int i = 0; i < L; ++i) {
        in[i] = t[i];
        tgt[i] = t[i + 1];
        w[i] = a[i + 1] ? 1.0f : 0.0f;
      }
      row.head += L;
      // Drop what has been read once it is most of the buffer (erase keeps the capacity).
      if (row.head > row.tokens.size() / 2) {
        row.tokens.erase(row.tokens.begin(), row.tokens.begin() + row.head);
        row.answer.erase(row.answer.begin(), row.answer.begin() + row.head);
        row.head = 0;
      }
    }
    ++index_;
    return true;
  }

  // Evaluation: the same streams again (reseed). Training: new streams, the Rngs continue.
  void reset() override {
    if (setup_.evaluation()) seed_rows();
    start_streams();
  }

  std::int64_t batches_per_pass() const override { return setup_.eval_batches; }
  int batch() const override { return setup_.batch; }
  int len() const override { return setup_.len; }

 private:
  // One row's stream: its own Rng (so a row's stream does not depend on B or L), and the tokens
  // generated but not yet read (from `head` on) with their answer flags.
  struct Row {
    Rng rng{0};
    std::vector<std::int32_t> tokens;
    std::vector<std::uint8_t> answer;
    std::size_t head = 0;
  };

  std::int32_t random_symbol(Row& row) { return symbol(int(row.rng.below(alphabet_))); }

  // Row b's Rng: the b-th split of the task's seed.
  void seed_rows() {
    Rng base(task_seed(setup_.seed, setup_.split));
    for (Row& row : rows_) row.rng = base.split();
  }

  void push(Row& row, std::int32_t token, bool is_answer) {
    row.tokens.push_back(token);
    row.answer.push_back(is_answer);
  }

  // X, G - m filler, X again (answers on its tokens 2..m), 0..m filler.
  void append_episode(Row& row) {
    const std::size_t x = row.tokens.size();  // where the first X starts
    for (int k = 0; k < block_; ++k) push(row, random_symbol(row), false);
    for (int k = block_; k < gap_; ++k) push(row, random_symbol(row), false);
    for (int k = 0; k < block_; ++k) push(row, row.tokens[x + k], k >= 1);
    const int tail = int(row.rng.below(block_ + 1));
    for (int k = 0; k < tail; ++k) push(row, random_symbol(row), false);
  }

  void start_streams() {
    for (Row& row : rows_) {
      row.tokens.clear();
      row.answer.clear();
      row.head = 0;
      const int lead = int(row.rng.below(gap_));  // rows out of phase
      for (int k = 0; k < lead; ++k) push(row, random_symbol(row), false);
    }
    index_ = 0;
  }

  TaskSetup setup_;
  int alphabet_, block_, gap_ = 0;
  std::vector<Row> rows_;      // [B]
  std::int64_t index_ = 0;     // batches since the last reset
};

}  // namespace

TaskInfo long_range_task_info() {
  return {"long_range",
          "a random block recurs G > L tokens later in an endless stream: only memory can "
          "predict it (state reuse)",
          "stream of episodes: X f..f X f..f, X = m random symbols, G = gap start to start "
          "(answers: tokens 2..m of each repeat)",
          {{"gap", std::int64_t(0),
            "distance G from a block to its repeat, start to start; must exceed the training "
            "length. 0 = 1.5 * train.seq_len",
            0, 1 << 24},
           {"block", std::int64_t(8), "length m of the repeated block", 2, 1 << 20},
           alphabet_option()},
          [](const Options& o, const TaskSetup& s) -> std::unique_ptr<BatchSource> {
            return std::make_unique<LongRange>(o, s);
          }};
}

}  // namespace poslab
