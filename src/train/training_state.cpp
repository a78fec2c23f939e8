#include "train/training_state.hpp"

#include <bit>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/run_dir.hpp"

namespace poslab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFormat = "poslab-training-state-1";
static_assert(std::endian::native == std::endian::little, "the .f32 files are little-endian");

fs::path state_dir(const fs::path& run_dir) { return run_dir / "resume"; }

std::string_view as_bytes(const float* data, std::size_t n) {
  return {reinterpret_cast<const char*>(data), n * sizeof(float)};
}

// The whole of `file`, which must hold exactly `n` floats.
std::vector<float> read_floats(const fs::path& file, std::size_t n) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw TrainingStateError("cannot read " + file.string() + ": " + ec.message());
  if (size != n * sizeof(float))
    throw TrainingStateError(file.string() + " is " + std::to_string(size) + " bytes; the model "
                             "needs " + std::to_string(n) + " float32 values (" +
                             std::to_string(n * sizeof(float)) + " bytes)");
  std::vector<float> values(n);
  std::ifstream in(file, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(values.data()), std::streamsize(size)))
    throw TrainingStateError("cannot read " + file.string());
  return values;
}

}  // namespace

void save_training_state(const fs::path& run_dir, const TransformerLM<float>& model,
                         const TrainingProgress& progress) {
  const ParameterArena<float>& arena = model.arena();
  const std::size_t P = arena.count();
  const auto carried = model.carried_state();
  const fs::path partial = begin_directory(state_dir(run_dir));

  std::string arena_bytes;  // [3, P]: values, m, v
  arena_bytes.reserve(3 * P * sizeof(float));
  for (const float* part : {arena.values(), arena.adam_m(), arena.adam_v()})
    arena_bytes += as_bytes(part, P);
  write_file_atomically(partial / "arena.f32", arena_bytes);
  write_file_atomically(partial / "memory.f32", as_bytes(carried.memory.data(), carried.memory.size()));

  const nlohmann::json state = {
      {"format", kStateFormat},
      {"steps_done", progress.steps_done},
      {"interval_loss_bits", std::bit_cast<std::uint64_t>(progress.interval_loss)},
      {"interval_loss", progress.interval_loss},  // for a reader; the bits are what is restored
      {"interval_steps", progress.interval_steps},
      {"logged_loss_bits", std::bit_cast<std::uint64_t>(progress.logged_loss)},
      {"elapsed_seconds", progress.elapsed_seconds},
      {"threads", progress.threads},
      {"parameters", P},
      {"memory", {{"layers", model.config().n_layers},
                  {"batch", carried.batch},
                  {"rows", carried.rows},
                  {"d_model", model.config().d_model}}},
      {"position_rng", carried.position_rng}};
  // state.json last: a directory with it holds every file it describes.
  write_file_atomically(partial / "state.json", state.dump(2) + "\n");
  publish_directory(state_dir(run_dir));
}

bool has_training_state(const fs::path& run_dir) {
  return complete_directory(state_dir(run_dir), "state.json").has_value();
}

TrainingProgress load_training_state(const fs::path& run_dir, TransformerLM<float>& model) {
  const std::optional<fs::path> dir = complete_directory(state_dir(run_dir), "state.json");
  if (!dir) throw TrainingStateError(state_dir(run_dir).string() + ": no saved training state");
  const std::string where = "training state " + dir->string();
  ParameterArena<float>& arena = model.arena();
  const std::size_t P = arena.count();

  TrainingProgress progress;
  TransformerLM<float>::CarriedState carried;
  std::vector<float> arena_values;
  try {
    std::ifstream in(*dir / "state.json");
    const nlohmann::json state = nlohmann::json::parse(in);
    if (state.value("format", "") != kStateFormat)
      throw TrainingStateError("not a " + std::string(kStateFormat) + " state");
    if (state.at("parameters").get<std::size_t>() != P)
      throw TrainingStateError("it holds " + std::to_string(state.at("parameters").get<std::size_t>()) +
                               " parameters, the model has " + std::to_string(P));
    const nlohmann::json& memory = state.at("memory");
    if (memory.at("layers").get<int>() != model.config().n_layers ||
        memory.at("d_model").get<int>() != model.config().d_model)
      throw TrainingStateError("its memory is for " + memory.at("layers").dump() + " layers of " +
                               memory.at("d_model").dump() + ", not the model's");
    progress.steps_done = state.at("steps_done").get<int>();
    progress.interval_loss = std::bit_cast<double>(state.at("interval_loss_bits").get<std::uint64_t>());
    progress.interval_steps = state.at("interval_steps").get<int>();
    progress.logged_loss = std::bit_cast<double>(state.at("logged_loss_bits").get<std::uint64_t>());
    progress.elapsed_seconds = state.at("elapsed_seconds").get<double>();
    progress.threads = state.at("threads").get<int>();
    carried.batch = memory.at("batch").get<int>();
    carried.rows = memory.at("rows").get<int>();
    carried.position_rng = state.at("position_rng").get<std::string>();
    if (carried.batch < 0 || carried.rows < 0 || progress.steps_done < 0)
      throw TrainingStateError("negative sizes or steps");
    carried.memory = read_floats(*dir / "memory.f32", std::size_t(model.config().n_layers) *
                                                          carried.batch * carried.rows *
                                                          model.config().d_model);
    arena_values = read_floats(*dir / "arena.f32", 3 * P);
  } catch (const nlohmann::json::exception& e) {
    throw TrainingStateError(where + ": unusable state.json: " + e.what());
  } catch (const TrainingStateError& e) {
    throw TrainingStateError(where + ": " + e.what());
  }
  try {
    model.restore_carried_state(carried);  // checks the memory against the model first
  } catch (const std::invalid_argument& e) {
    throw TrainingStateError(where + ": " + e.what());
  }
  std::copy_n(arena_values.data(), P, arena.values());
  std::copy_n(arena_values.data() + P, P, arena.adam_m());
  std::copy_n(arena_values.data() + 2 * P, P, arena.adam_v());
  return progress;
}

int saved_steps_done(const fs::path& run_dir) {
  const std::optional<fs::path> dir = complete_directory(state_dir(run_dir), "state.json");
  if (!dir) throw TrainingStateError(state_dir(run_dir).string() + ": no saved training state");
  try {
    std::ifstream in(*dir / "state.json");
    return nlohmann::json::parse(in).at("steps_done").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw TrainingStateError("training state " + dir->string() + ": unusable state.json: " +
                             e.what());
  }
}

void remove_training_state(const fs::path& run_dir) {
  for (const char* suffix : {"", ".partial", ".old"})
    fs::remove_all(state_dir(run_dir).string() + suffix);
}

void drop_metrics_after(const fs::path& metrics_csv, int steps_done) {
  if (!fs::exists(metrics_csv)) return;
  std::ifstream in(metrics_csv);
  std::string line, kept;
  for (int number = 1; std::getline(in, line); ++number) {
    // Rows start with their step (training_metrics_columns); the header is kept.
    if (number > 1) {
      long step = 0;
      try {
        step = std::stol(line.substr(0, line.find(',')));
      } catch (const std::exception&) {
        throw TrainingStateError(metrics_csv.string() + ", line " + std::to_string(number) +
                                 ": a row that does not start with its step");
      }
      if (step > steps_done) continue;
    }
    kept += line + "\n";
  }
  write_file_atomically(metrics_csv, kept);
}

}  // namespace poslab
