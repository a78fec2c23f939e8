// The one place that turns a Config into batches: the training stream and every evaluation set,
// for the text corpus ("lm") and for the generated tasks alike.
//
//   auto train = make_batch_source(cfg, false, cfg.train.seq_len, cfg.train.seed);
//   auto valid = make_batch_source(cfg, true, 2 * cfg.train.seq_len, cfg.train.seed);
#pragma once

#include <cstdint>
#include <memory>

#include "config/config.hpp"
#include "data/batch_source.hpp"

namespace poslab {

// Batches of B = cfg.train.batch_size rows of `len` tokens.
//   task "lm":  a StreamBatcher over the corpus of cfg.data.path, split by data.valid_fraction:
//               the train split (evaluation = false) or the validation split (true). `seed` is
//               not used (a corpus is read in order). The split is read once per process and
//               path and kept (a static cache), so repeated evaluations do not read it again.
//   otherwise:  the generated task cfg.task.name with cfg.task.options (missing options take
//               their defaults), train_len = cfg.train.seq_len, vocab = cfg.model.vocab_size.
// Throws std::runtime_error for an unknown task, an unreadable corpus, or a setup the task
// cannot make (see tasks/task.hpp).
std::unique_ptr<BatchSource> make_batch_source(const Config& cfg, bool evaluation, int len,
                                               std::uint64_t seed);

}  // namespace poslab
