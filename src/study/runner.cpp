// `poslab run` (runner.hpp): plan, check, then run a study's runs as child processes.
//
// The parts, in the order run_study uses them:
//   1. the plan: every run resolved (study.cpp), given its directory, and its status read from
//      the disk (run_status);
//   2. --dry-run and --export, which only describe the plan;
//   3. summary.csv and loss_by_position.csv, rebuilt from every finished run's eval.json (and
//      passkey_curve.csv from the runs' own curve files);
//   4. the `run` subcommand's command line and help.
// The scheduler that runs the children is in scheduler.hpp, the Slurm export in slurm_export.hpp.
#include "study/runner.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "core/provenance.hpp"
#include "study/scheduler.hpp"
#include "study/slurm_export.hpp"
#include "train/checkpoint.hpp"
#include "train/passkey_curve.hpp"
#include "train/registered_choices.hpp"
#include "train/run_claim.hpp"
#include "train/run_dir.hpp"

extern char** environ;

namespace poslab {

namespace fs = std::filesystem;

namespace {

std::string read_text_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------------
// 1. The plan: where each run goes and how far it got
// ---------------------------------------------------------------------------------------------


// The executable the children run: --poslab, or this very binary.
std::string child_executable(const RunStudyOptions& options) {
  return options.poslab.empty() ? "/proc/self/exe" : options.poslab;
}

// The same, as a path that means something outside this process (for exported commands).
std::string exported_executable(const RunStudyOptions& options) {
  if (!options.poslab.empty()) return fs::absolute(options.poslab).string();
  std::error_code ec;
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string deleted = " (deleted)";  // the binary was rebuilt since it started
  if (self.size() > deleted.size() && self.ends_with(deleted)) self.resize(self.size() - deleted.size());
  return ec ? "poslab" : self;
}

// ---------------------------------------------------------------------------------------------
// 2. --dry-run and --export
// ---------------------------------------------------------------------------------------------

// The status of every run, one line each, and the counts. For an incomplete run (interrupted
// or failed) the last line of its log says which; `how` ends the last line.
void print_status(const Study& study, const std::vector<PlannedRun>& runs,
                  const std::vector<RunStatus>& status, const std::vector<std::string>& why,
                  const StudyLayout& layout, const std::string& how, std::ostream& out) {
  out << "study '" << study.name << "' (" << study.source << "): " << runs.size()
      << " runs, results in " << layout.root.string() << "\n";
  std::size_t width = 0;
  for (const PlannedRun& run : runs) width = std::max(width, run.id.size());
  std::map<RunStatus, std::size_t> counts;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ++counts[status[i]];
    std::string label = to_string(status[i]);
    out << "  " << label << std::string(11 - label.size(), ' ') << runs[i].id
        << std::string(width - runs[i].id.size() + 2, ' ') << "runs/" << runs[i].dir_name << "\n";
    if (!runs[i].parent_id.empty()) out << "             from " << runs[i].parent_id << "\n";
    if (status[i] == RunStatus::stale) out << "             " << why[i] << "\n";
    if (status[i] == RunStatus::running)
      if (const std::optional<ClaimInfo> claim = read_claim(layout.run_dir(runs[i])))
        out << "             by " << claim->describe() << "\n";
    if (status[i] == RunStatus::incomplete && fs::exists(layout.log_file(runs[i])))
      if (const std::string last = last_line_of(layout.log_file(runs[i])); !last.empty())
        out << "             log: " << last << "\n";
  }
  out << counts[RunStatus::done] << " done, " << counts[RunStatus::pending] << " pending";
  if (auto n = counts[RunStatus::running])
    out << ", " << n << " running (a live `poslab train` holds them; never touched)";
  if (auto n = counts[RunStatus::incomplete])
    out << ", " << n << " incomplete (interrupted or failed: `poslab run` continues them)";
  if (auto n = counts[RunStatus::stale])
    out << ", " << n << " stale (made with another config: delete them or use --out)";
  out << ". " << how << "\n";
}

// A new directory for one Slurm submission: results/NAME/slurm/<UTC time>[-N].
fs::path new_submission_directory(const StudyLayout& layout) {
  std::string stamp = utc_now();  // 2026-11-23T21:37:29Z
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  const fs::path base = fs::absolute(layout.root / "slurm" / stamp);
  fs::path dir = base;
  for (int n = 2; fs::exists(dir); ++n) dir = base.string() + "-" + std::to_string(n);
  return dir;
}

// [slurm] of the study, with what the command line sets on top.
SlurmOptions slurm_options(const Study& study, const RunStudyOptions& options) {
  SlurmOptions o = study.slurm;
  const SlurmOptions& cli = options.slurm;
  for (auto [into, from] : {std::pair{&o.partition, &cli.partition}, {&o.account, &cli.account},
                            {&o.time, &cli.time}, {&o.mem, &cli.mem}})
    if (!from->empty()) *into = *from;
  for (auto [into, from] : {std::pair{&o.cpus_per_task, &cli.cpus_per_task},
                            {&o.array_throttle, &cli.array_throttle},
                            {&o.max_array_size, &cli.max_array_size}})
    if (*from > 0) *into = *from;
  o.extra.insert(o.extra.end(), cli.extra.begin(), cli.extra.end());
  return o;
}

// The stage of each run to export: 0 if it starts from scratch or from a run that is done;
// else one more than its parent's, which must be exported with it. Runs are ordered by stage
// (parents before children).
std::vector<int> export_stages(const std::vector<PlannedRun>& runs,
                               const std::vector<RunStatus>& status,
                               std::vector<std::size_t>& pending) {
  std::vector<int> stage_of(runs.size(), -1);
  for (std::size_t i : pending) stage_of[i] = 0;
  const std::vector<int> exported = stage_of;  // >= 0: exported
  // Depth by walking up to the first parent that is done (stages are at most as many as runs).
  for (std::size_t i : pending) {
    int depth = 0;
    for (std::size_t at = i; runs[at].parent != PlannedRun::kNoParent; at = runs[at].parent) {
      const std::size_t parent = runs[at].parent;
      if (status[parent] == RunStatus::done) break;
      if (exported[parent] < 0)
        throw std::runtime_error(
            "run '" + runs[at].id + "' starts from '" + runs[parent].id + "', which is " +
            to_string(status[parent]) + " and not exported with it (--only): export both, or "
            "finish the parent first");
      ++depth;
    }
    stage_of[i] = depth;
  }
  std::stable_sort(pending.begin(), pending.end(),
                   [&](std::size_t a, std::size_t b) { return stage_of[a] < stage_of[b]; });
  std::vector<int> stages;
  for (std::size_t i : pending) stages.push_back(stage_of[i]);
  return stages;
}

int export_runs(const Study& study, const std::vector<PlannedRun>& runs,
                const std::vector<RunStatus>& status, const std::vector<std::size_t>& chosen,
                const StudyLayout& layout, const RunStudyOptions& options, std::ostream& out) {
  std::vector<std::size_t> pending;
  for (std::size_t i : chosen)
    if (status[i] != RunStatus::done) pending.push_back(i);
  if (pending.empty()) {
    std::cerr << "poslab run: every run of '" << study.name << "' is done; nothing to export\n";
    return 0;
  }
  // Before anything is written: a child whose parent is neither done nor exported is refused.
  const std::vector<int> stages = export_stages(runs, status, pending);
  if (options.export_format == "slurm") check_slurm_results_path(layout.root);
  fs::create_directories(layout.root / "runs");  // where the commands write their logs
  const std::string poslab = exported_executable(options);
  if (options.export_format == "slurm") {
    // Pinned: the configs are copied into the submission's own directory with the commands,
    // so that a later export (say with --set) cannot change what a queued task trains.
    SlurmSubmission submission;
    submission.study_name = study.name;
    submission.directory = new_submission_directory(layout);
    submission.header = fs::absolute(layout.root / "slurm" / "header.sh");
    for (std::size_t i : pending) {
      const fs::path config = submission.directory / "configs" / (runs[i].dir_name + ".toml");
      fs::create_directories(config.parent_path());
      write_file_atomically(config, config_to_toml(runs[i].config));
      submission.commands.push_back(
          export_command(runs[i], layout, poslab, config, options.threads));
    }
    submission.stages = stages;
    submission.options = slurm_options(study, options);
    if (submission.options.max_array_size > 0) {
      submission.tasks_per_array = submission.options.max_array_size;
    } else if (const int cluster = cluster_max_array_size(); cluster > 0) {
      submission.tasks_per_array = cluster;
      out << "MaxArraySize of this cluster (scontrol show config): " << cluster << "\n";
    } else {
      out << "no `scontrol show config` here: arrays of at most 1001 tasks (Slurm's default "
             "MaxArraySize; set --max-array-size for your cluster)\n";
    }
    write_slurm_submission(submission, out);
    return 0;
  }
  std::vector<std::string> lines;
  for (std::size_t i : pending) {
    write_config_file(runs[i], layout);  // the commands refer to them
    lines.push_back(export_command(runs[i], layout, poslab, {}, options.threads));
  }
  const std::size_t count = lines.size();
  std::string commands;
  for (const std::string& line : lines) commands += line + "\n";
  write_file_atomically(layout.commands(), commands);
  out << commands;
  std::cerr << "poslab run: " << count << (count == 1 ? " command" : " commands") << " (also in "
            << layout.commands().string() << "); their configs are in "
            << (layout.root / "configs").string() << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------------
// 3. The summary tables
// ---------------------------------------------------------------------------------------------

using Cell = MetricsLog::Cell;

// A JSON value as a CSV cell: numbers exactly, text quoted if needed, missing/null empty.
Cell json_cell(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return Cell("");
  const nlohmann::json& v = object[key];
  if (v.is_number_integer()) return Cell(v.get<std::int64_t>());
  if (v.is_number()) return Cell(v.get<double>());
  if (v.is_string()) return Cell(v.get<std::string>());
  if (v.is_boolean()) return Cell(v.get<bool>() ? "true" : "false");
  return Cell("");
}

std::string csv_line(const std::vector<Cell>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + cells[i].text;
  return line + "\n";
}

// The evaluation settings of an eval.json: its "evaluations" array, or, from a `poslab train`
// that writes only one evaluation, the top-level fields as one "main" setting.
std::vector<nlohmann::json> evaluations_of(const nlohmann::json& eval) {
  if (eval.contains("evaluations") && eval["evaluations"].is_array())
    return std::vector<nlohmann::json>(eval["evaluations"].begin(), eval["evaluations"].end());
  nlohmann::json main = eval;
  if (!main.contains("kind")) main["kind"] = "main";
  return {main};
}

// The columns of summary.csv after the run's name, axes and setting: first what one evaluation
// setting measured (exact_match_ci_* is Wilson's 95% interval over its `instances`, the sampling
// error of this one run), then what holds for the whole run (in_distribution_ok: the gate of
// train/run.cpp; commit: the build that trained it, from its provenance).
constexpr const char* kSettingColumns[] = {"split",     "loss",
                                           "accuracy",  "exact_match",
                                           "exact_match_ci_low", "exact_match_ci_high",
                                           "instances", "tokens",
                                           "peak_memory_mb", "tokens_per_second"};
// Passkey rows (kind "passkey", eval/passkey_eval.hpp) add the depth of the key line after the
// setting's columns and the greedy decoding's exact match after the measurements; their
// exact_match / accuracy / loss are the teacher-forced digits'. Empty in every other row.
constexpr const char* kPasskeyDepthColumn = "passkey_depth";
constexpr const char* kPasskeyGreedyColumn = "passkey_greedy_exact_match";
constexpr const char* kRunColumns[] = {"in_distribution_ok", "unigram_loss", "bigram_loss",
                                       "train_loss", "train_tokens_per_second", "train_seconds",
                                       "commit"};
// When the run started and finished (UTC, eval.json's provenance, train/run.cpp), after the
// commit: the committed summary then shows that a protocol committed at some time came before
// every run. Only when some finished run recorded them, so that the summaries of studies whose
// runs predate them keep their columns.
constexpr const char* kRunTimeColumns[] = {"started", "finished"};

// loss_by_copy_distance.csv: after the setting, k, the class (copy, mismatch, no_match), the
// copy bytes' distances [distance_low, distance_high), the scored bytes and their mean loss.
constexpr const char* kCopyDistanceColumns[] = {"min_match", "class", "distance_low",
                                                "distance_high", "tokens", "loss"};

// loss_by_stream_position.csv: after the setting, the streaming mode's cache (sinks, recent,
// positions), the bucket of stream positions [position_low, position_high), the scored bytes
// and their mean loss.
constexpr const char* kStreamSettingColumns[] = {"stream_sinks", "stream_recent",
                                                 "stream_positions"};
constexpr const char* kStreamBucketColumns[] = {"position_low", "position_high", "tokens",
                                                "loss"};

// The lines of one setting's eval.json "copy_distance" (eval/copy_distance.cpp writes it): one per
// bucket of copy bytes, then mismatch and no_match.
std::vector<nlohmann::json> copy_distance_lines(const nlohmann::json& c) {
  std::vector<nlohmann::json> lines;
  const nlohmann::json k = c.value("min_match", nlohmann::json());
  const nlohmann::json& low = c["distance_low"];
  for (std::size_t b = 0; b < low.size(); ++b)
    lines.push_back({{"min_match", k}, {"class", "copy"}, {"distance_low", low[b]},
                     {"distance_high", c["distance_high"][b]}, {"tokens", c["tokens"][b]},
                     {"loss", c["loss"][b]}});
  for (const char* what : {"mismatch", "no_match"})
    lines.push_back({{"min_match", k}, {"class", what},
                     {"tokens", c.value(std::string(what) + "_tokens", nlohmann::json())},
                     {"loss", c.value(std::string(what) + "_loss", nlohmann::json())}});
  return lines;
}

// passkey_curve.csv: the lines of one run's RUN/passkey_curve.csv (train/passkey_curve.hpp:
// step, factor, seq_len, depth, ...), each after `who` (the run's name, axes, variant, parent).
// The run wrote its cells with MetricsLog (numbers, nothing quoted), so a line is copied as it
// is. A header other than PasskeyCurve::columns() is refused, naming the file and line 1: its
// lines would land under the wrong columns.
std::string passkey_curve_lines(const fs::path& file, const std::vector<Cell>& who) {
  std::string header;
  for (const std::string& c : PasskeyCurve::columns()) header += (header.empty() ? "" : ",") + c;
  std::istringstream in(read_text_file(file));
  std::string line, lines;
  if (!std::getline(in, line) || line != header)
    throw std::runtime_error(file.string() + ":1: not a passkey curve: the header is '" + line +
                             "', expected '" + header + "'");
  const std::string prefix = csv_line(who);  // "name,axis,...\n"
  while (std::getline(in, line))
    if (!line.empty()) lines += prefix.substr(0, prefix.size() - 1) + "," + line + "\n";
  return lines;
}

}  // namespace

std::vector<std::string> write_summary(const Study& study, const std::vector<PlannedRun>& runs,
                                       const StudyLayout& layout) {
  std::vector<std::string> commits;  // the distinct builds behind the finished runs
  const bool has_variants = !study.variants.empty();
  // A study with stages (a variant with `from`) says which run each one started from.
  const bool has_stages = std::any_of(runs.begin(), runs.end(), [](const PlannedRun& r) {
    return r.parent != PlannedRun::kNoParent;
  });
  std::vector<Cell> header = {"study", "run"};
  for (const SweepAxis& axis : study.axes) header.push_back(axis.key);
  if (has_variants) header.push_back("variant");
  if (has_stages) header.push_back("parent");
  std::vector<Cell> positions_header = header;
  positions_header.erase(positions_header.begin());  // no study column: one study per file
  // passkey_curve.csv (train.eval_passkey_instances): the run, then the curve file's columns;
  // written only when some finished run has a curve.
  std::vector<Cell> curve_header = positions_header;
  for (const std::string& c : PasskeyCurve::columns()) curve_header.push_back(Cell(c));
  for (const char* c : {"kind", "factor", "seq_len", "mem_len"}) {
    header.push_back(c);
    positions_header.push_back(c);
  }
  // Passkey columns only when some finished run has passkey rows, so that the tables of studies
  // without them keep their columns.
  const bool passkey = std::any_of(runs.begin(), runs.end(), [&](const PlannedRun& run) {
    const fs::path dir = layout.run_dir(run);
    if (!fs::is_directory(dir) || !RunDirectory::open(dir).is_complete()) return false;
    for (const nlohmann::json& e : evaluations_of(RunDirectory::open(dir).read_json("eval.json")))
      if (e.value("kind", "") == "passkey") return true;
    return false;
  });
  // The run times, when some finished run's provenance holds them.
  const bool times = std::any_of(runs.begin(), runs.end(), [&](const PlannedRun& run) {
    const fs::path dir = layout.run_dir(run);
    if (!fs::is_directory(dir) || !RunDirectory::open(dir).is_complete()) return false;
    const nlohmann::json eval = RunDirectory::open(dir).read_json("eval.json");
    return eval.contains("provenance") && eval["provenance"].is_object() &&
           eval["provenance"].contains("started");
  });
  if (passkey) header.push_back(kPasskeyDepthColumn);
  for (const char* c : kSettingColumns) header.push_back(c);
  if (passkey) header.push_back(kPasskeyGreedyColumn);
  for (const char* c : kRunColumns) header.push_back(c);
  if (times)
    for (const char* c : kRunTimeColumns) header.push_back(c);
  // loss_by_copy_distance.csv (eval.copy_distance): the setting, then one line per class
  // and bucket of eval/copy_distance.hpp; written only when some run measured it.
  std::vector<Cell> copies_header = positions_header;
  for (const char* c : kCopyDistanceColumns) copies_header.push_back(c);
  // loss_by_stream_position.csv (eval.stream_length): the setting, then one line per bucket of
  // the stream (eval/streaming_cache.hpp); written only when some run measured it.
  std::vector<Cell> stream_header = positions_header;
  for (const char* c : kStreamSettingColumns) stream_header.push_back(c);
  for (const char* c : kStreamBucketColumns) stream_header.push_back(c);
  for (const char* c : {"position", "loss"}) positions_header.push_back(c);

  std::string summary = csv_line(header), positions = csv_line(positions_header);
  std::string copies = csv_line(copies_header), streams = csv_line(stream_header);
  std::string curves = csv_line(curve_header);
  bool any_copies = false, any_streams = false, any_curves = false;
  for (const PlannedRun& run : runs) {
    const fs::path dir = layout.run_dir(run);
    if (!fs::is_directory(dir) || !RunDirectory::open(dir).is_complete()) continue;
    const nlohmann::json eval = RunDirectory::open(dir).read_json("eval.json");
    if (eval.contains("provenance") && eval["provenance"].contains("commit")) {
      const std::string commit = eval["provenance"]["commit"].get<std::string>();
      if (std::find(commits.begin(), commits.end(), commit) == commits.end())
        commits.push_back(commit);
    }

    std::vector<Cell> who = {Cell(study.name), Cell(run.id)};
    for (const SweepAxis& axis : study.axes) who.push_back(Cell(run.sweep_values.at(axis.key)));
    if (has_variants) who.push_back(Cell(run.variant));
    if (has_stages) who.push_back(Cell(run.parent_id));

    if (fs::exists(dir / PasskeyCurve::kFile)) {
      any_curves = true;
      curves += passkey_curve_lines(dir / PasskeyCurve::kFile,
                                    std::vector<Cell>(who.begin() + 1, who.end()));
    }

    for (const nlohmann::json& e : evaluations_of(eval)) {
      std::vector<Cell> setting;
      for (const char* c : {"kind", "factor", "seq_len", "mem_len"}) setting.push_back(json_cell(e, c));

      std::vector<Cell> row = who;
      row.insert(row.end(), setting.begin(), setting.end());
      if (passkey) row.push_back(json_cell(e, kPasskeyDepthColumn));
      for (const char* c : kSettingColumns) row.push_back(json_cell(e, c));
      if (passkey) row.push_back(json_cell(e, kPasskeyGreedyColumn));
      const nlohmann::json provenance = eval.value("provenance", nlohmann::json());
      for (const char* c : kRunColumns)
        row.push_back(std::string(c) == "commit" ? json_cell(provenance, c) : json_cell(eval, c));
      if (times)
        for (const char* c : kRunTimeColumns) row.push_back(json_cell(provenance, c));
      summary += csv_line(row);

      if (e.contains("copy_distance") && e["copy_distance"].is_object()) {
        any_copies = true;
        for (const nlohmann::json& line : copy_distance_lines(e["copy_distance"])) {
          std::vector<Cell> cells(who.begin() + 1, who.end());
          cells.insert(cells.end(), setting.begin(), setting.end());
          for (const char* c : kCopyDistanceColumns) cells.push_back(json_cell(line, c));
          copies += csv_line(cells);
        }
      }

      if (e.contains("loss_by_stream_position") && e["loss_by_stream_position"].is_object()) {
        any_streams = true;
        const nlohmann::json& b = e["loss_by_stream_position"];
        for (std::size_t i = 0; i < b["low"].size(); ++i) {
          std::vector<Cell> cells(who.begin() + 1, who.end());
          cells.insert(cells.end(), setting.begin(), setting.end());
          for (const char* c : kStreamSettingColumns) cells.push_back(json_cell(e, c));
          const nlohmann::json line = {{"position_low", b["low"][i]},
                                       {"position_high", b["high"][i]},
                                       {"tokens", b["tokens"][i]},
                                       {"loss", b["loss"][i]}};
          for (const char* c : kStreamBucketColumns) cells.push_back(json_cell(line, c));
          streams += csv_line(cells);
        }
      }

      if (!e.contains("loss_by_position") || !e["loss_by_position"].is_array()) continue;
      const nlohmann::json& losses = e["loss_by_position"];
      for (std::size_t p = 0; p < losses.size(); ++p) {
        std::vector<Cell> line(who.begin() + 1, who.end());
        line.insert(line.end(), setting.begin(), setting.end());
        line.push_back(Cell(p));
        line.push_back(losses[p].is_number() ? Cell(losses[p].get<double>()) : Cell(""));
        positions += csv_line(line);
      }
    }
  }
  fs::create_directories(layout.root);
  write_file_atomically(layout.summary(), summary);
  write_file_atomically(layout.loss_by_position(), positions);
  if (any_copies) write_file_atomically(layout.loss_by_copy_distance(), copies);
  if (any_streams) write_file_atomically(layout.loss_by_stream_position(), streams);
  if (any_curves) write_file_atomically(layout.passkey_curve(), curves);
  return commits;
}

// The last non-empty line of a log: usually the child's "poslab: error: ..." line.
std::string last_line_of(const fs::path& file) {
  std::istringstream lines(read_text_file(file));
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// `POSLAB train --config FILE [--set train.threads=T]`: what a run is, locally (a child process
// of the scheduler; scheduler.hpp says why not a call in this process) and in a Slurm export.
std::vector<std::string> train_arguments(const PlannedRun& run, const StudyLayout& layout,
                                         const std::string& executable, int threads, bool given) {
  std::vector<std::string> args = {executable, "train", "--config",
                                   layout.config_file(run).string()};
  // 0 = all cores: too many beside other runs. --threads (given) wins over the study.
  if (threads > 0 && (given || run.config.train.threads == 0))
    args.insert(args.end(), {"--set", "train.threads=" + std::to_string(threads)});
  return args;
}

void write_config_file(const PlannedRun& run, const StudyLayout& layout) {
  fs::create_directories(layout.config_file(run).parent_path());
  write_file_atomically(layout.config_file(run), config_to_toml(run.config));
}

void place_runs(std::vector<PlannedRun>& runs, const StudyLayout& layout) {
  for (PlannedRun& run : runs) {
    run.config.out_dir = layout.run_dir(run).string();
    if (run.parent != PlannedRun::kNoParent)
      run.config.train.init_from = layout.run_dir(runs[run.parent]).string();
  }
}

std::string to_string(RunStatus status) {
  switch (status) {
    case RunStatus::pending: return "pending";
    case RunStatus::running: return "running";
    case RunStatus::incomplete: return "incomplete";
    case RunStatus::done: return "done";
    case RunStatus::stale: return "stale";
  }
  return "?";
}

bool is_being_trained(const fs::path& run_dir) {
  if (DirectoryLock::is_held(run_dir)) return true;  // a trainer on this machine
  const std::optional<ClaimInfo> claim = read_claim(run_dir);
  return claim && claim_is_live(*claim);  // one on another machine, by its heartbeat
}

namespace {

// A finished later-stage run is the same experiment only if it started from the checkpoint its
// parent holds now: a parent trained again since (deleted and rerun) makes it stale. "" if the
// run has no parent, the parent is not finished (nothing to compare), or the checkpoints match.
std::string started_from_another_parent(const PlannedRun& run, const fs::path& dir) {
  if (run.parent == PlannedRun::kNoParent) return "";
  const fs::path parent = run.config.train.init_from;
  if (!fs::is_directory(parent) || !RunDirectory::open(parent).is_complete()) return "";
  const nlohmann::json eval = RunDirectory::open(dir).read_json("eval.json");
  const std::string recorded =
      eval.value("provenance", nlohmann::json::object())
          .value("init_from", nlohmann::json::object())
          .value("checkpoint_sha256", "");
  const std::string now = checkpoint_sha256(parent);
  if (recorded == now) return "";
  return "it started from another checkpoint of its parent " + parent.string() + " (sha256 " +
         (recorded.empty() ? "not recorded" : recorded.substr(0, 12) + "...") + ", now " +
         now.substr(0, 12) + "...): the parent was trained again since";
}

// The config a finished run was made with, its train.init_from written as the study places it
// now when both name the same parent run (the same directory name): where the results
// directory lies, or how its path was spelled, is no part of the experiment.
Config as_made(const fs::path& dir, const PlannedRun& run) {
  Config made = load_config((dir / "config.toml").string(), registered_choices());
  if (run.parent == PlannedRun::kNoParent) return made;
  // "results/x/runs/short__train.seed-1/" -> "short__train.seed-1"
  const auto parent_name = [](const std::string& path) {
    return (fs::path(path) / "").lexically_normal().parent_path().filename();
  };
  if (parent_name(made.train.init_from) == parent_name(run.config.train.init_from))
    made.train.init_from = run.config.train.init_from;
  return made;
}

}  // namespace

RunStatus run_status(const PlannedRun& run, const StudyLayout& layout, std::string* why) {
  const fs::path dir = layout.run_dir(run);
  if (!fs::exists(dir)) return RunStatus::pending;
  if (!fs::is_directory(dir)) return RunStatus::incomplete;
  if (!RunDirectory::open(dir).is_complete())
    return is_being_trained(dir) ? RunStatus::running : RunStatus::incomplete;
  try {
    const std::string difference = experiment_difference(as_made(dir, run), run.config);
    const std::string parent_changed = started_from_another_parent(run, dir);
    if (difference.empty() && parent_changed.empty()) return RunStatus::done;
    if (why) *why = difference.empty() ? parent_changed : difference;
  } catch (const std::exception& e) {  // no config.toml, or one this poslab cannot read
    if (why) *why = e.what();
  }
  return RunStatus::stale;
}

std::vector<RunState> study_status(std::vector<PlannedRun>& runs, const StudyLayout& layout) {
  place_runs(runs, layout);
  std::vector<RunState> states(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    states[i].status = run_status(runs[i], layout, &states[i].why);
  return states;
}

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || (c != 0 && std::strchr("_./=+:,@%-", c));
  });
  if (safe) return word;
  std::string out = "'";
  for (char c : word) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string export_command(const PlannedRun& run, const StudyLayout& layout,
                           const std::string& poslab, const fs::path& config_file, int threads) {
  std::vector<std::string> args = train_arguments(run, layout, poslab, threads, threads > 0);
  if (!config_file.empty()) args[3] = config_file.string();  // {poslab, train, --config, FILE}
  std::string train;
  for (const std::string& arg : args) train += (train.empty() ? "" : " ") + shell_quote(arg);
  // --resume: a finished run is skipped (exit 0), an unfinished one is trained again.
  // --wait-for-trainer: a run another process is training (a second submission of the study)
  // is waited for, and its outcome is this command's: 0 if it finished, 1 if not, so that the
  // next stage's afterok dependency sees the truth (docs/08). The bound is kWaitForTrainer;
  // a Slurm task's own --time ends it sooner. The log is appended to: a second start must not
  // erase the log of the training that holds the run.
  return "cd " + shell_quote(fs::current_path().string()) + " && " + train +
         " --resume --wait-for-trainer " + std::to_string(kWaitForTrainerSeconds) + " >> " +
         shell_quote(layout.log_file(run).string()) + " 2>&1";
}


// ---------------------------------------------------------------------------------------------
// run_study: plan, check, then do what was asked
// ---------------------------------------------------------------------------------------------

// Does run `run` match one of the --only globs (its id or its directory name)?
bool selected(const PlannedRun& run, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(), [&run](const std::string& glob) {
    return ::fnmatch(glob.c_str(), run.id.c_str(), 0) == 0 ||
           ::fnmatch(glob.c_str(), run.dir_name.c_str(), 0) == 0;
  });
}

int run_study(const RunStudyOptions& options, std::ostream& out) {
  if (options.jobs < 1) throw std::runtime_error("--jobs must be at least 1");
  if (options.threads < 0) throw std::runtime_error("--threads must be at least 1");
  // These paths reach commands.txt and the Slurm scripts: a line break there would start a
  // command.
  check_path_argument("poslab run STUDY", options.study_path);
  if (!options.out.empty()) check_path_argument("--out", options.out);
  if (!options.poslab.empty()) check_path_argument("--poslab", options.poslab);
  const Study study = load_study(options.study_path);
  // May throw: nothing is written.
  std::vector<PlannedRun> runs = expand_study(study, options.smoke, options.overrides);

  StudyLayout layout;
  if (!options.out.empty()) layout.root = options.out;
  else layout.root = fs::path("results") / (study.name + (options.smoke ? "-smoke" : ""));
  place_runs(runs, layout);

  // --only chooses what is run or exported; the summary always covers the whole study.
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (selected(runs[i], options.only)) chosen.push_back(i);
  if (chosen.empty()) {
    std::string names;
    for (std::size_t i = 0; i < std::min<std::size_t>(runs.size(), 3); ++i)
      names += "\n  " + runs[i].id + "  (runs/" + runs[i].dir_name + ")";
    throw std::runtime_error("--only matches none of the " + std::to_string(runs.size()) +
                             " runs of " + study.source + "; a glob is matched against a run's "
                             "id or directory name, e.g.:" + names);
  }

  std::vector<RunStatus> status;
  std::vector<std::string> why;
  for (RunState& state : study_status(runs, layout)) {
    status.push_back(state.status);
    why.push_back(std::move(state.why));
  }
  // The files the runs still to train will read (a corpus): a missing one stops the study here,
  // with --dry-run and --export too, before anything is written. A finished run reads nothing,
  // and --summary-only runs nothing.
  if (!options.summary_only)
    for (std::size_t i : chosen)
      if (status[i] != RunStatus::done && status[i] != RunStatus::running)
        check_run_inputs(study, runs[i]);

  if (options.dry_run || options.summary_only) {
    std::vector<PlannedRun> shown;
    std::vector<RunStatus> shown_status;
    std::vector<std::string> shown_why;
    for (std::size_t i : chosen)
      shown.push_back(runs[i]), shown_status.push_back(status[i]), shown_why.push_back(why[i]);
    if (options.dry_run) {
      print_status(study, shown, shown_status, shown_why, layout,
                   "Dry run: nothing was run or written.", out);
      return 0;
    }
    // --summary-only: the table of what is finished, whatever else is going on; never a run.
    if (!fs::is_directory(layout.root))
      throw std::runtime_error("no results directory " + layout.root.string() +
                               ": the study has not run there (see --out)");
    write_summary(study, runs, layout);
    print_status(study, shown, shown_status, shown_why, layout,
                 "Nothing was run; summary: " + layout.summary().string(), out);
    return 0;
  }

  std::string stale;
  std::size_t stale_count = 0;
  for (std::size_t i : chosen)
    if (status[i] == RunStatus::stale && ++stale_count <= 5)
      stale += "\n  " + layout.run_dir(runs[i]).string() + ": " + why[i];
  if (stale_count > 5) stale += "\n  ... and " + std::to_string(stale_count - 5) + " more";
  if (!stale.empty())
    throw std::runtime_error("finished runs in " + layout.root.string() +
                             " were made with another config than " + study.source +
                             " now gives:" + stale +
                             "\ndelete those directories to run them again, or use --out DIR");

  if (!options.export_format.empty()) {
    return export_runs(study, runs, status, chosen, layout, options, out);
  }

  const std::string executable = child_executable(options);
  if (::access(executable.c_str(), X_OK) != 0)
    throw std::runtime_error("--poslab " + executable + ": not an executable file");

  fs::create_directories(layout.root);
  ResultsLock lock(layout.root);
  std::string study_copy = read_text_file(options.study_path);
  if (!options.overrides.empty()) {  // the copy says how these runs differ from the file
    study_copy += "\n# Run with these overrides on the command line (poslab run --set):\n";
    for (const std::string& o : options.overrides) study_copy += "#   --set " + o + "\n";
  }
  write_file_atomically(layout.root / "study.toml", study_copy);
  // How these runs were planned, for `poslab report` (whose statuses must equal --dry-run's of
  // this command): --smoke and --set, which the results directory's name need not tell.
  write_file_atomically(layout.root / kRunOptionsFile,
                        nlohmann::json{{"smoke", options.smoke}, {"set", options.overrides}}
                                .dump(2) + "\n");

  std::vector<std::size_t> todo;
  std::size_t done = 0, running_elsewhere = 0;
  for (std::size_t i : chosen) {
    if (status[i] == RunStatus::done) ++done;
    else if (status[i] == RunStatus::running) ++running_elsewhere;
    else todo.push_back(i);
  }
  const SchedulerJob job{study,   runs,         layout, executable, exported_executable(options),
                         options.jobs, options.threads};
  const int threads = threads_per_run(job);
  out << "study '" << study.name << "': " << chosen.size() << " runs"
      << (chosen.size() < runs.size() ? " (--only; of " + std::to_string(runs.size()) + ")" : "")
      << ", " << done << " already done, " << todo.size() << " to run, "
      << options.jobs << " at a time, " << threads << (threads == 1 ? " thread" : " threads")
      << " each (" << (options.threads > 0 ? "--threads" : "cores / jobs")
      << "); results in " << layout.root.string() << std::endl;
  const std::string elsewhere =
      std::to_string(running_elsewhere) + " run(s) are being trained by another process (their "
      "directory is locked): left alone; run the study again once they finish";
  if (running_elsewhere) out << elsewhere << std::endl;
  const int code = run_scheduled(job, todo, done, chosen.size() - running_elsewhere, out);
  if (running_elsewhere) out << "note: " << elsewhere << std::endl;
  return code;
}

// ---------------------------------------------------------------------------------------------
// 4. The command line
// ---------------------------------------------------------------------------------------------

CLI::App* add_run_command(CLI::App& app, RunStudyOptions& options) {
  CLI::App* run = app.add_subcommand(
      "run", "Run a study: every run of a grid of settings, N at a time, resumable, summarized.");
  run->add_option("study", options.study_path, "Study file, e.g. experiments/state_reuse.toml")
      ->type_name("STUDY")
      ->required();
  run->add_option("--jobs,-j", options.jobs,
                  "Runs at the same time (default 1); each gets max(1, cores / jobs) threads")
      ->type_name("N")
      ->check(CLI::Range(1, 1024));
  run->add_option("--threads", options.threads,
                  "Threads of each run (default max(1, cores / jobs)), over the study's "
                  "train.threads; also in exported commands. Not part of a run's identity: "
                  "the same config gives the same bits at any thread count, so finished runs "
                  "stay done")
      ->type_name("T")
      ->check(CLI::Range(1, 1024));
  CLI::Option* dry_run = run->add_flag(
      "--dry-run", options.dry_run,
      "List the runs with their ids, directories and status (done, pending, stale, running, "
      "incomplete; why a run is stale); write nothing");
  run->add_flag("--smoke", options.smoke,
                "Apply the [smoke] overrides and keep the first 2 seeds of a train.seed axis (a "
                "tiny version: seconds to minutes, e.g. state_reuse's 20 runs); results go to "
                "results/NAME-smoke/");
  run->add_option("--out", options.out,
                  "Results directory (default results/NAME, or results/NAME-smoke with --smoke)")
      ->type_name("DIR");
  CLI::Option* export_option =
      run->add_option("--export", options.export_format,
                      "Run nothing: write the pending runs' configs and print one shell command "
                      "per run (commands), or write a Slurm job-array script (slurm)")
          ->type_name("commands|slurm")
          ->check(CLI::IsMember({"commands", "slurm"}));
  dry_run->excludes(export_option);
  CLI::Option* summary_only = run->add_flag(
      "--summary-only", options.summary_only,
      "Run nothing: list every run as done, running (another process trains it), incomplete, "
      "pending or stale, and write summary.csv from the finished ones");
  summary_only->excludes(export_option)->excludes(dry_run);
  run->add_option("--only", options.only,
                  "Only the runs whose id or directory name matches this glob (repeatable), "
                  "e.g. --only '*transformer_xl*'; the summary still covers every run")
      ->type_name("GLOB");
  run->add_option("--set", options.overrides,
                  "Override one config key in every run, after the study file (repeatable); "
                  "recorded in the results' study.toml. A finished run made without it is "
                  "then stale")
      ->type_name("SECTION.KEY=VALUE");
  run->add_option("--poslab", options.poslab,
                  "The poslab executable the runs use (default: this one, /proc/self/exe)")
      ->type_name("PATH");
  const std::string slurm_group = "Slurm (--export slurm; over the study's [slurm] table)";
  run->add_option("--partition", options.slurm.partition, "#SBATCH --partition")
      ->type_name("NAME")->group(slurm_group);
  run->add_option("--account", options.slurm.account, "#SBATCH --account")
      ->type_name("NAME")->group(slurm_group);
  run->add_option("--time", options.slurm.time, "#SBATCH --time: each run's limit, e.g. 2:00:00")
      ->type_name("TIME")->group(slurm_group);
  run->add_option("--mem", options.slurm.mem, "#SBATCH --mem, e.g. 4G")
      ->type_name("SIZE")->group(slurm_group);
  run->add_option("--cpus-per-task", options.slurm.cpus_per_task,
                  "#SBATCH --cpus-per-task; each training uses that many threads")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--array-throttle", options.slurm.array_throttle,
                  "At most N tasks of an array at once (--array=0-M%N)")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--max-array-size", options.slurm.max_array_size,
                  "Tasks per job array (default: MaxArraySize from `scontrol show config`, "
                  "else 1001); a larger study is split into several arrays")
      ->type_name("N")->check(CLI::Range(1, 1000000))->group(slurm_group);
  run->add_option("--sbatch", options.slurm.extra,
                  "One more #SBATCH option, e.g. --sbatch=--qos=short (repeatable)")
      ->type_name("OPTION")->group(slurm_group);
  run->footer(R"(The study file (TOML):
  # free comments: what the study shows, how long it takes, the command to reproduce
  [study]
  name = "state_reuse"            # results go to results/<name>/ (or --out DIR)
  [base]                          # a run config, same schema as `poslab train` configs
  [base.model]                    # (out_dir is ignored: the runner sets it per run)
  d_model = 64
  [sweep]                         # grid axes: every combination is one run
  "encoding.type" = ["none", "shaw", "transformer_xl"]
  "train.seed" = [1, 2, 3]
  [[variant]]                     # optional: named override sets crossed with the grid
  name = "no_a"
  set = { "encoding.term_a" = false }
  [[variant]]                     # a second stage: each run fine-tunes no_a's run at the same
  name = "no_a_long"              # grid point (train.init_from); inherits no_a's set, then
  from = "no_a"                   # applies its own
  set = { "train.seq_len" = 128, "train.steps" = 200 }
  [smoke]                         # overrides applied by --smoke: a tiny version (few steps, 2 seeds)
  "train.steps" = 5
Every run's config is checked before anything runs; a mistake names the file, line and key
(a `from` naming no variant, or variants that start from each other in a cycle, too).
A run is named by its settings (encoding.type=shaw,train.seed=2, or no_a,train.seed=1).
Stages: a child starts only after its parent finished (whatever --jobs); a child whose parent
failed is reported as not run (exit code 1). --export slurm submits each stage with
--dependency=afterok on the stage before (submit.sh).

Writes into the results directory (results/NAME, results/NAME-smoke with --smoke):
  configs/<run>.toml, runs/<run>/ (by `poslab train`; eval.json last), runs/<run>.log,
  summary.csv (a row per run and evaluation setting; columns study, run, one per axis,
  variant, kind, factor, seq_len, mem_len, split, loss, accuracy, exact_match,
  exact_match_ci_low/high (Wilson 95% over the instances), instances, tokens, peak_memory_mb,
  in_distribution_ok (the gate), unigram_loss, bigram_loss, train_loss,
  train_tokens_per_second, train_seconds, commit), loss_by_position.csv, study.toml (a copy),
  run_options.json (--smoke and --set, which `poslab report` plans the runs with);
  --export commands: commands.txt. --export slurm: slurm/<time>/ (commands.txt, array-K.sh
  job arrays, submit.sh, logs/), pinned: a later export never changes what a queued task runs;
  slurm/header.sh holds your own #SBATCH lines and is never overwritten.
Resumable: finished runs (with eval.json) are skipped; interrupted ones continue from their
saved training state (resume/, every train.save_state_every steps and on Ctrl-C/SIGTERM).
A run another process is training (it holds the run directory's lock) is never touched.
A failed run is reported with its log and the others go on; the exit code is then 1.
Ctrl-C stops the running runs after their current step (they continue next time); exit code 130.
Example:
  poslab run experiments/state_reuse.toml --dry-run
  poslab run experiments/state_reuse.toml --smoke
  poslab run experiments/state_reuse.toml --jobs 2
  poslab run experiments/state_reuse.toml --export slurm --partition cpu --time 1:00:00
  poslab run experiments/state_reuse.toml --summary-only
  poslab run experiments/state_reuse.toml --only '*transformer_xl*' --set train.steps=100 --out /tmp/try)");
  return run;
}

}  // namespace poslab
