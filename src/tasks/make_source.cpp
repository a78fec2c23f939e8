#include "tasks/make_source.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "data/corpus.hpp"
#include "data/pose_batcher.hpp"
#include "tasks/passkey_mix.hpp"
#include "tasks/task.hpp"

namespace poslab {

// The split corpus of a DataConfig, read on first use. Reading and splitting the
// fortunes (2.6 MB) takes long enough to notice when a run evaluates at several lengths and
// memories; the cache makes it once per process (the Python library's 30 MB of a smoke run's
// corpus: about a tenth of the run's time per read). Guarded: evaluations may run on several threads.
std::shared_ptr<const CorpusSplit> cached_split(const DataConfig& data) {
  using Key = std::tuple<std::string, std::vector<std::string>, std::vector<std::string>, double,
                         double, std::string, std::string>;
  const Key key{data.path,           data.include, data.exclude, data.valid_fraction,
                data.test_fraction, data.split,   data.separator};
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const CorpusSplit>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[key];
  if (!entry) {
    try {
      entry = std::make_shared<const CorpusSplit>(load_corpus(data));
    } catch (...) {
      cache.erase(key);  // do not keep a failed read
      throw;
    }
  }
  return entry;
}

PasskeyGenerator make_passkey_generator(const Config& cfg, Split split) {
  const PasskeyFiller filler = passkey_filler_from_name(cfg.eval.passkey_filler);
  const PasskeyFormat format = passkey_format_from_name(cfg.eval.passkey_format);
  if (filler != PasskeyFiller::corpus)
    return PasskeyGenerator(filler, nullptr, "the sentence filler", format);
  const auto corpus = cached_split(cfg.data);
  const std::vector<std::int32_t>& tokens =
      split == Split::train ? corpus->train : split == Split::valid ? corpus->valid : corpus->test;
  if (tokens.empty())
    throw std::runtime_error(std::string("the passkey filler is the ") + split_name(split) +
                             " split of " + cfg.data.path + ", which is empty (set data." +
                             (split == Split::test ? "test" : "valid") +
                             "_fraction > 0, or eval.passkey_filler = \"sentence\")");
  // Shares the cached split: the generator keeps it alive.
  return PasskeyGenerator(filler, std::shared_ptr<const std::vector<std::int32_t>>(corpus, &tokens),
                          std::string("the ") + split_name(split) + " split of " + cfg.data.path,
                          format);
}

std::shared_ptr<const std::vector<std::int32_t>> corpus_split_tokens(const Config& cfg,
                                                                     Split split) {
  const auto corpus = cached_split(cfg.data);
  const std::vector<std::int32_t>& tokens =
      split == Split::train ? corpus->train : split == Split::valid ? corpus->valid : corpus->test;
  if (tokens.empty())
    throw std::runtime_error(std::string("the corpus ") + cfg.data.path + " has no " +
                             split_name(split) + " split (set data." +
                             (split == Split::test ? "test" : "valid") + "_fraction > 0)");
  return std::shared_ptr<const std::vector<std::int32_t>>(corpus, &tokens);  // shares the cache
}

std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, const SourceSpec& spec) {
  if (cfg.task.name == "lm") {
    const auto split = cached_split(cfg.data);
    const std::vector<std::int32_t>& tokens =
        spec.split == Split::train ? split->train
        : spec.split == Split::valid ? split->valid
                                     : split->test;
    if (tokens.empty())
      throw std::runtime_error(std::string("the corpus ") + cfg.data.path + " has no " +
                               split_name(spec.split) + " split (set data." +
                               (spec.split == Split::test ? "test" : "valid") + "_fraction > 0)");
    // PoSE (train.pose_target_len): training rows of two chunks with skipping position ids;
    // evaluation reads the plain stream. With the passkey mix, PasskeyMix replaces whole rows
    // and leaves the batch's position ids alone, so an instance row of L bytes is read at the
    // same skipping ids as the text rows beside it: its key line and its question can lie up to
    // L' - 1 positions apart (PoSE's point), though the instance is only L bytes long.
    // Both batchers share the cached split (an aliasing shared_ptr: no copy of the tokens).
    const std::shared_ptr<const std::vector<std::int32_t>> shared(split, &tokens);
    std::unique_ptr<BatchSource> stream;
    if (spec.split == Split::train && cfg.train.pose_target_len > 0)
      stream = std::make_unique<PoseBatcher>(shared, cfg.train.batch_size,
          spec.len, cfg.train.pose_target_len, pose_variant_from_name(cfg.train.pose_variant),
          task_seed(cfg.train.seed, Split::train));
    else
      stream = std::make_unique<StreamBatcher>(shared, cfg.train.batch_size, spec.len);
    if (spec.split != Split::train || !(cfg.train.passkey_fraction > 0)) return stream;
    return std::make_unique<PasskeyMix>(std::move(stream), make_passkey_generator(cfg, Split::train),
                                        cfg.train.passkey_fraction, cfg.train.seed);
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
