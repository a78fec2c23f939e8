#include "tasks/task.hpp"

#include <stdexcept>

#include "tasks/tokens.hpp"

namespace poslab {

// Each task file defines one of these.
TaskInfo lm_task_info();
TaskInfo copy_task_info();
TaskInfo reverse_task_info();
TaskInfo assoc_recall_task_info();
TaskInfo induction_task_info();
TaskInfo parity_task_info();
TaskInfo long_range_task_info();
TaskInfo sort_task_info();

namespace {

// Generated tasks write printable bytes (tasks/tokens.hpp); the corpus ("lm") may hold any byte.
// The same rule as check_task_setup's, said in config keys so the loader can locate it.
std::optional<ConfigProblem> tokens_fit_vocabulary(const Config& config) {
  const int vocab_size = config.model.vocab_size;
  if (vocab_size > kLargestTaskToken) return std::nullopt;
  return ConfigProblem{{"model.vocab_size", "task.name"},
                       "model.vocab_size (" + std::to_string(vocab_size) + ") must be at least " +
                           std::to_string(kLargestTaskToken + 1) + " for task '" +
                           config.task.name + "' (its tokens are printable bytes up to '|' = " +
                           std::to_string(kLargestTaskToken) + ")"};
}

}  // namespace

const std::vector<TaskInfo>& registered_tasks() {
  static const std::vector<TaskInfo> all = [] {
    std::vector<TaskInfo> tasks = {
        lm_task_info(),        copy_task_info(),   reverse_task_info(),    assoc_recall_task_info(),
        induction_task_info(), parity_task_info(), long_range_task_info(), sort_task_info(),
    };
    for (TaskInfo& task : tasks)
      if (task.name != "lm") task.config_rule = tokens_fit_vocabulary;
    return tasks;
  }();
  return all;
}

const TaskInfo* find_task(const std::string& name) {
  for (const auto& t : registered_tasks())
    if (t.name == name) return &t;
  return nullptr;
}

std::unique_ptr<BatchSource> TaskInfo::make(const Options& opts, const TaskSetup& s) const {
  // Start from the defaults, so a hand-made Config (no loader) works too. The loader has checked
  // what a config says; options set in code are checked here, as the tasks index arrays by them.
  Options full = Options::defaults(options);
  for (const auto& [key, value] : opts.values()) {
    const OptionSpec* spec = nullptr;
    for (const auto& o : options)
      if (o.key == key) spec = &o;
    if (!spec) task_error(name, "has no option '" + key + "'");
    OptionValue v = value;
    if (spec->default_value.index() == 2 && v.index() == 1)  // an integer is a fine float
      v = static_cast<double>(std::get<std::int64_t>(v));
    if (v.index() != spec->default_value.index())
      task_error(name, "option '" + key + "' must be " + option_type_name(spec->default_value) +
                           ", got " + option_type_name(v));
    if (v.index() == 1 || v.index() == 2) {
      const double x = v.index() == 1 ? double(std::get<std::int64_t>(v)) : std::get<double>(v);
      if (!(x >= spec->min && x <= spec->max))
        task_error(name, "option '" + key + "' = " + option_to_string(v) + " is out of its range");
    }
    full.set(key, v);
  }
  return factory(full, s);
}

namespace {

// splitmix64's finalizer (Steele et al.): a bijection on 64-bit integers that scatters its input.
std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t task_seed(std::uint64_t seed, Split split) {
  // train -> mix(2 seed), valid -> mix(2 seed + 1): exactly the seeds of the days before splits
  // (evaluation = false / true). These two already cover every 64-bit input, so the test seed
  // mixes the valid one a second time with a constant of its own: a different stream, which
  // meets some seed's train or valid stream only by a 64-bit coincidence.
  switch (split) {
    case Split::train: return splitmix64(seed * 2);
    case Split::valid: return splitmix64(seed * 2 + 1);
    case Split::test: return splitmix64(splitmix64(seed * 2 + 1) ^ 0x7E57'5E7D'7E57'5E7DULL);
  }
  return 0;
}

void task_error(const std::string& task, const std::string& what) {
  throw std::runtime_error("task '" + task + "': " + what);
}

void check_task_setup(const std::string& task, const TaskSetup& s) {
  if (s.batch < 1) task_error(task, "batch must be >= 1, got " + std::to_string(s.batch));
  if (s.len < 1) task_error(task, "segment length must be >= 1, got " + std::to_string(s.len));
  if (s.train_len < 1)
    task_error(task, "training length must be >= 1, got " + std::to_string(s.train_len));
  if (s.evaluation() && s.eval_batches < 1)
    task_error(task, "an evaluation set needs eval_batches >= 1, got " +
                         std::to_string(s.eval_batches));
  if (s.longer_than < 0)
    task_error(task, "longer_than must be >= 0, got " + std::to_string(s.longer_than));
  if (!s.evaluation() && (s.gate || s.longer_than > 0))
    task_error(task, "gate and longer_than choose the instances of an evaluation set; a "
                     "training source (split train) draws every size that fits");
  if (s.vocab_size <= kLargestTaskToken)
    task_error(task, "its tokens are printable bytes up to " + std::to_string(kLargestTaskToken) +
                         " ('|'), so model.vocab_size must be at least " +
                         std::to_string(kLargestTaskToken + 1) + ", got " +
                         std::to_string(s.vocab_size));
}

}  // namespace poslab
