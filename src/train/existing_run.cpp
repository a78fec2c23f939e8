#include "train/existing_run.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "config/load.hpp"
#include "core/provenance.hpp"
#include "train/registered_choices.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"
#include "train/training_state.hpp"

namespace poslab {

bool claim_run_directory(const Config& cfg, ExistingRun existing, bool locked,
                         int wait_for_trainer_seconds) {
  namespace fs = std::filesystem;
  const fs::path dir(cfg.out_dir);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) return false;
  // --wait-for-trainer: another process that took the run since any earlier look is waited
  // for here too, and its outcome is this call's.
  if (!locked && existing == ExistingRun::resume && wait_for_trainer_seconds > 0 &&
      wait_for_other_trainer(dir, wait_for_trainer_seconds, std::cout))
    return outcome_of_other_trainer(cfg) == 0;
  if (!locked && DirectoryLock::is_held(dir))
    throw std::runtime_error(cfg.out_dir + " is being written by another poslab process (it "
                             "holds the directory's lock); not training it twice");
  // Another machine's trainer is seen by its claim (its flock may not reach us over NFS).
  if (const std::optional<ClaimInfo> claim = read_claim(dir); claim && !locked) {
    if (claim_is_live(*claim))
      throw std::runtime_error(cfg.out_dir + " is being trained by " + claim->describe() +
                               " (its claim.json); not training it twice");
    std::cout << "poslab train: warning: " << cfg.out_dir << " has a stale claim ("
              << claim->describe() << "): its trainer is gone\n";
  }
  std::string held;
  for (const char* name : {"eval.json", "metrics.csv", "config.toml", "checkpoint"})
    if (fs::exists(fs::symlink_status(dir / name, ec)))
      held += std::string(held.empty() ? "" : ", ") + name;
  if (held.empty()) return false;  // an empty directory (or one with unrelated files) is fine
  const bool finished = fs::exists(dir / "eval.json");
  const std::string what = std::string(finished ? "a finished" : "an unfinished") + " run (" +
                           held + ")";
  switch (existing) {
    case ExistingRun::refuse:
      throw std::runtime_error(cfg.out_dir + " already holds " + what +
                               "; choose another --out, add --resume to finish (or skip) the "
                               "same experiment, or --force to move the old run aside");
    case ExistingRun::force: {
      if (locked) return false;  // moved aside before the lock was taken
      std::string stamp = utc_now();
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      const fs::path aside = dir.string() + ".replaced-" + stamp;
      fs::rename(dir, aside);
      std::cout << "poslab train: moved the old run aside to " << aside.string() << "\n";
      return false;
    }
    case ExistingRun::resume: {
      std::string difference = "it has no config.toml";
      if (fs::exists(dir / "config.toml")) {
        try {
          difference = experiment_difference(
              load_config((dir / "config.toml").string(), registered_choices()), cfg);
        } catch (const std::exception& e) {
          difference = std::string("its config.toml cannot be read: ") + e.what();
        }
      }
      if (!difference.empty())
        throw std::runtime_error(cfg.out_dir + " holds " + what + " of another experiment (" +
                                 difference + "); --resume continues only the same config: "
                                 "choose another --out, or --force to move it aside");
      if (finished) {
        std::cout << "poslab train: " << cfg.out_dir
                  << " is finished with this config (eval.json); nothing to do\n";
        return true;
      }
      if (locked && has_training_state(dir)) {  // continued from its saved state
        std::cout << "poslab train: " << cfg.out_dir
                  << " holds an unfinished run of this config with a saved training state; "
                     "continuing it\n";
      } else if (locked) {  // an unfinished run of this experiment: trained again from step 0
        for (const fs::directory_entry& entry : fs::directory_iterator(dir)) fs::remove_all(entry);
        std::cout << "poslab train: " << cfg.out_dir
                  << " held an unfinished run of this config without a saved training state; "
                     "training it again from step 0\n";
      }
      return false;
    }
  }
  return false;
}

int outcome_of_other_trainer(const Config& cfg) {
  if (claim_run_directory(cfg, ExistingRun::resume)) return 0;
  throw std::runtime_error(cfg.out_dir + ": the process that was training it ended before the "
                           "run finished (no eval.json); not training it here: export the study "
                           "again and submit what is unfinished");
}

}  // namespace poslab
