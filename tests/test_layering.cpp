// The layers of src/ point one way: config/ is below encodings/ and tasks/ (issue 14). The
// loader learns what `encoding.type` and `task.name` may name from a ConfigChoices it is given
// (config/choices.hpp), so no file of config/ needs a header from another part of poslab. This
// test keeps it so: a new `#include "encodings/..."` in config/ fails here, with its file and line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

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
