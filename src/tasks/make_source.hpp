// The one place that turns a Config into batches: the training stream and every evaluation set,
// for the text corpus ("lm") and for the generated tasks alike.
//
//   auto train = make_batch_source(cfg, {Split::train, cfg.train.seq_len});
//   auto valid = make_batch_source(cfg, {Split::valid, 2 * cfg.train.seq_len});
//   auto gate  = make_batch_source(cfg, {Split::test, cfg.train.seq_len, 0, true});
#pragma once

#include <memory>

#include "config/config.hpp"
#include "data/batch_source.hpp"
#include "data/corpus.hpp"
#include "tasks/passkey.hpp"

namespace poslab {

// Which batches to make.
struct SourceSpec {
  Split split = Split::train;
  int len = 0;           // segment length
  int longer_than = 0;   // tasks, evaluation: see TaskSetup
  bool gate = false;     // tasks, evaluation: see TaskSetup
};

// Batches of B = cfg.train.batch_size rows of spec.len tokens.
//   task "lm":  a StreamBatcher over the corpus of cfg.data.path, split by data.valid_fraction:
//               the train split or the validation split (Split::test is not available yet and
//               throws). longer_than and gate do not apply. The split is read once per process
//               and path and kept (a static cache), so repeated evaluations do not read it again.
//   otherwise:  the generated task cfg.task.name with cfg.task.options (missing options take
//               their defaults), train_len = cfg.train.seq_len, vocab = cfg.model.vocab_size,
//               seed cfg.train.seed for training and cfg.train.seed + 1 for evaluation (valid and
//               test are then different draws through task_seed), eval_batches = cfg.eval.batches
//               (0 -> kTaskEvalBatches).
// Throws std::runtime_error for an unknown task, an unreadable corpus, or a setup the task
// cannot make (see tasks/task.hpp).
//   train.pose_target_len > 0 (task "lm", split train): a PoseBatcher (data/pose_batcher.hpp)
//               instead of the stream, seeded by task_seed(train.seed, train).
//   train.passkey_fraction > 0 (task "lm", split train): the stream wrapped in a PasskeyMix
//               (tasks/passkey_mix.hpp), seeded by train.seed.
std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, const SourceSpec& spec);

// The passkey instances of a config (tasks/passkey.hpp): prompt eval.passkey_format, filler
// eval.passkey_filler, cut (corpus) from `split` of data.path, read through the same cache as make_batch_source. Throws
// std::runtime_error when the corpus cannot be read or has no such split.
PasskeyGenerator make_passkey_generator(const Config& cfg, Split split);

// The corpus of data.path split as `data` says, read once per process and kept (the cache every
// function here reads through). Throws std::runtime_error when the corpus cannot be read.
std::shared_ptr<const CorpusSplit> cached_split(const DataConfig& data);

// The tokens of one split of task "lm"'s corpus (data.path), read through the same cache as
// make_batch_source (the sliding-window evaluation reads the stream itself). Throws
// std::runtime_error when the corpus cannot be read or the split is empty.
std::shared_ptr<const std::vector<std::int32_t>> corpus_split_tokens(const Config& cfg,
                                                                     Split split);

}  // namespace poslab
