// Fine-tuning: a run that starts from the parameters of another, finished run (its parent),
// with a changed config: `poslab train --init-from RUN` or `train.init_from = "RUN"`.
//
//   parent   runs/rope-32/      trained at segment 32        config.toml, checkpoint/, eval.json
//   child    runs/rope-32-64/   train.init_from = "runs/rope-32", segment 64, 200 steps, yarn
//
// What may change between parent and child: everything that is not a parameter's shape:
// segment length, batch, steps, learning rate and schedule, the data or task, memory, and the
// encoding's options that are not parameters (rope's scaling). What may not: anything that
// changes a parameter's shape or name (d_model, n_layers, vocab_size, the encoding's type when it
// has parameters, learned's max_len): refused before anything is written, with the parameter,
// both shapes and the config keys that differ.
//
// The optimizer starts fresh (zero moments, the child's own warm-up and schedule) unless
// train.init_optimizer = true: then Adam's moments are the parent's (RUN/optimizer/, kept by every
// finished run) and their bias correction continues from the parent's step count.
//
// Provenance: the child records its parent when it starts, in RUN/init_from.json (path, SHA-256
// of the parent's config.toml and checkpoint, steps), and copies it into eval.json
// (provenance.init_from; top-level fine_tuned_from). A child stopped and resumed continues from
// its own saved state and that record: it never reads or re-initialises from the parent again.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "model/transformer.hpp"

namespace poslab {

struct InitFromError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The parent of a fine-tuned run, as recorded in RUN/init_from.json.
struct ParentRun {
  std::string path;               // train.init_from, as configured
  std::string absolute_path;      // the same, absolute, when the child started
  std::string config_sha256;      // SHA-256 of the parent's config.toml (sha256sum prints it)
  std::string checkpoint_sha256;  // checkpoint_sha256() of the parent (train/checkpoint.hpp)
  int steps = 0;                  // the parent's trained steps
  std::string encoding;           // the parent's encoding.type
  int seq_len = 0;                // the parent's train.seq_len
  bool optimizer = false;         // Adam's moments taken too (train.init_optimizer)

  nlohmann::json to_json() const;
  static ParentRun from_json(const nlohmann::json& record);  // throws InitFromError
};

// Checks child.train.init_from and loads the parent's parameters (with train.init_optimizer, its
// Adam moments too) into `model` (built from `child`, arena allocated). Throws InitFromError,
// "train.init_from = PATH: WHAT", for a missing directory, an unfinished run, an unreadable
// config.toml, a missing or corrupt checkpoint, a parameter of another shape or name. Writes
// nothing; on error the model is unchanged.
ParentRun initialize_from_parent(const Config& child, TransformerLM<float>& model);

// The record a child wrote when it started (RUN/init_from.json), for a resumed child.
constexpr const char* kParentRecordFile = "init_from.json";
ParentRun read_parent_record(const std::filesystem::path& run_dir);

// Throws InitFromError "parameter 'embedding' has shape [256, 16] in the parent but [256, 32] in
// this run; the configs differ in model.d_model: 16 -> 32; ..." if the model `child` builds does
// not have exactly the parameters (names and shapes) of the model `parent` builds: what
// initialize_from_parent would refuse, found from the two configs alone (a study checks every
// child against its parent this way before any run starts). Builds both models when their
// [model] or [encoding] differ.
void check_same_parameters(const Config& parent, const Config& child);

// "encoding.max_len: 1024 -> 2048, model.d_model: 64 -> 32": the keys of [model] and [encoding]
// whose values differ between two configs (what can change a parameter's shape); "" if none.
std::string shape_keys_difference(const Config& parent, const Config& child);

}  // namespace poslab
