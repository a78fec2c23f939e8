#include "train/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "core/sha256.hpp"
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

// A parameter's .npy file is untrusted input: its header is read and checked against the shape
// the model expects and against the file's size before xtensor allocates what the header claims
// (a 16 KB file whose header says 2 GiB made load_npy allocate 4 GiB). Throws a message without
// the checkpoint's name; the caller adds it.
void check_npy_file(const fs::path& file, const std::vector<std::size_t>& expected_shape) {
  std::error_code ec;
  const std::uintmax_t file_size = fs::file_size(file, ec);
  if (ec) throw std::runtime_error("cannot read " + file.string() + ": " + ec.message());
  std::ifstream in(file, std::ios::binary);
  char magic[8];
  if (!in.read(magic, sizeof magic) || std::string(magic, 6) != "\x93NUMPY")
    throw std::runtime_error(file.string() + " is not a .npy file");
  const int major = static_cast<unsigned char>(magic[6]);
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (major < 1 || major > 3) throw std::runtime_error(file.string() + ": unsupported .npy version");
  unsigned char length_le[4] = {0, 0, 0, 0};
  if (!in.read(reinterpret_cast<char*>(length_le), std::streamsize(length_bytes)))
    throw std::runtime_error(file.string() + " is truncated in its header");
  const std::size_t header_length = std::size_t(length_le[0]) | std::size_t(length_le[1]) << 8 |
                                    std::size_t(length_le[2]) << 16 | std::size_t(length_le[3]) << 24;
  if (header_length > 65536)
    throw std::runtime_error(file.string() + ": a .npy header of " +
                             std::to_string(header_length) + " bytes (at most 65536)");
  std::string header(header_length, '\0');
  if (!in.read(header.data(), std::streamsize(header_length)))
    throw std::runtime_error(file.string() + " is truncated in its header");
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  try {
    xt::detail::parse_header(header, descr, &fortran_order, shape);
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": unreadable .npy header: " + e.what());
  }
  if (descr != "<f4")
    throw std::runtime_error(file.string() + " holds '" + descr + "', not float32 ('<f4')");
  if (shape != expected_shape)
    throw std::runtime_error("the file has shape " + shape_text(shape) + ", the manifest " +
                             shape_text(expected_shape));
  std::uintmax_t values = 1;
  for (std::size_t n : shape) values *= n;  // equal to the model's shape: no overflow
  const std::uintmax_t expected_size = 8 + length_bytes + header_length + 4 * values;
  if (file_size != expected_size)
    throw std::runtime_error(file.string() + " is " + std::to_string(file_size) +
                             " bytes; its header and shape " + shape_text(shape) + " make " +
                             std::to_string(expected_size) +
                             (file_size < expected_size ? " (truncated)" : ""));
}

void check_allocated(const ParameterArena<float>& arena) {
  if (arena.count() > 0 && arena.values() == nullptr)
    throw std::logic_error("checkpoint: the parameter arena is not allocated yet");
}

// Writes one float32 array per parameter of `arena`, read from `data` ([arena.count()]: the
// values, or one of Adam's moments), into `final_dir`, which appears all at once.
void save_arrays(const fs::path& final_dir, const ParameterArena<float>& arena, const float* data) {
  check_allocated(arena);
  const fs::path partial_dir = begin_directory(final_dir);

  nlohmann::json parameters = nlohmann::json::array();
  std::map<std::string, int> seen;
  for (const ParamSlot& slot : arena.slots()) {
    check_file_name(slot.name);
    if (seen[slot.name]++) throw CheckpointError("two parameters are named '" + slot.name + "'");
    // A view of the arena's values with the declared shape; dump_npy writes it row-major.
    auto values = xt::adapt(data + slot.offset, slot.size, xt::no_ownership(), slot.shape);
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

  publish_directory(final_dir);  // a crash at any point leaves a loadable checkpoint
}

// Reads the arrays save_arrays wrote in `final_dir` into `into` ([arena.count()]), checked
// against the arena's names and shapes first; `what` names the directory in messages.
void load_arrays(const fs::path& final_dir, const ParameterArena<float>& arena, float* into,
                 const std::string& what) {
  check_allocated(arena);
  const fs::path dir = complete_directory(final_dir, "manifest.json").value_or(final_dir);
  const std::string where = what + " " + dir.string();
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
  try {
    for (const auto& p : manifest.at("parameters")) {
      const std::string file = p.at("file").get<std::string>();
      // A file of the checkpoint directory itself, never a path out of it.
      if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos)
        throw CheckpointError("manifest.json names the file '" + file + "'");
      saved[p.at("name").get<std::string>()] = {p.at("shape").get<std::vector<std::size_t>>(),
                                                file};
    }
  } catch (const std::exception& e) {
    throw CheckpointError(where + ": unusable manifest.json: " + e.what());
  }

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
      check_npy_file(file, slot.shape);  // shape, type and size: what load_npy reads is right
      loaded.push_back(xt::load_npy<float>(in));
    } catch (const std::exception& e) {
      throw CheckpointError(where + ": parameter '" + slot.name + "': " + e.what());
    }
    // A NaN or an infinity would evaluate to a NaN loss (or train from a broken start) silently.
    const auto bad = std::find_if(loaded.back().begin(), loaded.back().end(),
                                  [](float x) { return !std::isfinite(x); });
    if (bad != loaded.back().end())
      throw CheckpointError(where + ": parameter '" + slot.name + "' holds a non-finite value (" +
                            std::to_string(*bad) + " at flat index " +
                            std::to_string(bad - loaded.back().begin()) + ") in " +
                            file.string());
  }

  // Iterating an xarray visits its elements in row-major order whatever the file's layout.
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const ParamSlot& slot = arena.slots()[i];
    std::copy(loaded[i].begin(), loaded[i].end(), into + slot.offset);
  }
}

}  // namespace

void save_checkpoint(const fs::path& run_dir, const ParameterArena<float>& arena) {
  save_arrays(run_dir / "checkpoint", arena, arena.values());
}

bool has_checkpoint(const fs::path& run_dir) {
  return complete_directory(run_dir / "checkpoint", "manifest.json").has_value();
}

void require_checkpoint(const fs::path& run_dir, const std::string& shown) {
  if (!has_checkpoint(run_dir))
    throw std::runtime_error(shown + " has no checkpoint/ (is the run finished? `poslab train` "
                                     "saves it at the end)");
}

void load_checkpoint(const fs::path& run_dir, ParameterArena<float>& arena) {
  load_arrays(run_dir / "checkpoint", arena, arena.values(), "checkpoint");
}

void save_optimizer_state(const fs::path& run_dir, const ParameterArena<float>& arena) {
  save_arrays(run_dir / "optimizer" / "adam_m", arena, arena.adam_m());
  save_arrays(run_dir / "optimizer" / "adam_v", arena, arena.adam_v());
}

bool has_optimizer_state(const fs::path& run_dir) {
  return complete_directory(run_dir / "optimizer" / "adam_m", "manifest.json").has_value() &&
         complete_directory(run_dir / "optimizer" / "adam_v", "manifest.json").has_value();
}

void load_optimizer_state(const fs::path& run_dir, ParameterArena<float>& arena) {
  // Both moments are read and checked before either reaches the arena.
  std::vector<float> m(arena.count()), v(arena.count());
  load_arrays(run_dir / "optimizer" / "adam_m", arena, m.data(), "Adam's first moments");
  load_arrays(run_dir / "optimizer" / "adam_v", arena, v.data(), "Adam's second moments");
  std::copy(m.begin(), m.end(), arena.adam_m());
  std::copy(v.begin(), v.end(), arena.adam_v());
}

std::string checkpoint_sha256(const fs::path& run_dir) {
  const fs::path dir = complete_directory(run_dir / "checkpoint", "manifest.json")
                           .value_or(run_dir / "checkpoint");
  auto bytes_of = [](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CheckpointError("cannot read " + file.string());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string manifest_text = bytes_of(dir / "manifest.json");
  Sha256 hash;
  hash.update(manifest_text);
  try {
    const nlohmann::json manifest = nlohmann::json::parse(manifest_text);  // (a named object:
    for (const auto& p : manifest.at("parameters"))  // a range over a temporary's member dangles)
      hash.update(bytes_of(dir / p.at("file").get<std::string>()));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("checkpoint " + dir.string() + ": unusable manifest.json: " + e.what());
  }
  return hash.hex();
}

}  // namespace poslab
