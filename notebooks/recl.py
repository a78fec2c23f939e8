"""Relative effective context length (RECL, Dai et al. 2019, Appendix C) of a group of runs: the
command. The definition and the code: poslab_analysis/statistics/recl.py.

    /usr/bin/python3 notebooks/recl.py OUT.csv RUN_DIR...       # every RUN_DIR/token_losses_M<c>.npy
    /usr/bin/python3 notebooks/recl.py --self-test
"""
import sys

from poslab_analysis.statistics import recl

if __name__ == "__main__":
    sys.exit(recl.main(sys.argv))
