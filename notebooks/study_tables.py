"""Markdown tables of a study's results (means and standard deviations over seeds): the command.
The tables: poslab_analysis/statistics/study_tables.py.

    /usr/bin/python3 notebooks/study_tables.py results/shaw_clip
"""
import sys

from poslab_analysis.statistics import study_tables

if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(study_tables.__doc__)
        sys.exit(2)
    sys.exit(study_tables.main(sys.argv[1]))
