// The Slurm job arrays of `poslab run --export slurm` (slurm_export.hpp).
#include "study/slurm_export.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "study/runner.hpp"
#include "train/run_dir.hpp"

namespace poslab {

namespace fs = std::filesystem;

int cluster_max_array_size() {
  // `scontrol show config` prints "MaxArraySize            = 1001"; no scontrol: nothing.
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen("scontrol show config 2>/dev/null", "r"),
                                             ::pclose);
  if (!pipe) return 0;
  char line[512];
  while (std::fgets(line, sizeof line, pipe.get())) {
    const std::string text(line);
    if (text.rfind("MaxArraySize", 0) != 0) continue;
    const std::size_t equals = text.find('=');
    if (equals == std::string::npos) return 0;
    try {
      return std::max(0, std::stoi(text.substr(equals + 1)));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

void check_slurm_results_path(const fs::path& results_root) {
  const std::string text = fs::absolute(results_root).string();
  if (std::any_of(text.begin(), text.end(),
                  [](unsigned char c) { return std::isspace(c) || std::iscntrl(c); }))
    throw std::runtime_error("the results directory " + text +
                             " contains a space or a control character, which an #SBATCH "
                             "--output line cannot hold; choose --out DIR without spaces");
}

namespace {

const char* kHeaderTemplate =
    "# Lines added to every job script of this study's Slurm exports (`poslab run --export\n"
    "# slurm`); poslab writes this file once and never overwrites it. Put #SBATCH lines first\n"
    "# (Slurm reads them only before the first command), then commands. For example:\n"
    "#   #SBATCH --qos=short\n"
    "#   #SBATCH --mail-type=FAIL\n"
    "#   module load openblas\n"
    "# Partition, account, time, memory and CPUs per task are better set in the study's\n"
    "# [slurm] table or with --partition, --account, --time, --mem, --cpus-per-task.\n";

std::string array_script_name(std::size_t index) {
  return "array-" + std::to_string(index) + ".sh";
}

}  // namespace

std::vector<SlurmArray> slurm_arrays(const SlurmSubmission& submission) {
  const std::size_t per_array = static_cast<std::size_t>(submission.tasks_per_array);
  const std::size_t n = submission.commands.size();
  auto stage_of = [&](std::size_t i) { return submission.stages.empty() ? 0 : submission.stages[i]; };
  std::vector<SlurmArray> arrays;
  for (std::size_t i = 0; i < n; ++i) {
    if (arrays.empty() || arrays.back().stage != stage_of(i) || arrays.back().count == per_array)
      arrays.push_back({i, 0, stage_of(i)});
    ++arrays.back().count;
  }
  return arrays;
}

std::string slurm_array_script(const SlurmSubmission& submission, std::size_t index,
                               const std::string& header_text) {
  const std::vector<SlurmArray> arrays = slurm_arrays(submission);
  const SlurmArray& array = arrays.at(index);
  const std::size_t first = array.first, count = array.count;
  const int stages = arrays.back().stage + 1;
  const SlurmOptions& o = submission.options;
  const fs::path commands = submission.directory / "commands.txt";
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Study '" << submission.study_name << "', job array " << index + 1 << " of "
    << arrays.size() << ", written by `poslab run --export slurm`.\n";
  if (stages > 1)
    s << "# Stage " << array.stage + 1 << " of " << stages
      << (array.stage == 0 ? ": runs that start from scratch or from finished runs.\n"
                           : ": runs that start from runs of the stage before; submit.sh "
                             "submits it with --dependency=afterok on that stage's arrays.\n");
  s << "# Task i runs line " << first + 1 << " + i of " << commands.string() << "\n"
    << "#SBATCH --job-name=poslab-" << submission.study_name << "\n"
    << "#SBATCH --array=0-" << count - 1;
  if (o.array_throttle > 0) s << '%' << o.array_throttle;  // at most that many at once
  s << "\n"
    << "#SBATCH --output=" << (submission.directory / "logs" / "%A_%a.out").string() << "\n";
  // A parent that fails leaves its children's dependency unsatisfiable: cancel them then,
  // instead of leaving them pending forever (DependencyNeverSatisfied).
  if (array.stage > 0) s << "#SBATCH --kill-on-invalid-dep=yes\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << o.partition << "\n";
  if (!o.account.empty()) s << "#SBATCH --account=" << o.account << "\n";
  if (!o.time.empty()) s << "#SBATCH --time=" << o.time << "\n";
  if (!o.mem.empty()) s << "#SBATCH --mem=" << o.mem << "\n";
  if (o.cpus_per_task > 0) s << "#SBATCH --cpus-per-task=" << o.cpus_per_task << "\n";
  for (const std::string& option : o.extra) s << "#SBATCH " << option << "\n";
  s << "# --- " << submission.header.string() << " ---\n"
    << header_text << (header_text.empty() || header_text.back() == '\n' ? "" : "\n")
    << "# ---\n"
    << "set -euo pipefail\n"
    << "line=$((SLURM_ARRAY_TASK_ID + " << first + 1 << "))\n"
    << "command=$(sed -n \"${line}p\" " << shell_quote(commands.string()) << ")\n"
    << "if [ -z \"$command\" ]; then\n"
    << "  echo \"poslab: no line $line in \"" << shell_quote(commands.string()) << " >&2\n"
    << "  exit 1\n"
    << "fi\n"
    << "echo \"$command\"\n"
    << "eval \"$command\"\n";
  return s.str();
}

std::string slurm_submit_script(const SlurmSubmission& submission) {
  const std::vector<SlurmArray> arrays = slurm_arrays(submission);
  std::string submit = "#!/bin/bash\n";
  if (arrays.back().stage == 0) {
    submit += "# Submits every job array of this export, in order.\nset -euo pipefail\n";
    for (std::size_t k = 0; k < arrays.size(); ++k)
      submit += "sbatch " + shell_quote((submission.directory / array_script_name(k)).string()) + "\n";
    return submit;
  }
  // Stages: stage k's arrays wait for every array of stage k - 1 to complete successfully.
  submit +=
      "# Submits the job arrays of this export stage by stage: the arrays of a stage start only\n"
      "# after every array of the stage before has completed successfully (afterok).\n"
      "set -euo pipefail\n"
      "submit() {  # sbatch --parsable prints \"id\" or \"id;cluster\"\n"
      "  local id\n"
      "  id=$(sbatch --parsable \"$@\")\n"
      "  echo \"${id%%;*}\"\n"
      "}\n";
  std::string previous, current;  // job ids of the stage before and of this one, ":"-joined
  for (std::size_t k = 0; k < arrays.size(); ++k) {
    if (k > 0 && arrays[k].stage != arrays[k - 1].stage) previous = current, current.clear();
    const std::string script = shell_quote((submission.directory / array_script_name(k)).string());
    const std::string job = "job_" + std::to_string(k);
    submit += job + "=$(submit " +
              (previous.empty() ? "" : "--dependency=afterok:" + previous + " ") + script + ")\n";
    submit += "echo \"Submitted batch job $" + job + " (" + array_script_name(k) + ", stage " +
              std::to_string(arrays[k].stage + 1) + ")\"\n";
    current += (current.empty() ? "$" : ":$") + job;
  }
  return submit;
}

void write_slurm_submission(const SlurmSubmission& submission, std::ostream& out) {
  if (submission.commands.empty()) throw std::logic_error("a Slurm submission without runs");
  if (submission.tasks_per_array < 1) throw std::logic_error("tasks_per_array < 1");
  if (!submission.stages.empty() && submission.stages.size() != submission.commands.size())
    throw std::logic_error("a Slurm submission with a stage for some commands only");
  check_slurm_results_path(submission.directory);
  fs::create_directories(submission.directory / "logs");
  if (!fs::exists(submission.header)) write_file_atomically(submission.header, kHeaderTemplate);
  std::ifstream header_file(submission.header, std::ios::binary);
  std::ostringstream header;
  header << header_file.rdbuf();

  std::string commands;
  for (const std::string& c : submission.commands) commands += c + "\n";
  write_file_atomically(submission.directory / "commands.txt", commands);

  const std::size_t per_array = static_cast<std::size_t>(submission.tasks_per_array);
  const std::vector<SlurmArray> plan = slurm_arrays(submission);
  const std::size_t arrays = plan.size();
  const int stages = plan.back().stage + 1;
  for (std::size_t k = 0; k < arrays; ++k) {
    const fs::path script = submission.directory / array_script_name(k);
    write_file_atomically(script, slurm_array_script(submission, k, header.str()));
    fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  }
  const std::string submit = slurm_submit_script(submission);
  const fs::path submit_script = submission.directory / "submit.sh";
  write_file_atomically(submit_script, submit);
  fs::permissions(submit_script, fs::perms::owner_exec | fs::perms::group_exec,
                  fs::perm_options::add);

  out << "wrote " << submission.directory.string() << "/: " << submission.commands.size()
      << (submission.commands.size() == 1 ? " run" : " runs") << " in " << arrays
      << (arrays == 1 ? " job array" : " job arrays") << " of at most " << per_array
      << " tasks (commands.txt, " << (arrays == 1 ? "array-0.sh" : "array-0.sh ...")
      << ", submit.sh)\n"
      << (stages > 1 ? "in " + std::to_string(stages) + " stages: each stage's arrays wait for "
                       "the stage before (--dependency=afterok in submit.sh)\n"
                     : std::string())
      << "your own #SBATCH lines and commands go in " << submission.header.string()
      << " (never overwritten)\n"
      << "submit with: " << shell_quote(submit_script.string()) << "\n";
}

}  // namespace poslab
