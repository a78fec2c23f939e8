#include "tasks/instance_batcher.hpp"

#include <algorithm>

#include "tasks/tokens.hpp"

namespace poslab {

namespace {

std::string str(int x) { return std::to_string(x); }

// Every size whose length lies in (lo, hi], smallest first (lengths increase with the size).
std::vector<int> sizes_between(const InstanceGenerator& task, int lo, int hi) {
  std::vector<int> sizes;
  for (int n = task.min_size(); n <= task.max_size(); ++n) {
    const int length = task.length(n);
    if (length > hi) break;
    if (length > lo) sizes.push_back(n);
  }
  return sizes;
}

// The sizes a row may draw: see "Instance sizes" in instance_batcher.hpp. Throws, naming the
// lengths, when the band is empty.
std::vector<int> allowed_sizes(const InstanceGenerator& task, const TaskSetup& s) {
  const std::string& name = task.name();
  const int smallest = task.length(task.min_size());
  const int largest = task.length(task.max_size());
  if (smallest > s.len)
    task_error(name, "no instance fits in a segment of " + str(s.len) + " tokens: the smallest "
                     "(size " + str(task.min_size()) + ") takes " + str(smallest));

  // gate: the top quarter of the sizes seen in training.
  if (s.evaluation() && s.gate) {
    if (s.len < s.train_len)
      task_error(name, "the gate set holds the largest training instances, up to length " +
                           str(s.train_len) + ": its segment must be at least that long, got " +
                           str(s.len));
    std::vector<int> seen = sizes_between(task, 0, s.train_len);
    if (seen.empty())
      task_error(name, "gate: no instance fits in the training length " + str(s.train_len) +
                           " (the smallest takes " + str(smallest) + ")");
    const std::size_t keep = (seen.size() + 3) / 4;  // ceil(count / 4) >= 1
    return std::vector<int>(seen.end() - keep, seen.end());
  }

  // Training, or evaluation within the training length: every size that fits.
  if (!s.evaluation() || s.len <= s.train_len) return sizes_between(task, 0, s.len);

  // Evaluation beyond the training length: only lengths in (longer_than, L].
  const int lo = s.longer_than > 0 ? s.longer_than : s.train_len;
  if (lo < s.train_len)
    task_error(name, "longer_than = " + str(lo) + " is below the training length " +
                         str(s.train_len) + ": evaluation beyond it would include seen lengths");
  std::vector<int> sizes = sizes_between(task, lo, s.len);
  if (!sizes.empty()) return sizes;

  const std::string band = "evaluation at length " + str(s.len) + " has no instance size " +
                           (lo == s.train_len ? "unseen in training (length " + str(lo) + ")"
                                              : "longer than " + str(lo)) + ": ";
  if (largest <= lo)
    task_error(name, band + "the largest instance (size " + str(task.max_size()) +
                         ") takes only " + str(largest) + " tokens");
  int next = task.min_size();
  while (task.length(next) <= lo) ++next;
  task_error(name, band + "the smallest longer one (size " + str(next) + ") takes " +
                       str(task.length(next)) + " tokens");
}

}  // namespace

InstanceBatcher::InstanceBatcher(std::unique_ptr<InstanceGenerator> task, const TaskSetup& setup)
    : task_(std::move(task)), setup_(setup), rng_(task_seed(setup.seed, setup.split)) {
  check_task_setup(task_->name(), setup_);
  sizes_ = allowed_sizes(*task_, setup_);
  tokens_.resize(setup_.len);
  answer_.resize(setup_.len);
}

void InstanceBatcher::reset() {
  // Evaluation: the same batches again (same seed, nothing seen yet). Training: new batches, the
  // Rng continues.
  if (setup_.evaluation()) {
    rng_ = Rng(task_seed(setup_.seed, setup_.split));
    seen_.clear();
  }
  index_ = 0;
}

int InstanceBatcher::draw_instance() {
  const int attempts = setup_.evaluation() ? kDrawAttempts : 1;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int size = sizes_[rng_.below(sizes_.size())];
    const int T = task_->length(size);
    std::fill(answer_.begin(), answer_.end(), std::uint8_t{0});
    task_->generate(size, rng_, tokens_.data(), answer_.data());
    if (!setup_.evaluation()) return T;  // training: repeats are fine (and cost no lookup)
    // emplace() reports whether the instance is new to this set.
    const char* bytes = reinterpret_cast<const char*>(tokens_.data());
    if (seen_.emplace(bytes, std::size_t(T) * sizeof(std::int32_t)).second) return T;
  }
  return 0;  // the band's instances are (nearly) all in the set already
}

bool InstanceBatcher::next(Batch& out) {
  if (setup_.evaluation() && index_ == setup_.eval_batches) reset();  // a fixed set: wrap around
  const int B = setup_.batch, L = setup_.len;
  out.resize(B, L, true);
  out.start = 0;
  out.first_of_pass = true;  // independent sequences: nothing to remember from the last batch

  for (int b = 0; b < B; ++b) {
    const int T = draw_instance();  // 0: an empty row (all PAD, nothing scored)
    std::int32_t* in = out.inputs.data() + std::size_t(b) * L;     // [L]
    std::int32_t* tgt = out.targets.data() + std::size_t(b) * L;   // [L]
    float* w = out.weights.data() + std::size_t(b) * L;            // [L]
    for (int i = 0; i < L; ++i) in[i] = i < T ? tokens_[i] : kPad;
    for (int i = 0; i < L; ++i) {
      tgt[i] = i + 1 < L ? in[i + 1] : kPad;
      w[i] = (i + 1 < T && answer_[i + 1]) ? 1.0f : 0.0f;
    }
  }
  ++index_;
  return true;
}

}  // namespace poslab
