// The layers of src/ point one way: config/ is below encodings/ and tasks/ (issue 14). The
// loader learns what `encoding.type` and `task.name` may name from a ConfigChoices it is given
// (config/choices.hpp), so no file of config/ needs a header from another part of poslab. This
// test keeps it so: a new `#include "encodings/..."` in config/ fails here, with its file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

TEST_CASE("config/ includes no poslab header outside config/", "[layering]") {
  const std::filesystem::path config_dir = std::filesystem::path(POSLAB_SOURCE_DIR) / "src/config";
  REQUIRE(std::filesystem::is_directory(config_dir));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(config_dir)) {
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      // A project header is included with quotes; <...> is the standard library or toml++.
      const auto quote = line.find("#include \"");
      if (quote == std::string::npos) continue;
      INFO(entry.path().filename().string() << ":" << number << ": " << line);
      CHECK(line.compare(quote + 10, 7, "config/") == 0);
    }
  }
  CHECK(files > 0);
}

// The layers above config/ point one way too (issue 47): cli -> {study, bench} -> train -> eval
// -> model, ... An evaluation mode (eval/) is tested and run without a run directory or the
// command line, so eval/ includes nothing of train/, study/, bench/ or cli/; train/ nothing of
// study/, bench/ or cli/; bench/ (the measurements of `poslab bench`, which time training steps
// and evaluations) nothing of study/ or cli/; and no layer below cli/ includes cli/, none below
// bench/ (nor study/, its neighbour) includes bench/.
namespace {
// Every `#include "DIR/..."` in src/FOLDER naming one of `forbidden`, as "FILE:LINE: text".
std::vector<std::string> includes_of(const std::string& folder,
                                     const std::vector<std::string>& forbidden) {
  std::vector<std::string> found;
  const std::filesystem::path dir = std::filesystem::path(POSLAB_SOURCE_DIR) / "src" / folder;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const auto quote = line.find("#include \"");
      if (quote == std::string::npos) continue;
      for (const std::string& f : forbidden)
        if (line.compare(quote + 10, f.size() + 1, f + "/") == 0)
          found.push_back(entry.path().filename().string() + ":" + std::to_string(number) + ": " +
                          line);
    }
  }
  return found;
}
}  // namespace

TEST_CASE("eval/, train/ and bench/ include nothing above them", "[layering]") {
  CHECK(includes_of("eval", {"train", "study", "bench", "cli"}) == std::vector<std::string>{});
  CHECK(includes_of("train", {"study", "bench", "cli"}) == std::vector<std::string>{});
  CHECK(includes_of("bench", {"study", "cli"}) == std::vector<std::string>{});
  for (const char* below : {"study", "bench", "train", "eval", "model", "tasks", "data",
                            "encodings", "nn", "core"})
    CHECK(includes_of(below, {"cli"}) == std::vector<std::string>{});
  for (const char* below : {"study", "train", "eval", "model", "tasks", "data", "encodings", "nn",
                            "core"})
    CHECK(includes_of(below, {"bench"}) == std::vector<std::string>{});
}
