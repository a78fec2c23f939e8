// lm: character-level language modelling on the text corpus of [data] (data/corpus.hpp).
//
// Listed in the task registry so that `[task] name = "lm"` is a valid choice (the default) and
// `poslab tasks` shows it, but it is not generated: it reads a corpus from data.path, which the
// registry's factory signature knows nothing about. make_batch_source (tasks/make_source.hpp)
// builds it from the whole Config; calling this factory directly is a programming error and
// throws saying so.
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "tasks/passkey.hpp"
#include "tasks/task.hpp"

namespace poslab {

namespace {

// The rule of task "lm" between keys: every passkey instance it will read (the evaluation grid,
// the training mix) fits in its length (tasks/passkey.hpp: passkey_min_length(format) bytes with
// no filler at all, for the format of eval.passkey_format).
std::optional<ConfigProblem> passkey_instances_fit(const Config& config) {
  const std::string& format = config.eval.passkey_format;
  const int shortest = passkey_min_length(passkey_format_from_name(format)),
            L = config.train.seq_len;
  const std::string need = " is shorter than a passkey instance with no filler (" +
                           std::to_string(shortest) + " bytes in the " + format +
                           " format: the key line, the question and the answer)";
  for (double f : config.eval.passkey_length_factors) {
    const double length = std::round(double(L) * f);
    if (length < shortest) {
      char factor[32];
      std::snprintf(factor, sizeof factor, "%g", f);
      return ConfigProblem{{"eval.passkey_length_factors", "train.seq_len", "eval.passkey_format"},
                           "eval.passkey_length_factors: train.seq_len (" + std::to_string(L) +
                               ") x " + factor + " = " + std::to_string(long(length)) + " bytes" +
                               need};
    }
  }
  if (config.train.passkey_fraction > 0 && L < shortest)
    return ConfigProblem{{"train.passkey_fraction", "train.seq_len", "eval.passkey_format"},
                         "train.passkey_fraction: train.seq_len (" + std::to_string(L) + ")" +
                             need};
  return std::nullopt;
}

}  // namespace

TaskInfo lm_task_info() {
  return {"lm",
          "character-level language modelling on the corpus of data.path (every target scored)",
          "the text of data.path, as Transformer-XL streams (train split / validation split)",
          {},
          [](const Options&, const TaskSetup&) -> std::unique_ptr<BatchSource> {
            throw std::logic_error(
                "task 'lm' reads the corpus of data.path: build it with make_batch_source "
                "(tasks/make_source.hpp), not with the registry factory");
          },
          passkey_instances_fit};
}

}  // namespace poslab
