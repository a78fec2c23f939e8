#include "tasks/instance_batcher.hpp"

#include <algorithm>

#include "tasks/tokens.hpp"

namespace poslab {

namespace {

// The sizes a row may draw: see "Instance sizes" in instance_batcher.hpp.
std::vector<int> allowed_sizes(const InstanceGenerator& task, const TaskSetup& s) {
  const bool unseen_only = s.evaluation && s.len > s.train_len;
  std::vector<int> sizes;
  for (int n = task.min_size(); n <= task.max_size(); ++n) {
    const int length = task.length(n);
    if (length > s.len) break;  // lengths increase with the size
    if (unseen_only && length <= s.train_len) continue;
    sizes.push_back(n);
  }
  if (!sizes.empty()) return sizes;

  const int smallest = task.length(task.min_size());
  if (smallest > s.len)
    task_error(task.name(), "no instance fits in a segment of " + std::to_string(s.len) +
                                " tokens: the smallest (size " + std::to_string(task.min_size()) +
                                ") takes " + std::to_string(smallest));
  const int largest = task.length(task.max_size());
  if (largest <= s.train_len)
    task_error(task.name(), "evaluation at length " + std::to_string(s.len) +
                                " has no instance size unseen in training (length " +
                                std::to_string(s.train_len) + "): the largest instance (size " +
                                std::to_string(task.max_size()) + ") takes only " +
                                std::to_string(largest) + " tokens");
  int unseen = task.min_size();
  while (task.length(unseen) <= s.train_len) ++unseen;
  task_error(task.name(), "evaluation at length " + std::to_string(s.len) +
                              " has no instance size unseen in training (length " +
                              std::to_string(s.train_len) + "): the smallest unseen one (size " +
                              std::to_string(unseen) + ") takes " +
                              std::to_string(task.length(unseen)) + " tokens");
}

}  // namespace

InstanceBatcher::InstanceBatcher(std::unique_ptr<InstanceGenerator> task, const TaskSetup& setup)
    : task_(std::move(task)), setup_(setup), rng_(task_seed(setup.seed, setup.evaluation)) {
  check_task_setup(task_->name(), setup_);
  sizes_ = allowed_sizes(*task_, setup_);
  tokens_.resize(setup_.len);
  answer_.resize(setup_.len);
}

void InstanceBatcher::reset() {
  // Evaluation: the same batches again. Training: new batches, the Rng continues.
  if (setup_.evaluation) rng_ = Rng(task_seed(setup_.seed, true));
  index_ = 0;
}

bool InstanceBatcher::next(Batch& out) {
  if (setup_.evaluation && index_ == kTaskEvalBatches) reset();  // a fixed set: wrap around
  const int B = setup_.batch, L = setup_.len;
  out.resize(B, L, true);
  out.start = 0;
  out.first_of_pass = true;  // independent sequences: nothing to remember from the last batch

  for (int b = 0; b < B; ++b) {
    const int size = sizes_[rng_.below(sizes_.size())];
    const int T = task_->length(size);
    std::fill(answer_.begin(), answer_.end(), std::uint8_t{0});
    task_->generate(size, rng_, tokens_.data(), answer_.data());

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
