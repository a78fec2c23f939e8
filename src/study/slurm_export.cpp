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

std::string slurm_array_script(const SlurmSubmission& submission, std::size_t index,
                               const std::string& header_text) {
  const std::size_t per_array = static_cast<std::size_t>(submission.tasks_per_array);
  const std::size_t first = index * per_array;
  const std::size_t count = std::min(per_array, submission.commands.size() - first);
  const std::size_t arrays = (submission.commands.size() + per_array - 1) / per_array;
  const SlurmOptions& o = submission.options;
  const fs::path commands = submission.directory / "commands.txt";
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Study '" << submission.study_name << "', job array " << index + 1 << " of " << arrays
    << ", written by `poslab run --export slurm`.\n"
    << "# Task i runs line " << first + 1 << " + i of " << commands.string() << "\n"
    << "#SBATCH --job-name=poslab-" << submission.study_name << "\n"
    << "#SBATCH --array=0-" << count - 1;
  if (o.array_throttle > 0) s << '%' << o.array_throttle;  // at most that many at once
  s << "\n"
    << "#SBATCH --output=" << (submission.directory / "logs" / "%A_%a.out").string() << "\n";
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

void write_slurm_submission(const SlurmSubmission& submission, std::ostream& out) {
  if (submission.commands.empty()) throw std::logic_error("a Slurm submission without runs");
  if (submission.tasks_per_array < 1) throw std::logic_error("tasks_per_array < 1");
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
  const std::size_t arrays = (submission.commands.size() + per_array - 1) / per_array;
  std::string submit = "#!/bin/bash\n# Submits every job array of this export, in order.\n"
                       "set -euo pipefail\n";
  for (std::size_t k = 0; k < arrays; ++k) {
    const fs::path script = submission.directory / array_script_name(k);
    write_file_atomically(script, slurm_array_script(submission, k, header.str()));
    fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    submit += "sbatch " + shell_quote(script.string()) + "\n";
  }
  const fs::path submit_script = submission.directory / "submit.sh";
  write_file_atomically(submit_script, submit);
  fs::permissions(submit_script, fs::perms::owner_exec | fs::perms::group_exec,
                  fs::perm_options::add);

  out << "wrote " << submission.directory.string() << "/: " << submission.commands.size()
      << (submission.commands.size() == 1 ? " run" : " runs") << " in " << arrays
      << (arrays == 1 ? " job array" : " job arrays") << " of at most " << per_array
      << " tasks (commands.txt, " << (arrays == 1 ? "array-0.sh" : "array-0.sh ...")
      << ", submit.sh)\n"
      << "your own #SBATCH lines and commands go in " << submission.header.string()
      << " (never overwritten)\n"
      << "submit with: " << shell_quote(submit_script.string()) << "\n";
}

}  // namespace poslab
