// `poslab run STUDY --export slurm`: a study's pending runs as Slurm job arrays.
//
// Every export is one submission, pinned in a directory of its own:
//
//   results/NAME/slurm/
//     header.sh                 the user's lines, copied into every job script (#SBATCH lines
//                               first, then commands such as `module load`). Written once with
//                               commented examples; an export never overwrites it.
//     <UTC time>/               one per export, never changed afterwards:
//       commands.txt            one line per pending run (export_command in runner.hpp)
//       array-0.sh, array-1.sh  job arrays of at most MaxArraySize tasks each; task i of array k
//                               runs line (k * size + i + 1) of commands.txt
//       submit.sh               sbatch of every array script, in order; a study with stages
//                               (runs that start from other runs) is submitted stage by stage:
//                               each stage's arrays with --dependency=afterok on every array of
//                               the stage before, so a child starts only after its parent
//                               finished (and its array is cancelled, --kill-on-invalid-dep,
//                               if a task of the stage before fails)
//       logs/%A_%a.out          each task's Slurm output (the run's own log is runs/<run>.log)
//
// Why pinned: tasks read their command by line number when they start, possibly hours after
// submission. A later export (after some runs finished, or with other settings) writes a new
// directory, so a task already queued still runs the line it was submitted for.
//
// Why it is safe to submit a run twice (two exports, a resubmission after a failure): each
// command is `poslab train --config C --resume`, which does nothing for a finished run, refuses
// a run another process is training (the run directory's lock), and trains an unfinished one
// again from step 0.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "study/study.hpp"

namespace poslab {

// What the cluster allows: MaxArraySize from `scontrol show config` (tasks per array = the
// largest index + 1), or 0 if scontrol is not installed or does not answer.
int cluster_max_array_size();

// Throws if `results_root` (made absolute) cannot go into an #SBATCH line: Slurm splits those
// on whitespace and cannot quote. Called before an export writes anything.
void check_slurm_results_path(const std::filesystem::path& results_root);

// Everything the job scripts need, resolved.
struct SlurmSubmission {
  std::string study_name;
  std::filesystem::path directory;      // results/NAME/slurm/<time>, absolute
  std::filesystem::path header;         // results/NAME/slurm/header.sh, absolute
  std::vector<std::string> commands;    // one per task
  // The stage of each command (0: nothing exported before it; k: its parent's command is in
  // stage k - 1), non-decreasing. Empty: every command is stage 0.
  std::vector<int> stages;
  SlurmOptions options;                 // [slurm] with the command line applied
  int tasks_per_array = 1001;           // max_array_size, or the cluster's, or Slurm's default
};

// One job array of a submission: commands [first, first + count) of commands.txt, all of one
// stage. A stage is cut into arrays of at most tasks_per_array tasks.
struct SlurmArray {
  std::size_t first = 0, count = 0;
  int stage = 0;
};
std::vector<SlurmArray> slurm_arrays(const SlurmSubmission& submission);

// The job script of array `index` of slurm_arrays(submission), as text.
std::string slurm_array_script(const SlurmSubmission& submission, std::size_t index,
                               const std::string& header_text);

// submit.sh: plain `sbatch SCRIPT` lines for one stage; for several, each stage's arrays
// submitted with --dependency=afterok on the job ids of the stage before.
std::string slurm_submit_script(const SlurmSubmission& submission);

// Writes the submission's directory (commands.txt, array-K.sh, submit.sh, logs/) and, if it does
// not exist, header.sh. Prints what it wrote and how to submit. Throws if a path cannot be
// written into an #SBATCH line (whitespace: Slurm cannot quote it there).
void write_slurm_submission(const SlurmSubmission& submission, std::ostream& out);

}  // namespace poslab
