"""notebooks/study_tables.py prints its tables for every committed study without an error (the
report shows them: `poslab report` puts them on the study's page). It failed with KeyError
'task.name' on the four studies whose summary has no task.name column before this check.

    /usr/bin/python3 tests/notebooks/check_study_tables.py      (CTest: study_tables)
"""
import contextlib
import io
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "notebooks"))
from poslab_analysis.statistics import study_tables  # noqa: E402


def main():
    results = os.path.join(REPO, "results")
    problems, checked = [], 0
    for root, dirs, files in os.walk(results):
        dirs[:] = sorted(d for d in dirs if d not in ("runs", "configs", "figures", "report"))
        if "summary.csv" not in files:
            continue
        checked += 1
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                study_tables.main(root)
        except Exception as e:  # noqa: BLE001: every failure is a problem to report
            problems.append(f"{os.path.relpath(root, results)}: {type(e).__name__}: {e}")
            continue
        if not printed.getvalue().strip():
            problems.append(f"{os.path.relpath(root, results)}: printed nothing")
    for p in problems:
        print(p)
    print(f"study_tables: {len(problems)} problem(s) in {checked} studies")
    return 1 if problems or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
