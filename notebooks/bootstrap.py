"""A paired bootstrap of a loss difference over the slices of the evaluation text: the command.
The method and the code: poslab_analysis/statistics/bootstrap.py.

    /usr/bin/python3 notebooks/bootstrap.py results/state_reuse          # -> bootstrap.csv
    /usr/bin/python3 notebooks/bootstrap.py --self-test
"""
import sys

from poslab_analysis.statistics import bootstrap

if __name__ == "__main__":
    sys.exit(bootstrap.main(sys.argv))
