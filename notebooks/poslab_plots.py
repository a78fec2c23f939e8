"""Standard figures of poslab's studies, from the tidy CSVs `poslab run` writes.

    /usr/bin/python3 notebooks/poslab_plots.py results/state_reuse        # -> results/state_reuse/figures/
    build/poslab plot results/state_reuse                                 # the same
    build/poslab plot results/bench                                       # poslab bench's figures

Which figures a study gets: poslab_analysis/figures/figure_sets.py; drawn by
poslab_analysis/figures/plots_backend.py (PNG and SVG, matplotlib, in the one style of
figures/style.py). Also writes summary_ci.csv (the table behind the curves). Uses Debian's
python3-pandas and python3-matplotlib (the `python3` on PATH may be another interpreter: call
/usr/bin/python3).
"""
import os
import sys

from poslab_analysis.figures.plots_backend import standard_figures
from poslab_analysis.figures.plots_bench import eval_memory, reuse_speed, scaling
from poslab_analysis.reading.study_files import StudyFileError, read_checked_summary
from poslab_analysis.reading.study_files import load  # noqa: F401 (notebooks/tour.ipynb: pp.load)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    for study_dir in argv[1:]:
        if any(os.path.exists(os.path.join(study_dir, name))  # poslab bench
               for name in ("reuse_speed.csv", "scaling.csv", "eval_memory.csv")):
            if os.path.exists(os.path.join(study_dir, "reuse_speed.csv")):  # --reuse
                for path in reuse_speed(study_dir):
                    print(path)
            if os.path.exists(os.path.join(study_dir, "scaling.csv")):  # --scaling
                for path in scaling(study_dir):
                    print(path)
            if os.path.exists(os.path.join(study_dir, "eval_memory.csv")):  # --eval-memory
                for path in eval_memory(study_dir):
                    print(path)
            continue
        try:  # a summary.csv that is missing or unreadable: one line, no traceback
            read_checked_summary(os.path.join(study_dir, "summary.csv"))
        except StudyFileError as e:
            print(f"poslab plot: error: {e}", file=sys.stderr)
            return 1
        for path in standard_figures(study_dir):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
