// The config loader: defaults, every kind of mistake it must catch (each message must say where
// and what), overrides, encoding and task options, lists of numbers, and the config_to_toml
// round trip.
//
// Encoding-option validation is tested against a hand-made catalogue (`test_catalogue()`, a
// ConfigChoices: config/choices.hpp), so these tests do not depend on which encodings happen to be
// registered. Task options are tested against the real task registry (registered_choices()),
// whose tasks and options are fixed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "config/differences.hpp"
#include "config/load.hpp"
#include "train/registered_choices.hpp"

using namespace poslab;
using Catch::Contains;

namespace {

// `none` (no options, as registered), a test-only encoding with one option of every kind, and
// the real tasks.
ConfigChoices test_catalogue() {
  ChoiceEntry clipped{
      "clipped",
      {OptionSpec{.key = "clip_k",
                  .default_value = std::int64_t{16},
                  .help = "max distance",
                  .min = 1,
                  .max = 256},
       OptionSpec{.key = "scale", .default_value = 1.0, .help = "a factor", .min = 0},
       OptionSpec{.key = "mode",
                  .default_value = std::string("sum"),
                  .help = "how",
                  .choices = {"sum", "concat"}},
       OptionSpec{.key = "learned", .default_value = true, .help = "trained or fixed"}}};
  return {{ChoiceEntry{"none", {}}, clipped}, registered_choices().tasks};
}

// Config{} as the loader completes it: every option of its encoding at its default (`none` has
// only the options every encoding shares, log-n scaling's; registry.cpp).
Config completed_defaults() {
  Config c;
  for (const ChoiceEntry& e : registered_choices().encodings)
    if (e.name == c.encoding.type) c.encoding.options = Options::defaults(e.options);
  return c;
}

Config load(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return config_from_string(text, "quick.toml", test_catalogue(), overrides);
}

// Every field of two configs, one by one: a field missing from the loader's schema would make
// the round-trip tests below fail here.
void check_same(const Config& a, const Config& b) {
  CHECK(a.out_dir == b.out_dir);
  CHECK(a.model.vocab_size == b.model.vocab_size);
  CHECK(a.model.d_model == b.model.d_model);
  CHECK(a.model.n_layers == b.model.n_layers);
  CHECK(a.model.n_heads == b.model.n_heads);
  CHECK(a.model.d_inner == b.model.d_inner);
  CHECK(a.model.activation == b.model.activation);
  CHECK(a.model.pre_ln == b.model.pre_ln);
  CHECK(a.model.tie_embeddings == b.model.tie_embeddings);
  CHECK(a.model.sink_logit == b.model.sink_logit);
  CHECK(a.model.sink_token == b.model.sink_token);
  CHECK(a.model.init_std == b.model.init_std);
  CHECK(a.encoding.type == b.encoding.type);
  const bool same_options = a.encoding.options.values() == b.encoding.options.values();
  CHECK(same_options);
  CHECK(a.memory.mem_len == b.memory.mem_len);
  CHECK(a.memory.same_length == b.memory.same_length);
  CHECK(a.memory.continue_positions == b.memory.continue_positions);
  CHECK(a.memory.half_loss == b.memory.half_loss);
  CHECK(a.data.path == b.data.path);
  CHECK(a.data.valid_fraction == b.data.valid_fraction);
  CHECK(a.data.include == b.data.include);
  CHECK(a.data.exclude == b.data.exclude);
  CHECK(a.data.test_fraction == b.data.test_fraction);
  CHECK(a.data.split == b.data.split);
  CHECK(a.data.separator == b.data.separator);
  CHECK(a.train.seq_len == b.train.seq_len);
  CHECK(a.train.batch_size == b.train.batch_size);
  CHECK(a.train.steps == b.train.steps);
  CHECK(a.train.lr == b.train.lr);
  CHECK(a.train.min_lr_ratio == b.train.min_lr_ratio);
  CHECK(a.train.warmup_steps == b.train.warmup_steps);
  CHECK(a.train.weight_decay == b.train.weight_decay);
  CHECK(a.train.beta1 == b.train.beta1);
  CHECK(a.train.beta2 == b.train.beta2);
  CHECK(a.train.eps == b.train.eps);
  CHECK(a.train.grad_clip == b.train.grad_clip);
  CHECK(a.train.seed == b.train.seed);
  CHECK(a.train.log_every == b.train.log_every);
  CHECK(a.train.eval_every == b.train.eval_every);
  CHECK(a.train.eval_batches == b.train.eval_batches);
  CHECK(a.train.threads == b.train.threads);
  CHECK(a.eval.seq_len == b.eval.seq_len);
  CHECK(a.eval.mem_len == b.eval.mem_len);
  CHECK(a.eval.length_factors == b.eval.length_factors);
  CHECK(a.eval.memory_factors == b.eval.memory_factors);
  CHECK(a.eval.batches == b.eval.batches);
  CHECK(a.eval.copy_distance == b.eval.copy_distance);
  CHECK(a.eval.copy_min_match == b.eval.copy_min_match);
  CHECK(a.task.name == b.task.name);
  const bool same_task_options = a.task.options.values() == b.task.options.values();
  CHECK(same_task_options);
}

// Every key set to something other than its default.
const char* kEveryKeyChanged = R"(
out_dir = "runs/every key"

[model]
vocab_size = 300
d_model = 96
n_layers = 3
n_heads = 6
d_inner = 384
activation = "gelu"
pre_ln = true
tie_embeddings = true
sink_logit = true
init_std = 0.01

[encoding]
type = "clipped"
clip_k = 8
scale = 0.1
mode = "concat"
learned = false

[memory]
mem_len = 32
same_length = true
continue_positions = true
half_loss = true

[data]
path = "C:\\odd \"path\" with 'escapes'"
include = ["*.py", "odd \"glob\" [!x]*"]
exclude = ["test/*"]
valid_fraction = 0.05
test_fraction = 0.07
split = "file"
separator = "\n# ---\n"

[train]
seq_len = 48
batch_size = 8
steps = 123
lr = 3e-4
min_lr_ratio = 0.3
warmup_steps = 7
weight_decay = 0.1
beta1 = 0.8
beta2 = 0.95
eps = 1e-9
grad_clip = 0.5
seed = 9007199254740993
log_every = 5
eval_every = 20
eval_batches = 4
threads = 1

[eval]
seq_len = 128
mem_len = 64
length_factors = [2, 4.5, 0.25]
memory_factors = [0, 1.5]
batches = 3

[task]
name = "induction"
alphabet = 8
block = 5
)";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Values that load
// ---------------------------------------------------------------------------------------------

TEST_CASE("an empty config is the defaults of config.hpp", "[config]") {
  const Config loaded = config_from_string("", "empty.toml", registered_choices());
  check_same(loaded, completed_defaults());
  CHECK(loaded.encoding.type == "none");
  CHECK(loaded.encoding.options.values().size() == 2);  // log_n = "off", log_n_len = 0
  CHECK(loaded.encoding.options.get_string("log_n") == "off");
  CHECK(loaded.task.name == "lm");
  CHECK(loaded.task.options.values().empty());
  CHECK(loaded.eval.length_factors.empty());
  CHECK(loaded.eval.memory_factors.empty());
}

TEST_CASE("every section and key reaches its struct member", "[config]") {
  const Config c = load(kEveryKeyChanged);
  CHECK(c.out_dir == "runs/every key");
  CHECK(c.model.d_model == 96);
  CHECK(c.model.activation == "gelu");
  CHECK(c.model.pre_ln);
  CHECK(c.model.sink_logit);
  CHECK(c.encoding.type == "clipped");
  CHECK(c.encoding.options.get_int("clip_k") == 8);
  CHECK(c.encoding.options.get_string("mode") == "concat");
  CHECK_FALSE(c.encoding.options.get_bool("learned"));
  CHECK(c.memory.mem_len == 32);
  CHECK(c.data.path == "C:\\odd \"path\" with 'escapes'");
  CHECK(c.data.include == std::vector<std::string>{"*.py", "odd \"glob\" [!x]*"});
  CHECK(c.data.exclude == std::vector<std::string>{"test/*"});
  CHECK(c.data.test_fraction == 0.07);
  CHECK(c.data.split == "file");
  CHECK(c.data.separator == "\n# ---\n");
  CHECK(c.train.lr == 3e-4);
  CHECK(c.train.seed == 9007199254740993ULL);
  CHECK(c.eval.mem_len == 64);
  CHECK(c.eval.length_factors == std::vector<double>{2, 4.5, 0.25});
  CHECK(c.eval.memory_factors == std::vector<double>{0, 1.5});
  CHECK(c.eval.batches == 3);
  CHECK(c.task.name == "induction");
  CHECK(c.task.options.get_int("alphabet") == 8);
  CHECK(c.task.options.get_int("block") == 5);
  // Untouched keys keep their defaults.
  const Config partial = load("[train]\nsteps = 5\n");
  const Config defaults;
  CHECK(partial.train.steps == 5);
  CHECK(partial.train.lr == defaults.train.lr);
  CHECK(partial.model.d_model == defaults.model.d_model);
}

TEST_CASE("an integer is accepted where a float is expected", "[config]") {
  const Config c = load("[train]\nlr = 1\ngrad_clip = 0\n");
  CHECK(c.train.lr == 1.0);
  CHECK(c.train.grad_clip == 0.0);
}

TEST_CASE("edges of the ranges are accepted", "[config]") {
  const Config c = load(
      "[data]\nvalid_fraction = 0\n[train]\nbeta1 = 0\nmin_lr_ratio = 1\n"
      "[memory]\nmem_len = 0\n[eval]\nmem_len = -1\n");
  CHECK(c.data.valid_fraction == 0.0);
  CHECK(c.eval.mem_len == -1);
}

// ---------------------------------------------------------------------------------------------
// Mistakes, each reported as FILE:LINE: WHAT
// ---------------------------------------------------------------------------------------------

TEST_CASE("a missing file is named", "[config][errors]") {
  CHECK_THROWS_AS(load_config("/nonexistent/missing.toml", registered_choices()), ConfigError);
  CHECK_THROWS_WITH(load_config("/nonexistent/missing.toml", registered_choices()),
                    "/nonexistent/missing.toml: config file not found");
}

TEST_CASE("an empty config FILE is the defaults, not an unreadable file", "[config]") {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("poslab-empty-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file).close();
  Config loaded;
  CHECK_NOTHROW(loaded = load_config(file.string(), registered_choices()));
  check_same(loaded, completed_defaults());
  std::filesystem::remove(file);
}

TEST_CASE("a number that is not finite is refused, naming the key", "[config][errors]") {
  CHECK_THROWS_WITH(load("[train]\nlr = inf\n"),
                    "quick.toml:2: train.lr must be a finite number, got inf");
  CHECK_THROWS_WITH(load("[model]\ninit_std = nan\n"),
                    Contains("quick.toml:2: model.init_std must be a finite number"));
  CHECK_THROWS_WITH(load("", {"train.weight_decay=inf"}),
                    Contains("--set train.weight_decay=inf: train.weight_decay must be a finite"));
}

TEST_CASE("a TOML syntax error names the file and line", "[config][errors]") {
  CHECK_THROWS_WITH(load("[model]\nd_model = = 3\n"),
                    Contains("quick.toml:2: TOML syntax error:"));
  CHECK_THROWS_WITH(load("[model]\nd_model = 1\n\n[model]\n"),
                    Contains("quick.toml:4: TOML syntax error:"));
}

TEST_CASE("errors from a real file carry its path and line", "[config][errors]") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("poslab-test-config-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << "# a comment\n[model]\nd_model = 128\nn_hedas = 4\n";
  CHECK_THROWS_WITH(
      load_config(path.string(), registered_choices()),
      path.string() + ":4: unknown key 'model.n_hedas' (did you mean 'model.n_heads'?)");
  std::filesystem::remove(path);
}

TEST_CASE("unknown keys and sections get a did-you-mean", "[config][errors]") {
  CHECK_THROWS_WITH(load("[model]\nn_layers = 2\nd_modle = 256\n"),
                    "quick.toml:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
  CHECK_THROWS_WITH(load("[modle]\nd_model = 256\n"),
                    Contains("quick.toml:1: unknown section [modle] (did you mean 'model'?)"));
  CHECK_THROWS_WITH(load("outdir = \"x\"\n"),
                    "quick.toml:1: unknown key 'outdir' (did you mean 'out_dir'?)");
  // The right key in the wrong section.
  CHECK_THROWS_WITH(load("[model]\nmem_len = 8\n"),
                    "quick.toml:2: unknown key 'model.mem_len' (did you mean 'memory.mem_len' or "
                    "'eval.mem_len'?)");
  CHECK_THROWS_WITH(load("[model]\nlr = 0.1\n"),
                    "quick.toml:2: unknown key 'model.lr' (did you mean 'train.lr'?)");
  // Nothing close: no suggestion.
  CHECK_THROWS_WITH(load("[train]\nxyzzy = 1\n"), "quick.toml:2: unknown key 'train.xyzzy'");
  // A section written as a plain value.
  CHECK_THROWS_WITH(load("model = 3\n"),
                    "quick.toml:1: 'model' must be a section ([model]), got an integer");
}

TEST_CASE("the first mistake in file order is the one reported", "[config][errors]") {
  // toml++ sorts keys by name ("model" < "train"); the report must follow the file.
  CHECK_THROWS_WITH(load("[train]\nstesp = 1\n\n[model]\nd_modle = 2\n"),
                    Contains("quick.toml:2: unknown key 'train.stesp'"));
}

TEST_CASE("wrong types say what was expected and what was written", "[config][errors]") {
  CHECK_THROWS_WITH(load("[model]\nd_model = \"big\"\n"),
                    "quick.toml:2: model.d_model: expected an integer, got a string");
  CHECK_THROWS_WITH(load("[model]\nd_model = 128.0\n"),
                    "quick.toml:2: model.d_model: expected an integer, got a float");
  CHECK_THROWS_WITH(load("[model]\npre_ln = 1\n"),
                    "quick.toml:2: model.pre_ln: expected a boolean, got an integer");
  CHECK_THROWS_WITH(load("[model]\nsink_logit = 1\n"),
                    "quick.toml:2: model.sink_logit: expected a boolean, got an integer");
  CHECK_THROWS_WITH(load("[train]\nlr = \"fast\"\n"),
                    "quick.toml:2: train.lr: expected a float, got a string");
  CHECK_THROWS_WITH(load("[data]\npath = [\"a\", \"b\"]\n"),
                    "quick.toml:2: data.path: expected a string, got an array");
  CHECK_THROWS_WITH(load("out_dir = 3\n"), "quick.toml:1: out_dir: expected a string, got an integer");
}

TEST_CASE("values out of range say what the range is", "[config][errors]") {
  CHECK_THROWS_WITH(load("[model]\nd_model = 0\n"), "quick.toml:2: model.d_model must be >= 1, got 0");
  CHECK_THROWS_WITH(load("[model]\nn_heads = -4\n"), Contains("model.n_heads must be >= 1"));
  CHECK_THROWS_WITH(load("[model]\nactivation = \"glue\"\n"),
                    "quick.toml:2: model.activation must be one of relu, gelu, got \"glue\" "
                    "(did you mean 'gelu'?)");
  CHECK_THROWS_WITH(load("[data]\nvalid_fraction = 1\n"),
                    "quick.toml:2: data.valid_fraction must be in [0, 1), got 1");
  CHECK_THROWS_WITH(load("[data]\nvalid_fraction = -0.1\n"), Contains("data.valid_fraction must be in [0, 1)"));
  CHECK_THROWS_WITH(load("[train]\nlr = 0\n"), "quick.toml:2: train.lr must be > 0, got 0");
  CHECK_THROWS_WITH(load("[train]\nlr = nan\n"), Contains("train.lr must be a finite number, got nan"));
  CHECK_THROWS_WITH(load("[train]\nbeta2 = 1.0\n"), "quick.toml:2: train.beta2 must be in [0, 1), got 1");
  CHECK_THROWS_WITH(load("[train]\nbeta1 = -0.5\n"), Contains("train.beta1 must be in [0, 1)"));
  CHECK_THROWS_WITH(load("[memory]\nmem_len = -1\n"), "quick.toml:2: memory.mem_len must be >= 0, got -1");
  CHECK_THROWS_WITH(load("[eval]\nmem_len = -2\n"), "quick.toml:2: eval.mem_len must be >= -1, got -2");
  CHECK_THROWS_WITH(load("out_dir = \"\"\n"), Contains("quick.toml:1: out_dir must be a non-empty string"));
  // Bigger than the C++ member can hold.
  CHECK_THROWS_WITH(load("[model]\nd_model = 3000000000\n"),
                    Contains("quick.toml:2: model.d_model must be in [-2147483648, 2147483647] "
                             "to fit its C++ type"));
  CHECK_THROWS_WITH(load("[train]\nseed = -1\n"), Contains("train.seed must be in [0,"));
}

TEST_CASE("d_model must be divisible by n_heads", "[config][errors]") {
  CHECK_THROWS_WITH(load("[model]\nd_model = 130\n"),
                    "quick.toml:2: model.d_model (130) must be divisible by model.n_heads (4)");
  CHECK_THROWS_WITH(load("\n[model]\nn_heads = 3\n"),
                    "quick.toml:3: model.d_model (128) must be divisible by model.n_heads (3)");
  CHECK_NOTHROW(load("[model]\nd_model = 96\nn_heads = 3\n"));
}

TEST_CASE("an unknown encoding type lists the registered ones", "[config][errors][encoding]") {
  CHECK_THROWS_WITH(load("[encoding]\ntype = \"clipd\"\n"),
                    "quick.toml:2: unknown encoding type 'clipd' (did you mean 'clipped'?); "
                    "registered encodings: none, clipped");
  // With the real registry: whatever is registered is listed, `none` always.
  CHECK_THROWS_WITH(
      config_from_string("[encoding]\ntype = \"xyzzy\"\n", "real.toml", registered_choices()),
      Contains("real.toml:2: unknown encoding type 'xyzzy'") &&
          Contains("registered encodings: none"));
  CHECK_THROWS_WITH(load("[encoding]\ntype = 3\n"),
                    "quick.toml:2: encoding.type: expected a string, got an integer");
}

// ---------------------------------------------------------------------------------------------
// Encoding options
// ---------------------------------------------------------------------------------------------

TEST_CASE("an encoding's options get their defaults", "[config][encoding]") {
  const Config c = load("[encoding]\ntype = \"clipped\"\n");
  CHECK(c.encoding.options.get_int("clip_k") == 16);
  CHECK(c.encoding.options.get_double("scale") == 1.0);
  CHECK(c.encoding.options.get_string("mode") == "sum");
  CHECK(c.encoding.options.get_bool("learned"));
  CHECK(c.encoding.options.values().size() == 4);
}

TEST_CASE("encoding options are checked against their OptionSpec", "[config][encoding][errors]") {
  const std::string head = "[encoding]\ntype = \"clipped\"\n";
  const Config c = load(head + "clip_k = 4\nscale = 2\n");
  CHECK(c.encoding.options.get_int("clip_k") == 4);
  CHECK(c.encoding.options.get_double("scale") == 2.0);  // an integer, stored as a float
  CHECK(std::holds_alternative<double>(c.encoding.options.values().at("scale")));

  CHECK_THROWS_WITH(load(head + "clip_k = 0\n"),
                    "quick.toml:3: encoding.clip_k must be in [1, 256], got 0");
  CHECK_THROWS_WITH(load(head + "clip_k = 1000\n"), Contains("encoding.clip_k must be in [1, 256]"));
  CHECK_THROWS_WITH(load(head + "clip_k = \"8\"\n"),
                    "quick.toml:3: encoding.clip_k: expected an integer, got a string");
  CHECK_THROWS_WITH(load(head + "scale = -1\n"), "quick.toml:3: encoding.scale must be >= 0, got -1");
  CHECK_THROWS_WITH(load(head + "mode = \"concta\"\n"),
                    "quick.toml:3: encoding.mode must be one of sum, concat, got \"concta\" "
                    "(did you mean 'concat'?)");
  CHECK_THROWS_WITH(load(head + "learned = \"yes\"\n"),
                    Contains("encoding.learned: expected a boolean, got a string"));
  CHECK_THROWS_WITH(load(head + "clipk = 8\n"),
                    "quick.toml:3: unknown key 'encoding.clipk' for encoding 'clipped' (did you "
                    "mean 'encoding.clip_k'?); its options are: clip_k, scale, mode, learned");
}

TEST_CASE("`none` rejects any option but the shared ones and names them",
          "[config][encoding][errors]") {
  // `none` has only the options every encoding has (log-n scaling, registry.cpp).
  CHECK_THROWS_WITH(config_from_string("[encoding]\ntype = \"none\"\nclip_k = 8\n", "real.toml",
                                       registered_choices()),
                    "real.toml:3: unknown key 'encoding.clip_k' for encoding 'none'; its options "
                    "are: log_n, log_n_len");
  // Options are judged against the encoding finally chosen, here by an override.
  CHECK_THROWS_WITH(load("[encoding]\ntype = \"clipped\"\nclip_k = 8\n", {"encoding.type=none"}),
                    "quick.toml:3: unknown key 'encoding.clip_k': encoding 'none' takes no options");
}

// ---------------------------------------------------------------------------------------------
// [task]: a task of the registry and its options, validated like [encoding]
// ---------------------------------------------------------------------------------------------

TEST_CASE("a task's options get their defaults", "[config][task]") {
  const Config c = load("[task]\nname = \"induction\"\n");
  CHECK(c.task.name == "induction");
  CHECK(c.task.options.get_int("alphabet") == 16);
  CHECK(c.task.options.get_int("block") == 0);
  CHECK(c.task.options.values().size() == 2);
  CHECK(load("[task]\nname = \"parity\"\n").task.options.values().empty());
}

TEST_CASE("an unknown task lists the registered ones", "[config][task][errors]") {
  CHECK_THROWS_WITH(load("[task]\nname = \"cpy\"\n"),
                    "quick.toml:2: unknown task 'cpy' (did you mean 'copy'?); registered tasks: lm, "
                    "copy, reverse, assoc_recall, induction, parity, long_range, sort");
  CHECK_THROWS_WITH(load("[task]\nname = 3\n"),
                    "quick.toml:2: task.name: expected a string, got an integer");
  CHECK_THROWS_WITH(load("", {"task.name=revrese"}),
                    Contains("--set task.name=revrese: unknown task 'revrese' (did you mean "
                             "'reverse'?)"));
}

TEST_CASE("task options are checked against the task's OptionSpec", "[config][task][errors]") {
  const std::string head = "[task]\nname = \"copy\"\n";
  CHECK(load(head + "alphabet = 4\n").task.options.get_int("alphabet") == 4);
  CHECK_THROWS_WITH(load(head + "alphabt = 4\n"),
                    "quick.toml:3: unknown key 'task.alphabt' for task 'copy' (did you mean "
                    "'task.alphabet'?); its options are: alphabet");
  CHECK_THROWS_WITH(load(head + "alphabet = 100\n"),
                    "quick.toml:3: task.alphabet must be in [2, 62], got 100");
  CHECK_THROWS_WITH(load(head + "alphabet = \"abc\"\n"),
                    "quick.toml:3: task.alphabet: expected an integer, got a string");
  CHECK_THROWS_WITH(load("[task]\nname = \"long_range\"\nblock = 1\n"),
                    "quick.toml:3: task.block must be in [2, 1048576], got 1");
  // A task without options says so; lm (the default) is one.
  CHECK_THROWS_WITH(load("[task]\nname = \"parity\"\nalphabet = 4\n"),
                    "quick.toml:3: unknown key 'task.alphabet': task 'parity' takes no options");
  CHECK_THROWS_WITH(load("[task]\nalphabet = 4\n"),
                    "quick.toml:2: unknown key 'task.alphabet': task 'lm' takes no options");
  // Options are judged against the task finally chosen, here by an override.
  CHECK_THROWS_WITH(load(head + "alphabet = 4\n", {"task.name=parity"}),
                    "quick.toml:3: unknown key 'task.alphabet': task 'parity' takes no options");
  const Config c = load("", {"task.name=assoc_recall", "task.keys=20"});
  CHECK(c.task.options.get_int("keys") == 20);
  CHECK(c.task.options.get_int("values") == 10);
}

TEST_CASE("a generated task needs a vocabulary of printable bytes", "[config][task][errors]") {
  CHECK_THROWS_WITH(load("[model]\nvocab_size = 100\n[task]\nname = \"copy\"\n"),
                    "quick.toml:2: model.vocab_size (100) must be at least 125 for task 'copy' (its "
                    "tokens are printable bytes up to '|' = 124)");
  CHECK_NOTHROW(load("[model]\nvocab_size = 100\n"));  // lm: any vocabulary
}

// ---------------------------------------------------------------------------------------------
// [eval]: lists of numbers
// ---------------------------------------------------------------------------------------------

TEST_CASE("eval.stride: off by default, 1 to the shortest evaluated length, language models only",
          "[config][errors][sliding]") {
  CHECK(load("").eval.stride == -1);
  CHECK(load("[eval]\nstride = 1\n").eval.stride == 1);
  CHECK(load("[train]\nseq_len = 64\n[eval]\nstride = 64\n").eval.stride == 64);
  CHECK(load("[train]\nseq_len = 64\n[eval]\nstride = 32\nlength_factors = [0.5, 4]\n")
            .eval.stride == 32);
  CHECK_THROWS_WITH(load("[eval]\nstride = 0\n"),
                    "quick.toml:2: eval.stride = 0: a sliding window must move by at least 1 byte "
                    "(1 <= eval.stride <= the evaluated length; -1 = off)");
  CHECK_THROWS_WITH(load("[eval]\nstride = -2\n"), "quick.toml:2: eval.stride must be >= -1, got -2");
  CHECK_THROWS_WITH(load("[train]\nseq_len = 64\n[eval]\nstride = 65\n"),
                    "quick.toml:4: eval.stride (65) is above the shortest evaluated length, "
                    "train.seq_len = 64 bytes: a window cannot move by more than its own length");
  CHECK_THROWS_WITH(load("[train]\nseq_len = 64\n[eval]\nstride = 33\nlength_factors = [4, 0.5]\n"),
                    Contains("quick.toml:4: eval.stride (33) is above the shortest evaluated "
                             "length, train.seq_len x 0.5 (eval.length_factors) = 32 bytes"));
  CHECK_THROWS_WITH(load("[train]\nseq_len = 64\n[eval]\nseq_len = 16\n", {"eval.stride=20"}),
                    Contains("--set eval.stride=20: eval.stride (20) is above the shortest "
                             "evaluated length, eval.seq_len = 16 bytes"));
  CHECK_THROWS_WITH(load("[eval]\nstride = 4\n[task]\nname = \"copy\"\n"),
                    Contains("quick.toml:2: eval.stride: sliding-window evaluation reads a text "
                             "stream") && Contains("not task 'copy'"));
}

TEST_CASE("eval.copy_distance: off by default, k >= 1, language models only", "[config][errors]") {
  CHECK_FALSE(load("").eval.copy_distance);
  CHECK(load("").eval.copy_min_match == 8);
  const Config on = load("[eval]\ncopy_distance = true\ncopy_min_match = 3\n");
  CHECK(on.eval.copy_distance);
  CHECK(on.eval.copy_min_match == 3);
  CHECK_THROWS_WITH(load("[eval]\ncopy_distance = true\ncopy_min_match = 0\n"),
                    "quick.toml:3: eval.copy_min_match must be >= 1, got 0");
  CHECK_THROWS_WITH(load("[eval]\ncopy_distance = true\n[task]\nname = \"copy\"\n"),
                    Contains("quick.toml:2: eval.copy_distance: the loss by copy distance is for "
                             "language models") && Contains("not task 'copy'"));
}

TEST_CASE("eval factors are arrays of numbers, each checked on its own", "[config][errors]") {
  const Config c = load("[eval]\nlength_factors = [2, 0.5]\nmemory_factors = [0]\nbatches = 0\n");
  CHECK(c.eval.length_factors == std::vector<double>{2.0, 0.5});
  CHECK(c.eval.memory_factors == std::vector<double>{0.0});
  CHECK(c.eval.batches == 0);
  CHECK(load("[eval]\nlength_factors = []\n").eval.length_factors.empty());

  CHECK_THROWS_WITH(load("[eval]\nlength_factors = [2, 0]\n"),
                    "quick.toml:2: eval.length_factors[1] must be > 0, got 0");
  CHECK_THROWS_WITH(load("[eval]\nmemory_factors = [1, -0.5]\n"),
                    "quick.toml:2: eval.memory_factors[1] must be >= 0, got -0.5");
  CHECK_THROWS_WITH(load("[eval]\nlength_factors = [nan]\n"),
                    Contains("quick.toml:2: eval.length_factors[0] must be > 0"));
  CHECK_THROWS_WITH(load("[eval]\nmemory_factors = [inf]\n"),
                    Contains("quick.toml:2: eval.memory_factors[0] must be >= 0"));
  // An array written over several lines: the element's own line.
  CHECK_THROWS_WITH(load("[eval]\nlength_factors = [\n  2,\n  -1,\n]\n"),
                    "quick.toml:4: eval.length_factors[1] must be > 0, got -1");
  CHECK_THROWS_WITH(load("[eval]\nlength_factors = 2\n"),
                    "quick.toml:2: eval.length_factors: expected an array of numbers, got an integer");
  CHECK_THROWS_WITH(load("[eval]\nlength_factors = [2, \"4\"]\n"),
                    "quick.toml:2: eval.length_factors[1]: expected a number, got a string");
  CHECK_THROWS_WITH(load("[eval]\nlength_factors = [[2]]\n"),
                    "quick.toml:2: eval.length_factors[0]: expected a number, got an array");
  CHECK_THROWS_WITH(load("[eval]\nbatches = -1\n"), "quick.toml:2: eval.batches must be >= 0, got -1");
  // The same on the command line.
  CHECK(load("", {"eval.length_factors=[2, 4]"}).eval.length_factors == std::vector<double>{2, 4});
  CHECK_THROWS_WITH(load("", {"eval.length_factors=[2, -4]"}),
                    "--set eval.length_factors=[2, -4]: eval.length_factors[1] must be > 0, got -4");
  CHECK_THROWS_WITH(load("", {"eval.memory_factors=2,4"}),
                    "--set eval.memory_factors=2,4: eval.memory_factors: expected an array of "
                    "numbers, got a string");
}

// ---------------------------------------------------------------------------------------------
// Overrides
// ---------------------------------------------------------------------------------------------

TEST_CASE("data.include and data.exclude are arrays of strings", "[config][data]") {
  const Config c = load("[data]\ninclude = [\"*.py\", \"*.pyi\"]\nexclude = []\n");
  CHECK(c.data.include == std::vector<std::string>{"*.py", "*.pyi"});
  CHECK(c.data.exclude.empty());
  CHECK(Config{}.data.include.empty());  // default: every plain-text file
  CHECK(Config{}.data.split == "position");
  CHECK(Config{}.data.separator == "\n\n");
  CHECK(Config{}.data.test_fraction == 0.0);

  // Each element is judged on its own, on its own line.
  CHECK_THROWS_WITH(load("[data]\ninclude = [\"*.py\", 3]\n"),
                    "quick.toml:2: data.include[1]: expected a string, got an integer");
  CHECK_THROWS_WITH(load("[data]\nexclude = [\n  \"a/*\",\n  [\"b\"],\n]\n"),
                    "quick.toml:4: data.exclude[1]: expected a string, got an array");
  CHECK_THROWS_WITH(load("[data]\ninclude = \"*.py\"\n"),
                    "quick.toml:2: data.include: expected an array of strings, got a string");
  CHECK_THROWS_WITH(load("[data]\ninclude = [\"\"]\n"),
                    "quick.toml:2: data.include[0] must be a non-empty string, got \"\"");

  // On the command line, as a TOML array.
  const Config o = load("", {"data.include=[\"*.py\"]", "data.exclude=[\"test/*\", \"*/tests/*\"]"});
  CHECK(o.data.include == std::vector<std::string>{"*.py"});
  CHECK(o.data.exclude == std::vector<std::string>{"test/*", "*/tests/*"});
  CHECK_THROWS_WITH(load("", {"data.include=*.py"}),
                    Contains("--set data.include=*.py") &&
                        Contains("expected an array of strings, got a string"));
}

TEST_CASE("data.split, data.test_fraction and their limits", "[config][data][errors]") {
  const Config c = load("[data]\nsplit = \"file\"\ntest_fraction = 0.05\nseparator = \"\"\n");
  CHECK(c.data.split == "file");
  CHECK(c.data.test_fraction == 0.05);
  CHECK(c.data.separator.empty());
  CHECK_THROWS_WITH(load("[data]\nsplit = \"files\"\n"),
                    "quick.toml:2: data.split must be one of position, file, got \"files\" "
                    "(did you mean 'file'?)");
  CHECK_THROWS_WITH(load("[data]\ntest_fraction = 1\n"),
                    "quick.toml:2: data.test_fraction must be in [0, 1), got 1");
  CHECK_THROWS_WITH(load("[data]\nvalid_fraction = 0.5\ntest_fraction = 0.5\n"),
                    "quick.toml:3: data.valid_fraction (0.5) + data.test_fraction (0.5) must be "
                    "below 1: the rest is the train split");
}

TEST_CASE("overrides are applied after the file", "[config][overrides]") {
  const Config c = load("out_dir = \"runs/a\"\n[model]\nd_model = 64\n",
                        {"model.d_model=256", "train.lr=1e-2", "out_dir=runs/x",
                         "model.pre_ln=true", "data.path = /tmp/with space"});
  CHECK(c.model.d_model == 256);
  CHECK(c.train.lr == 1e-2);
  CHECK(c.out_dir == "runs/x");
  CHECK(c.model.pre_ln);
  CHECK(c.data.path == "/tmp/with space");
  // The last word wins.
  CHECK(load("", {"model.n_layers=2", "model.n_layers=3"}).model.n_layers == 3);
}

TEST_CASE("override values: TOML, or a bare string", "[config][overrides]") {
  CHECK(load("", {"encoding.type=\"clipped\""}).encoding.type == "clipped");
  CHECK(load("", {"encoding.type=clipped"}).encoding.type == "clipped");
  const Config c = load("", {"encoding.type=clipped", "encoding.clip_k=4", "encoding.mode=concat"});
  CHECK(c.encoding.options.get_int("clip_k") == 4);
  CHECK(c.encoding.options.get_string("mode") == "concat");
  // A string key takes the text as written even when it looks like a number.
  CHECK(load("", {"out_dir=2024"}).out_dir == "2024");
}

TEST_CASE("override mistakes name the --set argument", "[config][overrides][errors]") {
  CHECK_THROWS_WITH(load("", {"model.d_modle=256"}),
                    "--set model.d_modle=256: unknown key 'model.d_modle' (did you mean "
                    "'model.d_model'?)");
  CHECK_THROWS_WITH(load("", {"model.d_model=abc"}),
                    "--set model.d_model=abc: model.d_model: expected an integer, got a string");
  CHECK_THROWS_WITH(load("", {"modle.d_model=3"}),
                    Contains("--set modle.d_model=3: unknown section [modle] (did you mean 'model'?)"));
  CHECK_THROWS_WITH(load("", {"model.d_model"}),
                    "--set model.d_model: expected KEY=VALUE, e.g. model.d_model=256");
  CHECK_THROWS_WITH(load("", {"encoding.type=clipt"}),
                    Contains("--set encoding.type=clipt: unknown encoding type 'clipt'"));
  CHECK_THROWS_WITH(load("", {"encoding.clip_k=4"}),
                    "--set encoding.clip_k=4: unknown key 'encoding.clip_k': encoding 'none' takes "
                    "no options");
  CHECK_THROWS_WITH(load("", {"model.d_model=130"}),
                    "--set model.d_model=130: model.d_model (130) must be divisible by "
                    "model.n_heads (4)");
}

// ---------------------------------------------------------------------------------------------
// config_to_toml
// ---------------------------------------------------------------------------------------------

TEST_CASE("config_to_toml loads back to the same config", "[config][roundtrip]") {
  SECTION("defaults") {
    const Config c = completed_defaults();
    check_same(config_from_string(config_to_toml(c), "written.toml", registered_choices()), c);
  }
  SECTION("every key changed, odd strings, an encoding and a task with options, lists") {
    const Config c = load(kEveryKeyChanged);
    const std::string text = config_to_toml(c);
    check_same(load(text), c);
    // Writing is stable: a second round gives the same text.
    CHECK(config_to_toml(load(text)) == text);
  }
  SECTION("floats that have no short decimal form") {
    Config c = completed_defaults();
    c.train.lr = 1.0 / 3.0;
    c.train.eps = 5e-324;  // the smallest subnormal
    c.model.init_std = 0.1 + 0.2;
    c.train.weight_decay = 1e300;
    check_same(config_from_string(config_to_toml(c), "written.toml", registered_choices()), c);
  }
}

TEST_CASE("config_to_toml writes every key, encoding defaults included", "[config][roundtrip]") {
  const std::string text = config_to_toml(load("[encoding]\ntype = \"clipped\"\n"));
  for (const char* line : {"out_dir = \"runs/default\"", "[model]", "d_model = 128",
                           "activation = \"relu\"", "[encoding]", "type = \"clipped\"",
                           "clip_k = 16", "scale = 1.0", "mode = \"sum\"", "learned = true",
                           "[memory]", "mem_len = 0", "[data]", "valid_fraction = 0.1",
                           "include = []", "exclude = []", "test_fraction = 0.0",
                           "split = \"position\"", "separator = \"\\n\\n\"", "[train]",
                           "lr = 0.001", "eps = 1e-8", "seed = 1", "[eval]", "mem_len = -1",
                           "length_factors = []", "memory_factors = []", "batches = 16", "[task]",
                           "name = \"lm\""})
    CHECK_THAT(text, Contains(line));
  const std::string task = config_to_toml(load(
      "[task]\nname = \"long_range\"\nblock = 4\n[eval]\nlength_factors = [2, 0.5]\n"));
  for (const char* line : {"[task]\nname = \"long_range\"\n", "alphabet = 16", "block = 4",
                           "gap = 0", "length_factors = [2.0, 0.5]"})
    CHECK_THAT(task, Contains(line));
}

TEST_CASE("differing_settings names what sets each config apart", "[config][explore]") {
  // Issue 33: the explorer headed a YaRN s = 8 run and its unscaled parent both "(rope)".
  const Config parent = config_from_string("[encoding]\ntype = \"rope\"\n", "parent.toml",
                                           registered_choices());
  const Config yarn = config_from_string(
      "[encoding]\ntype = \"rope\"\nscaling = \"yarn\"\nfactor = 8.0\n"
      "original_len = 64\n", "yarn.toml",
      registered_choices(), {"out_dir=\"elsewhere\"", "train.threads=2"});  // no difference
  const std::vector<std::vector<std::string>> differs = differing_settings({parent, yarn});
  REQUIRE(differs.size() == 2);
  CHECK(differs[0] == std::vector<std::string>{"encoding.factor = 1.0",
                                               "encoding.original_len = 0",
                                               "encoding.scaling = \"none\""});
  CHECK(differs[1] == std::vector<std::string>{"encoding.factor = 8.0",
                                               "encoding.original_len = 64",
                                               "encoding.scaling = \"yarn\""});
  // Keys only one encoding has (ALiBi has no base): "(not set)" for the other.
  const Config alibi = config_from_string("[encoding]\ntype = \"alibi\"\n", "alibi.toml",
                                          registered_choices());
  const auto with_alibi = differing_settings({parent, alibi});
  CHECK_THAT(with_alibi[0].front(), Contains("encoding.type = \"rope\""));
  CHECK_THAT(with_alibi[1].front(), Contains("encoding.type = \"alibi\""));
  CHECK(std::find(with_alibi[1].begin(), with_alibi[1].end(), "encoding.base = (not set)") !=
        with_alibi[1].end());
  CHECK(differing_settings({parent}) == std::vector<std::vector<std::string>>{{}});
}
