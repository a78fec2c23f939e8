// lm: character-level language modelling on the text corpus of [data] (data/corpus.hpp).
//
// Listed in the task registry so that `[task] name = "lm"` is a valid choice (the default) and
// `poslab tasks` shows it, but it is not generated: it reads a corpus from data.path, which the
// registry's factory signature knows nothing about. make_batch_source (tasks/make_source.hpp)
// builds it from the whole Config; calling this factory directly is a programming error and
// throws saying so.
#include <stdexcept>

#include "tasks/task.hpp"

namespace poslab {

TaskInfo lm_task_info() {
  return {"lm",
          "character-level language modelling on the corpus of data.path (every target scored)",
          "the text of data.path, as Transformer-XL streams (train split / validation split)",
          {},
          [](const Options&, const TaskSetup&) -> std::unique_ptr<BatchSource> {
            throw std::logic_error(
                "task 'lm' reads the corpus of data.path: build it with make_batch_source "
                "(tasks/make_source.hpp), not with the registry factory");
          }};
}

}  // namespace poslab
