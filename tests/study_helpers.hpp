// Helpers for the tests of studies (test_runner, test_slurm_export): a tiny corpus and model, and
// a two-run study with its layout, to run or export.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "study/runner.hpp"
#include "study/study.hpp"

#ifndef POSLAB_BINARY
#error "POSLAB_BINARY (the poslab executable under test) must be defined by the build"
#endif

namespace poslab::testing {

namespace fs = std::filesystem;

inline void write_file(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A few kilobytes of text to train on.
inline fs::path write_corpus(const fs::path& dir) {
  std::string text;
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"};
  for (int i = 0; i < 1500; ++i) text += std::string(words[(i * 7 + i / 3) % 9]) + " ";
  write_file(dir / "corpus.txt", text);
  return dir / "corpus.txt";
}

// The tiny model of every end-to-end test: a training run takes a fraction of a second.
inline std::string tiny_base(const fs::path& corpus, int steps = 3) {
  return "[base.model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nd_inner = 32\n"
         "[base.data]\npath = \"" + corpus.string() + "\"\n"
         "[base.train]\nseq_len = 8\nbatch_size = 2\nsteps = " + std::to_string(steps) + "\n"
         "[base.eval]\nbatches = 1\n";
}


// A study in `dir` with two runs (seeds 1 and 2), results under dir/results.
struct TwoRunStudy {
  fs::path file;
  poslab::Study study;
  std::vector<poslab::PlannedRun> runs;
  poslab::StudyLayout layout;

  explicit TwoRunStudy(const fs::path& dir, const std::string& extra = "") {
    file = dir / "two.toml";
    write_file(file, "[study]\nname = \"two\"\n" + tiny_base(write_corpus(dir)) +
                         "[sweep]\n\"train.seed\" = [1, 2]\n" + extra);
    study = poslab::load_study(file.string());
    runs = poslab::expand_study(study);
    layout.root = dir / "results";
    for (auto& run : runs) run.config.out_dir = layout.run_dir(run).string();
  }

  poslab::RunStudyOptions options() const {
    poslab::RunStudyOptions o;
    o.study_path = file.string();
    o.out = layout.root.string();
    o.poslab = POSLAB_BINARY;
    return o;
  }

  // Makes run i look finished, as `poslab train` would leave it.
  void fake_finished(std::size_t i, const nlohmann::json& eval) const {
    const fs::path dir = layout.run_dir(runs[i]);
    write_file(dir / "config.toml", poslab::config_to_toml(runs[i].config));
    write_file(dir / "eval.json", eval.dump());
  }
};

}  // namespace poslab::testing
