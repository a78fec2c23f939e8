// Fine-tuning from a finished run (init_from.hpp): check the parent, then load it.
#include "train/init_from.hpp"

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "config/load.hpp"
#include "core/sha256.hpp"
#include "train/checkpoint.hpp"
#include "train/registered_choices.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"

namespace poslab {

namespace fs = std::filesystem;

namespace {

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "section.key" -> "value" for the lines of [model] and [encoding] of a config's TOML.
std::map<std::string, std::string> shape_keys(const Config& config) {
  std::map<std::string, std::string> keys;
  std::istringstream lines(config_to_toml(config));
  std::string line, section;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.front() == '[') section = line.substr(1, line.size() - 2);
    const auto equals = line.find(" = ");
    if ((section == "model" || section == "encoding") && equals != std::string::npos)
      keys[section + "." + line.substr(0, equals)] = line.substr(equals + 3);
  }
  return keys;
}

}  // namespace

std::string shape_keys_difference(const Config& parent, const Config& child) {
  const auto a = shape_keys(parent), b = shape_keys(child);
  std::string out;
  auto add = [&out](const std::string& key, const std::string& from, const std::string& to) {
    out += (out.empty() ? "" : ", ") + key + ": " + from + " -> " + to;
  };
  for (const auto& [key, value] : a) {
    const auto it = b.find(key);
    if (it == b.end()) add(key, value, "(none)");
    else if (it->second != value) add(key, value, it->second);
  }
  for (const auto& [key, value] : b)
    if (!a.count(key)) add(key, "(none)", value);
  return out;
}

void check_same_parameters(const Config& parent, const Config& child) {
  const std::string difference = shape_keys_difference(parent, child);
  if (difference.empty()) return;  // the same [model] and [encoding]: the same parameters
  const TransformerLM<float> from(parent.model, parent.encoding, parent.memory);
  const TransformerLM<float> to(child.model, child.encoding, child.memory);
  auto shape_text = [](const std::vector<std::size_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  };
  std::map<std::string, const ParamSlot*> in_child;
  for (const ParamSlot& slot : to.arena().slots()) in_child[slot.name] = &slot;
  std::string problem;
  for (const ParamSlot& slot : from.arena().slots()) {
    const auto it = in_child.find(slot.name);
    if (it == in_child.end()) {
      problem = "the parent has parameter '" + slot.name + "' " + shape_text(slot.shape) +
                ", this run's model has none";
      break;
    }
    if (it->second->shape != slot.shape) {
      problem = "parameter '" + slot.name + "' has shape " + shape_text(slot.shape) +
                " in the parent but " + shape_text(it->second->shape) + " in this run";
      break;
    }
    in_child.erase(it);
  }
  if (problem.empty() && !in_child.empty())
    problem = "the parent has no parameter '" + in_child.begin()->first + "' (this run has it, " +
              shape_text(in_child.begin()->second->shape) + ")";
  if (problem.empty()) return;
  throw InitFromError(problem + "; the configs differ in " + difference +
                      "; fine-tuning keeps every parameter's name and shape");
}

nlohmann::json ParentRun::to_json() const {
  return {{"path", path},
          {"absolute_path", absolute_path},
          {"config_sha256", config_sha256},
          {"checkpoint_sha256", checkpoint_sha256},
          {"steps", steps},
          {"encoding", encoding},
          {"seq_len", seq_len},
          {"optimizer", optimizer ? "continued" : "fresh"}};
}

ParentRun ParentRun::from_json(const nlohmann::json& record) {
  try {
    ParentRun p;
    p.path = record.at("path").get<std::string>();
    p.absolute_path = record.at("absolute_path").get<std::string>();
    p.config_sha256 = record.at("config_sha256").get<std::string>();
    p.checkpoint_sha256 = record.at("checkpoint_sha256").get<std::string>();
    p.steps = record.at("steps").get<int>();
    p.encoding = record.at("encoding").get<std::string>();
    p.seq_len = record.at("seq_len").get<int>();
    p.optimizer = record.at("optimizer").get<std::string>() == "continued";
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InitFromError(std::string("unusable parent record: ") + e.what());
  }
}

ParentRun read_parent_record(const fs::path& run_dir) {
  try {
    return ParentRun::from_json(RunDirectory::open(run_dir).read_json(kParentRecordFile));
  } catch (const std::exception& e) {
    throw InitFromError((run_dir / kParentRecordFile).string() + ": " + e.what());
  }
}

ParentRun initialize_from_parent(const Config& child, TransformerLM<float>& model) {
  const std::string& path = child.train.init_from;
  const fs::path dir(path);
  const std::string where = "train.init_from = " + path + ": ";
  auto fail = [&where](const std::string& what) -> InitFromError {
    return InitFromError(where + what);
  };

  // 1. A finished run: a directory with eval.json (a run's last file), not this run itself.
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw fail("no such run directory");
  if (!fs::is_directory(dir, ec)) throw fail("not a run directory (it is a file)");
  if (fs::exists(child.out_dir, ec) && fs::equivalent(dir, child.out_dir, ec))
    throw fail("that is this run's own directory (out_dir); a run starts from another run");
  if (!fs::exists(dir / "eval.json")) {
    std::string why = "not a finished run (no eval.json)";
    if (DirectoryLock::is_held(dir)) why += ": another poslab process is training it now";
    else if (const auto claim = read_claim(dir); claim && claim_is_live(*claim))
      why += ": it is being trained by " + claim->describe();
    else if (fs::exists(dir / "config.toml"))
      why += ": it was interrupted or failed; finish it first (poslab train --config " +
             (dir / "config.toml").string() + " --resume)";
    throw fail(why + "; a run starts only from a finished run");
  }

  // 2. Its config and its result, readable.
  Config parent;
  try {
    parent = load_config((dir / "config.toml").string(), registered_choices());
  } catch (const std::exception& e) {
    throw fail(std::string("its config.toml cannot be read: ") + e.what());
  }
  nlohmann::json eval;
  try {
    eval = RunDirectory::open(dir).read_json("eval.json");
  } catch (const std::exception& e) {
    throw fail(std::string("its eval.json cannot be read: ") + e.what());
  }
  if (!has_checkpoint(dir)) throw fail("a finished run without checkpoint/ (deleted?)");

  // 3. Every parameter with the same name and shape: load_checkpoint compares them all before it
  //    changes anything, and checks every file (size, type, finite values).
  ParentRun record;
  record.path = path;
  record.absolute_path = fs::absolute(dir).lexically_normal().string();
  record.steps = eval.value("steps", parent.train.steps);
  record.encoding = parent.encoding.type;
  record.seq_len = parent.train.seq_len;
  record.optimizer = child.train.init_optimizer;
  if (record.optimizer && !has_optimizer_state(dir))
    throw fail("train.init_optimizer = true, but the run kept no Adam moments (no optimizer/: it "
               "was finished by an older poslab); set train.init_optimizer = false to start the "
               "optimizer fresh");
  const std::vector<float> before(model.arena().values(),
                                  model.arena().values() + model.arena().count());
  try {
    load_checkpoint(dir, model.arena());
    if (record.optimizer) load_optimizer_state(dir, model.arena());
    record.config_sha256 = sha256_hex(file_bytes(dir / "config.toml"));
    record.checkpoint_sha256 = checkpoint_sha256(dir);
  } catch (const std::exception& e) {
    std::copy(before.begin(), before.end(), model.arena().values());  // unchanged on error
    std::string message = e.what();
    // "checkpoint DIR: parameter 'learned.U' has shape [1024, 16] in the checkpoint but
    // [2048, 16] in the model" -> said in the words of fine-tuning, with what causes it.
    for (auto [from, to] : {std::pair<std::string, std::string>{" in the checkpoint but ",
                                                                 " in the parent but "},
                            {" in the model", " in this run"},
                            {"(the model has it", "(this run has it"},
                            {"is not in the model", "is not in this run's model"}})
      if (const auto at = message.find(from); at != std::string::npos)
        message.replace(at, from.size(), to);
    const std::string difference = shape_keys_difference(parent, child);
    if (!difference.empty())
      message += "; the configs differ in " + difference;
    throw fail(message + "; fine-tuning keeps every parameter's name and shape");
  }
  return record;
}

}  // namespace poslab
