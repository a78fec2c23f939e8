"""The claims tables of docs/06-running-studies.md and docs/11 (PoSE), computed from a study's
summary.csv, so that every number in them can be regenerated with one command:

    /usr/bin/python3 notebooks/claims.py results/lm_extrapolation     # one study's tables
    /usr/bin/python3 notebooks/claims.py results/pose                 # docs/11's PoSE table
    /usr/bin/python3 notebooks/claims.py results/finetune_budget      # issue 48's fine-tuning
                                                                      # budget rows (regime column)
    /usr/bin/python3 notebooks/claims.py results/logn_trained         # issue 49's log-n trained
                                                                      # in (Chiang & Cholak, row 6)
    /usr/bin/python3 notebooks/claims.py results                      # the count per paper
    /usr/bin/python3 notebooks/claims.py --metrics results/length_generalization
                                           # the paper-metric values quoted in the docs, as CSV

The rules are in poslab_analysis/claims/rules.py, each paper's rows in
poslab_analysis/claims/papers/, and which study's table holds which papers in
poslab_analysis/claims/tables.py.
"""
import sys

from poslab_analysis.claims import paper_metrics, tables
from poslab_analysis.reading.study_files import StudyFileError


def main(argv):
    if len(argv) == 3 and argv[1] == "--metrics":
        sys.stdout.write(paper_metrics.metrics_csv(argv[2].rstrip("/")))
        return 0
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    study_dir = argv[1].rstrip("/")
    if study_dir.split("/")[-1] == "results":
        print(tables.summary_table(study_dir))
        return 0
    if tables.kind_of(study_dir) is None:
        print(f"claims.py: no claims table is defined for {study_dir.split('/')[-1]}",
              file=sys.stderr)
        return 1
    print(tables.claims_table(study_dir))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except StudyFileError as e:  # a study's file that cannot be read: one line, not a traceback
        print(f"claims.py: error: {e}", file=sys.stderr)
        sys.exit(1)
