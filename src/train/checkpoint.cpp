#include "train/checkpoint.hpp"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "train/run_dir.hpp"

namespace poslab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "poslab-checkpoint-1";

// Parameter names become file names, so they must be usable as one.
void check_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name == "manifest" ||
      name.find('/') != std::string::npos)
    throw CheckpointError("parameter name '" + name + "' cannot be a checkpoint file name");
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void check_allocated(const ParameterArena<float>& arena) {
  if (arena.count() > 0 && arena.values() == nullptr)
    throw std::logic_error("checkpoint: the parameter arena is not allocated yet");
}

}  // namespace

void save_checkpoint(const fs::path& run_dir, const ParameterArena<float>& arena) {
  check_allocated(arena);
  const fs::path final_dir = run_dir / "checkpoint";
  const fs::path partial_dir = run_dir / "checkpoint.partial";
  const fs::path old_dir = run_dir / "checkpoint.old";
  fs::remove_all(partial_dir);  // left over from an interrupted save
  fs::create_directories(partial_dir);

  nlohmann::json parameters = nlohmann::json::array();
  std::map<std::string, int> seen;
  for (const ParamSlot& slot : arena.slots()) {
    check_file_name(slot.name);
    if (seen[slot.name]++) throw CheckpointError("two parameters are named '" + slot.name + "'");
    // A view of the arena's values with the declared shape; dump_npy writes it row-major.
    auto values = xt::adapt(arena.values() + slot.offset, slot.size, xt::no_ownership(), slot.shape);
    const std::string file = slot.name + ".npy";
    write_file_atomically(partial_dir / file, xt::dump_npy(values));
    parameters.push_back({{"name", slot.name}, {"shape", slot.shape}, {"file", file}});
  }
  const nlohmann::json manifest = {{"format", kFormat},
                                   {"dtype", "float32"},
                                   {"total", arena.count()},
                                   {"parameters", parameters}};
  // The manifest last: a directory with a manifest holds every file it lists.
  write_file_atomically(partial_dir / "manifest.json", manifest.dump(2) + "\n");

  // Swap the new checkpoint in. Between the two renames only checkpoint.old exists;
  // load_checkpoint falls back to it, so a crash at any point leaves a loadable checkpoint.
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  fs::rename(partial_dir, final_dir);
  fs::remove_all(old_dir);
}

bool has_checkpoint(const fs::path& run_dir) {
  return fs::exists(run_dir / "checkpoint" / "manifest.json") ||
         fs::exists(run_dir / "checkpoint.old" / "manifest.json");
}

void load_checkpoint(const fs::path& run_dir, ParameterArena<float>& arena) {
  check_allocated(arena);
  fs::path dir = run_dir / "checkpoint";
  if (!fs::exists(dir / "manifest.json") && fs::exists(run_dir / "checkpoint.old" / "manifest.json"))
    dir = run_dir / "checkpoint.old";  // a save was interrupted between its two renames
  const std::string where = "checkpoint " + dir.string();
  if (!fs::exists(dir / "manifest.json")) throw CheckpointError(where + ": no manifest.json");

  nlohmann::json manifest;
  try {
    std::ifstream in(dir / "manifest.json");
    manifest = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + ": unreadable manifest.json: " + e.what());
  }
  if (manifest.value("format", "") != kFormat || manifest.value("dtype", "") != "float32")
    throw CheckpointError(where + ": not a " + kFormat + " float32 checkpoint");

  // name -> (shape, file) as saved.
  std::map<std::string, std::pair<std::vector<std::size_t>, std::string>> saved;
  for (const auto& p : manifest.at("parameters"))
    saved[p.at("name").get<std::string>()] = {p.at("shape").get<std::vector<std::size_t>>(),
                                              p.at("file").get<std::string>()};

  // First compare names and shapes, then read every file, and only then touch the arena:
  // a mismatch must not leave the model half-loaded.
  for (const ParamSlot& slot : arena.slots()) {
    auto it = saved.find(slot.name);
    if (it == saved.end())
      throw CheckpointError(where + ": has no parameter '" + slot.name + "' (the model has it, " +
                            shape_text(slot.shape) + ")");
    if (it->second.first != slot.shape)
      throw CheckpointError(where + ": parameter '" + slot.name + "' has shape " +
                            shape_text(it->second.first) + " in the checkpoint but " +
                            shape_text(slot.shape) + " in the model");
  }
  if (saved.size() != arena.slots().size()) {
    std::map<std::string, int> declared;
    for (const ParamSlot& slot : arena.slots()) declared[slot.name] = 1;
    for (const auto& [name, entry] : saved)
      if (!declared.count(name))
        throw CheckpointError(where + ": parameter '" + name + "' " + shape_text(entry.first) +
                              " is not in the model");
  }

  std::vector<xt::xarray<float>> loaded;
  for (const ParamSlot& slot : arena.slots()) {
    const fs::path file = dir / saved.at(slot.name).second;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CheckpointError(where + ": parameter '" + slot.name + "': cannot open " + file.string());
    try {
      loaded.push_back(xt::load_npy<float>(in));
    } catch (const std::exception& e) {
      throw CheckpointError(where + ": parameter '" + slot.name + "': " + e.what());
    }
    if (!in)
      throw CheckpointError(where + ": parameter '" + slot.name + "': " + file.string() +
                            " is truncated");
    const auto& shape = loaded.back().shape();
    if (std::vector<std::size_t>(shape.begin(), shape.end()) != slot.shape)
      throw CheckpointError(where + ": parameter '" + slot.name + "': the file has shape " +
                            shape_text({shape.begin(), shape.end()}) + ", the manifest " +
                            shape_text(slot.shape));
  }

  // Iterating an xarray visits its elements in row-major order whatever the file's layout.
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const ParamSlot& slot = arena.slots()[i];
    std::copy(loaded[i].begin(), loaded[i].end(), arena.values() + slot.offset);
  }
}

}  // namespace poslab
