#include "tasks/make_source.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "data/corpus.hpp"
#include "tasks/task.hpp"

namespace poslab {
namespace {

// The split corpus of (path, valid_fraction), read on first use. Reading and splitting the
// fortunes (2.6 MB) takes long enough to notice when a run evaluates at several lengths and
// memories; the cache makes it once per process. Guarded: evaluations may run on several threads.
std::shared_ptr<const CorpusSplit> cached_split(const std::string& path, double valid_fraction) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, double>, std::shared_ptr<const CorpusSplit>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[{path, valid_fraction}];
  if (!entry) {
    try {
      entry = std::make_shared<const CorpusSplit>(split_corpus(read_corpus(path), valid_fraction));
    } catch (...) {
      cache.erase({path, valid_fraction});  // do not keep a failed read
      throw;
    }
  }
  return entry;
}

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, const SourceSpec& spec) {
  if (cfg.task.name == "lm") {
    const auto split = cached_split(cfg.data.path, cfg.data.valid_fraction);
    if (spec.split == Split::test)
      // TODO(corpus test split): read split->test once CorpusSplit has one (data.test_fraction).
      throw std::runtime_error("the test split needs data.test_fraction > 0");
    return std::make_unique<StreamBatcher>(spec.split == Split::train ? split->train
                                                                      : split->valid,
                                           cfg.train.batch_size, spec.len);
  }
  const TaskInfo* task = find_task(cfg.task.name);
  if (!task) throw std::runtime_error("unknown task '" + cfg.task.name + "' (see `poslab tasks`)");
  TaskSetup setup;
  setup.batch = cfg.train.batch_size;
  setup.len = spec.len;
  setup.train_len = cfg.train.seq_len;
  setup.split = spec.split;
  setup.eval_batches = cfg.eval.batches > 0 ? cfg.eval.batches : int(kTaskEvalBatches);
  setup.longer_than = spec.longer_than;
  setup.gate = spec.gate;
  // Evaluation keeps the seed it always had (train.seed + 1), so the valid split is the
  // evaluation set of older runs; task_seed then separates valid from test.
  setup.seed = spec.split == Split::train ? cfg.train.seed : cfg.train.seed + 1;
  setup.vocab_size = cfg.model.vocab_size;
  return task->make(cfg.task.options, setup);
}

}  // namespace poslab
