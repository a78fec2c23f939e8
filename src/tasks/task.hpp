// Every task poslab can train and evaluate on, by name: the registry of `[task] name = "..."`.
//
// A task is a BatchSource (data/batch_source.hpp) generated from a seed: the same seed gives the
// same batches, bit for bit, on every machine (core/rng.hpp). Tasks score only their answer
// tokens: Batch::weights is 1 on the targets that are answers and 0 elsewhere, so the loss and the
// accuracy of a run measure exactly the skill the task is about.
//
// Two kinds of task:
//   independent sequences (copy, reverse, assoc_recall, induction, parity, sort): each row of a
//     batch is one instance, left-aligned and padded; every batch starts afresh (first_of_pass).
//     These test LENGTH GENERALIZATION: evaluated at a segment longer than the training one,
//     they use only instance sizes never seen in training, and an evaluation set never holds the
//     same instance twice (see instance_batcher.hpp).
//   a stream (long_range): each row is one endless stream continued from batch to batch, whose
//     answers can only be predicted from a previous segment. It tests STATE REUSE (memory).
//
// "lm" is listed here too, so that `poslab tasks` and the config loader know it, but it is the
// text corpus of [data], not a generated task: build it with make_batch_source
// (tasks/make_source.hpp), which reads the corpus. Its registry factory throws and says so.
//
// Every task makes three splits from one seed (train, valid, test: data/batch_source.hpp).
//
// Adding a task: write src/tasks/NAME.cpp with a NAME_task_info() and add it to task.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "config/options.hpp"
#include "data/batch_source.hpp"

namespace poslab {

// An evaluation source (split valid or test) is a fixed set of eval_batches batches, by default
// this many; reset() (and reading past the end) starts it again from the first. A training
// source never repeats, and reports eval_batches as its batches_per_pass() too.
constexpr std::int64_t kTaskEvalBatches = 16;

// Everything a task needs to know to make its batches, besides its own options.
struct TaskSetup {
  int batch = 16;        // B: rows per batch
  int len = 64;          // L: segment length of the batches to produce
  int train_len = 64;    // the training segment length: the instance sizes seen in training
  // train: endless batches for learning; valid / test: a fixed evaluation set (reset() repeats
  // it). Each split draws from a random stream of its own (task_seed).
  Split split = Split::train;
  int eval_batches = 16;  // an evaluation set (split valid/test) is this many batches
  // Evaluation at len > train_len: only instances whose length is > longer_than (0 = train_len).
  // A length-generalization study sets it to the previous factor's len, so that each factor
  // tests instances longer than every instance of the factor before (instance_batcher.hpp).
  int longer_than = 0;
  // Evaluation: only the largest instance sizes seen in training (the top quarter of the sizes
  // that fit in train_len; len must be >= train_len). Exact match on these is the gate "did the
  // model learn the task at all", not carried by short easy instances.
  bool gate = false;
  std::uint64_t seed = 1;
  int vocab_size = 256;  // the model's: every token a task writes must be below it

  bool evaluation() const { return split != Split::train; }
};

using TaskFactory =
    std::function<std::unique_ptr<BatchSource>(const Options&, const TaskSetup&)>;

struct TaskInfo {
  std::string name;
  std::string description;  // one line: what it tests
  std::string layout;       // the tokens of one instance, e.g. "^ x1..xn | x1..xn"
  std::vector<OptionSpec> options;
  TaskFactory factory;
  // A rule this task sets on other keys of the config, checked by the config loader (every
  // generated task: its tokens fit model.vocab_size; set by registered_tasks()); nullptr if none.
  ConfigRule config_rule = nullptr;

  // Builds the source. `opts` may omit options: their defaults are filled in.
  // Throws std::runtime_error naming the task when the setup cannot work (nothing fits in L,
  // vocab too small, ...).
  std::unique_ptr<BatchSource> make(const Options& opts, const TaskSetup& s) const;
};

const std::vector<TaskInfo>& registered_tasks();
// nullptr if there is no task of that name.
const TaskInfo* find_task(const std::string& name);

// The seed a task's random generator starts from: the run's seed, mixed (splitmix64) with the
// split, so that training, validation and test batches made from the same seed are three
// different draws. (train and valid give the seeds that `evaluation = false / true` gave before
// splits existed, so older runs are reproduced bit for bit.)
std::uint64_t task_seed(std::uint64_t seed, Split split);

// Throws std::runtime_error("task 'NAME': WHAT"). For the task implementations.
[[noreturn]] void task_error(const std::string& task, const std::string& what);

// Checks what every task needs of a setup (batch, len >= 1; the vocabulary holds every task
// token); throws via task_error otherwise.
void check_task_setup(const std::string& task, const TaskSetup& s);

}  // namespace poslab
