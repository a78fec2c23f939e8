"""`poslab report STUDY_DIR`: a study's results as a static web site that opens from disk.

    build/poslab report results/xl_terms                 # -> results/xl_terms/report/index.html
    build/poslab report results/xl_terms --out /tmp/r    # anywhere else

`poslab report` (src/cli/report.cpp) lists the study's planned runs and their status and calls
this script with Debian's interpreter:

    /usr/bin/python3 notebooks/report.py STUDY_DIR --out DIR --runs RUNS.json

What the site holds (DIR/index.html; everything it needs is inside DIR):
  - the claims tables (notebooks/claims.py) and the study's tables (notebooks/study_tables.py),
    and the protocol (experiments/NAME.protocol.md), as Markdown the page renders;
  - every standard figure of notebooks/poslab_plots.py as interactive Vega-Lite charts
    (notebooks/poslab_analysis/figures/charts_backend.py);
  - the run table: status, difference from the study's base, gate, final losses, provenance;
  - the learning curves of every run that has a metrics.csv.

The data go into DIR/data/report.js as one JavaScript assignment (a page opened from file://
may not fetch a JSON file, but it may load a script). The page (web/report.js) puts every
string into the document as text (textContent), never as markup, so a study, run or variant
named `<script>...` shows as those characters. Charts are drawn by the vendored Vega-Lite
(web/vendor/, copied into DIR/lib/).

Where it writes: `poslab report` checks --out (src/core/site_directory.hpp: never a file, the
study itself, or a directory it did not make), makes a fresh staging directory beside it and
calls this script with `--out STAGING --staged`; it swaps the finished site into place. Called
directly, this script writes only into a directory that does not exist yet or is empty.

Errors reach the user as one line, `poslab report: error: FILE: problem`; --debug shows the
Python traceback instead.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import traceback

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import claims  # noqa: E402
from poslab_analysis.figures import charts_backend  # noqa: E402
from poslab_analysis.figures.charts import finite  # noqa: E402
from poslab_analysis.reading import protocol_gates  # noqa: E402
from poslab_analysis.reading.study_files import StudyFileError, read_checked_summary  # noqa: E402,E501
from poslab_analysis.statistics import study_tables  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEB = os.path.join(SOURCE, "web")


class ReportError(Exception):
    """A problem with the user's input, said in one line (file and problem)."""


def fail(message):
    raise ReportError(message)


def read_summary(path):
    """summary.csv as a DataFrame, or a ReportError that says what is wrong with the file
    (study_files.read_checked_summary)."""
    try:
        return read_checked_summary(path)
    except StudyFileError as e:
        fail(str(e))


def read_text(path):
    if path and os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    return None


def captured(function, *args):
    """What function(*args) prints, and its exception text if it raised (then None)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = function(*args)
    except Exception as e:  # a table that cannot be made is reported in the page, not fatal
        return None, f"{type(e).__name__}: {e}"
    return (out.getvalue() if code in (0, None) else None), None


def protocol_text(study_dir, name):
    """The study's protocol: STUDY_DIR/protocol.md, else experiments/NAME.protocol.md (NAME
    without a -smoke suffix)."""
    base = name[:-len("-smoke")] if name.endswith("-smoke") else name
    for path in (os.path.join(study_dir, "protocol.md"),
                 os.path.join(SOURCE, "experiments", f"{base}.protocol.md")):
        text = read_text(path)
        if text is not None:
            return text, os.path.relpath(path, SOURCE) if path.startswith(SOURCE) else path
    return None, None


def metrics_of(run_dir):
    """metrics.csv as columns {step: [...], train_loss: [...], valid_loss: [...], lr: [...]}."""
    path = os.path.join(run_dir, "metrics.csv")
    if not os.path.exists(path):
        return None
    frame = pd.read_csv(path)
    return {c: [finite(v) for v in frame[c]] for c in ("step", "train_loss", "valid_loss", "lr")
            if c in frame}


def trained_nothing(in_summary, evaluation):
    """Did the run take no training step (a zero-shot read, train.steps = 0)? Its eval.json says
    steps 0; summary.csv (committed results keep only it) says 0 tokens per second. poslab
    writes such a run's train loss as 0, which is not a loss."""
    if evaluation and "steps" in evaluation:
        return evaluation["steps"] == 0
    if in_summary is not None and "train_tokens_per_second" in in_summary:
        speed = in_summary["train_tokens_per_second"].iloc[0]
        return speed == speed and float(speed) == 0.0
    return False


def run_table(study_dir, summary, planned):
    """One row per planned run (or, without a plan, per run in summary.csv): what the page's
    run table shows, and each run's learning curve."""
    by_run = {run: rows for run, rows in summary.groupby("run", sort=False)} \
        if "run" in summary else {}
    if planned is None:  # called without `poslab report`: the runs summary.csv knows
        planned = [{"id": run, "dir_name": None, "overrides": None, "status": "done"}
                   for run in by_run]
    rows, curves = [], {}
    for plan in planned:
        run_id = plan["id"]
        status = plan["status"]
        run_dir = os.path.join(study_dir, "runs", plan["dir_name"]) if plan.get("dir_name") \
            else None
        evaluation = None
        if run_dir and os.path.exists(os.path.join(run_dir, "eval.json")):
            with open(os.path.join(run_dir, "eval.json")) as f:
                evaluation = json.load(f)
        in_summary = by_run.get(run_id)
        if status == "pending" and in_summary is not None:
            status = "done"  # committed results: summary.csv without the run directories
            source = "summary.csv (no run directory)"
        else:
            source = "run directory" if evaluation else ""
        row = {"id": run_id, "status": status, "source": source,
               "diff": plan.get("overrides"), "gate": None, "gate_kind": None, "loss": None,
               "train_loss": None, "commit": None, "cpu": None, "threads": None,
               "started": None, "finished": None, "train_seconds": None}
        if in_summary is not None:
            main = in_summary[in_summary["kind"] == "main"]
            first = (main if len(main) else in_summary).iloc[0]
            row["loss"] = finite(first.get("loss"))
            row["train_loss"] = finite(first.get("train_loss"))
            row["train_seconds"] = finite(first.get("train_seconds"))
            if "in_distribution_ok" in first and first["in_distribution_ok"] == \
                    first["in_distribution_ok"]:
                row["gate"] = str(first["in_distribution_ok"]).lower() == "true"
                # A language model's gate is its loss below the bigram baseline, a generated
                # task's its exact match: "pass" alone read as "retrieves" in a passkey study
                # (issue 51), so the table names which gate passed.
                row["gate_kind"] = "loss" if finite(first.get("bigram_loss")) is not None \
                    else "exact match"
            for key in ("commit", "started", "finished"):  # the times: runs since issue 45
                if key in first and isinstance(first[key], str):
                    row[key] = first[key]
        if evaluation:
            provenance = evaluation.get("provenance", {})
            row["loss"] = finite(evaluation.get("loss")) if row["loss"] is None else row["loss"]
            row["train_loss"] = row["train_loss"] if row["train_loss"] is not None else \
                finite(evaluation.get("train_loss"))
            if row["gate"] is None and "in_distribution_ok" in evaluation:
                row["gate"] = bool(evaluation["in_distribution_ok"])
            row["train_seconds"] = row["train_seconds"] or finite(evaluation.get("train_seconds"))
            for key in ("commit", "cpu", "threads", "started", "finished"):
                row[key] = row[key] or provenance.get(key)
        if trained_nothing(in_summary, evaluation):
            row["train_loss"] = None  # a zero-shot read (train.steps = 0) has no train loss
        if run_dir:
            curve = metrics_of(run_dir)
            if curve:
                curves[run_id] = curve
        rows.append(row)
    return rows, curves


def build(study_dir, out_dir, planned):
    # the protocol's gate, as the claims table and the figures apply it
    summary = protocol_gates.apply(read_summary(os.path.join(study_dir, "summary.csv")),
                                   study_dir)[0]
    name = os.path.basename(os.path.normpath(study_dir))
    study_name = str(summary["study"].iloc[0]) if "study" in summary and len(summary) else name

    claims_text, claims_error = captured(claims.main, ["claims.py", study_dir])
    tables_text, tables_error = captured(study_tables.main, study_dir)
    if tables_text and "|" not in tables_text:  # not a Markdown table (a plain description)
        tables_text = "```\n" + tables_text + "\n```"
    protocol, protocol_path = protocol_text(study_dir, name)
    figures, not_interactive = charts_backend.standard_figures(study_dir)
    runs, curves = run_table(study_dir, summary, planned)

    data = {
        "study": study_name,
        "directory": os.path.abspath(study_dir),
        "study_toml": read_text(os.path.join(study_dir, "study.toml")),
        "protocol": protocol, "protocol_path": protocol_path,
        "claims": claims_text, "claims_error": claims_error,
        "tables": tables_text, "tables_error": tables_error,
        "figures": figures, "not_interactive": not_interactive,
        "runs": runs, "curves": curves,
        "summary_rows": len(summary),
    }

    # Into out_dir, which is new or empty (main checked it); on an error, what was written here
    # is removed again.
    made = not os.path.exists(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    try:
        shutil.copytree(os.path.join(WEB, "vendor"), os.path.join(out_dir, "lib"))
        for asset in ("poslab.css", "page.js", "report.js", "markdown.js"):
            shutil.copy(os.path.join(WEB, asset), os.path.join(out_dir, "lib", asset))
        shutil.copy(os.path.join(WEB, "report.html"), os.path.join(out_dir, "index.html"))
        os.makedirs(os.path.join(out_dir, "data"))
        with open(os.path.join(out_dir, "data", "report.js"), "w", encoding="utf-8") as f:
            # JSON is a JavaScript expression; allow_nan=False: NaN was turned into null.
            f.write("window.POSLAB_REPORT = ")
            json.dump(data, f, allow_nan=False, separators=(",", ":"))
            f.write(";\n")
    except BaseException:
        if made:
            shutil.rmtree(out_dir, ignore_errors=True)
        else:
            for entry in os.listdir(out_dir):
                path = os.path.join(out_dir, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        raise
    return os.path.join(out_dir, "index.html")


def main(argv):
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n")[0])
    parser.add_argument("study_dir")
    parser.add_argument("--out", default=None,
                        help="a new or empty directory (default: STUDY_DIR/report)")
    parser.add_argument("--runs", default=None, help="planned runs and their status (JSON)")
    parser.add_argument("--staged", action="store_true",
                        help="--out is poslab report's staging directory: say nothing of it")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, the Python traceback instead of one line")
    args = parser.parse_args(argv[1:])
    try:
        return write_report(args)
    except ReportError as e:
        print(f"poslab report: error: {e}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 -- said in one line; --debug shows where
        if args.debug:
            raise
        where = traceback.extract_tb(e.__traceback__)[-1]
        print(f"poslab report: error: {type(e).__name__}: {e} (in "
              f"{os.path.basename(where.filename)}:{where.lineno}; --debug shows the "
              f"traceback)", file=sys.stderr)
    return 1


def write_report(args):
    if not os.path.isdir(args.study_dir):
        fail(f"{args.study_dir}: not a directory")
    out_dir = args.out or os.path.join(args.study_dir, "report")
    if os.path.lexists(out_dir) and not (os.path.isdir(out_dir) and not os.listdir(out_dir)):
        fail(f"--out {out_dir} exists and is not an empty directory; report.py writes only a new "
             f"or empty one (poslab report replaces a report it wrote before)")
    planned = None
    if args.runs:
        with open(args.runs) as f:
            planned = json.load(f)
    index = build(args.study_dir, out_dir, planned)
    if not args.staged:
        total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(out_dir)
                    for f in files)
        print(f"{index}  ({total / 1e6:.1f} MB; open it in a browser: file://"
              f"{os.path.abspath(index)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
