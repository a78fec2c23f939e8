"""poslab's analysis code: from a study's result files to its claims tables, figures and report.

Layers, each importing only the ones before it (tests/notebooks/check_imports.py holds it):

  reading/      a study's files as tables (summary.csv, loss by position, RECL, bootstrap) and
                the encodings' names
  statistics/   intervals over seeds, the gate, paired differences, Wilson intervals, RECL and
                the paired bootstrap
  claims/       rules.py (the rules every verdict follows), studies/ (how each kind of study is
                read and the frame of its table), papers/ (one module per paper: its rows),
                tables.py (which papers each study's table holds), paper_metrics.py
  figures/      style.py; figure_sets.py (which figures a study gets); plots*.py (static,
                matplotlib) and charts*.py (interactive, Vega-Lite), each with its backend

The entry points are the scripts beside this folder in notebooks/: claims.py, poslab_plots.py
(`poslab plot`), report.py (`poslab report`), study_tables.py, recl.py, bootstrap.py,
break_positions.py, rope_wavelengths.py, and the two notebooks.
docs/analysis-code.md says where a new claim, figure kind or study kind goes.
"""
import importlib.util
import sys

# A clear word instead of a ModuleNotFoundError deep in a layer: the `python3` first on PATH may
# be another interpreter than Debian's, which has these (python3-pandas, python3-matplotlib).
_MISSING = [name for name in ("numpy", "pandas", "matplotlib")
            if importlib.util.find_spec(name) is None]
if _MISSING:
    raise SystemExit(f"poslab's analysis code needs {', '.join(_MISSING)}, which {sys.executable} "
                     f"does not have: run it with /usr/bin/python3 (Debian's; apt-get install "
                     f"python3-pandas python3-matplotlib), as `poslab plot` and `poslab report` do")
