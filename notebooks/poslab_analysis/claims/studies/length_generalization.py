"""The length-generalization study (experiments/length_generalization.protocol.md): algorithmic
tasks (the study's variants) trained on instances of up to L = 32 tokens, read on longer ones
(buckets at 1.5x, 2x, 4x, 8x), and its sibling with randomized positions
(STUDY_randomized). Its table: the gate per task and encoding, the papers' sections, then the
metric of every task by evaluation length."""
import os

import pandas as pd

from poslab_analysis.reading import study_files
from poslab_analysis.reading.names import label
from poslab_analysis.statistics import seeds


class Study:
    """What the papers' rows read: the study's summary and, if it has run, the randomized one."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary = study_files.read_summary(study_dir)
        randomized_dir = study_dir + "_randomized"
        self.randomized = (pd.read_csv(os.path.join(randomized_dir, "summary.csv"))
                           if os.path.exists(os.path.join(randomized_dir, "summary.csv"))
                           else None)


def task_rows(summary, task, kind, factor=None):
    """The gated rows of one task (the study's variant) and evaluation kind, at one factor."""
    rows = summary[(summary["variant"] == task) & (summary["kind"] == kind)]
    if factor is not None:
        rows = rows[rows["factor"] == factor]
    return rows[seeds.gate_passed(rows)]


def by_seed(rows, encoding, metric="exact_match"):
    return rows[rows["encoding.type"] == encoding].set_index("train.seed")[metric].dropna()


def unseen_factors(summary):
    return sorted(f for f in summary[summary["kind"] == "length"]["factor"].unique() if f > 1)


def encodings_of(summary):
    return list(dict.fromkeys(summary["encoding.type"]))


def gate_table(summary):
    """Per task and encoding: exact match on the gate setting (mean over every seed, gated or
    not) and how many seeds pass the gate."""
    lines = ["| task | " + " | ".join(label(e) for e in encodings_of(summary)) + " |",
             "|---|" + "---|" * len(encodings_of(summary))]
    for task in dict.fromkeys(summary["variant"]):
        cells = []
        for encoding in encodings_of(summary):
            gate_kind = "gate_sampled" if (summary["kind"] == "gate_sampled").any() else "gate"
            rows = summary[(summary["variant"] == task) & (summary["encoding.type"] == encoding)
                           & (summary["kind"] == gate_kind)]
            if rows.empty:
                cells.append("")
                continue
            passed = int(seeds.gate_passed(rows).sum()) if task not in \
                seeds.NEGATIVE_CONTROLS else None
            mean = rows["exact_match"].mean()
            gate_note = f" ({passed}/{len(rows)} pass)" if passed is not None else " (not gated)"
            cells.append(f"{mean:.3f}{gate_note}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def factor_table(summary, task, kind="length", metric="exact_match"):
    """Per encoding (rows) and length factor (columns): mean [95% interval] over gated seeds."""
    rows = summary[(summary["variant"] == task) & (summary["kind"] == kind)]
    factors = sorted(rows["factor"].unique())
    lines = ["| encoding | " + " | ".join(f"{f:g}x" for f in factors) + " |",
             "|---|" + "---|" * len(factors)]
    for encoding in encodings_of(rows):
        cells = []
        for f in factors:
            part = task_rows(summary, task, kind, f)
            mean, low, high, n = seeds.t_interval(by_seed(part, encoding, metric).tolist())
            if n == 0:
                cells.append("dropped")
            elif n == 1 or low != low:
                cells.append(f"{mean:.2f} (n=1)")
            else:
                cells.append(f"{mean:.2f} [{max(low, 0):.2f}, {min(high, 1):.2f}]"
                             + ("" if n >= 3 else f" n={n}"))
        lines.append(f"| {encoding} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(study_dir, papers, record=None):
    """The claims table: the gate of the plain and randomized runs, each paper's section
    (paper.length_generalization(study, record) -> lines), then every task's metric by length."""
    study = Study(study_dir)
    summary, randomized = study.summary, study.randomized
    lines = []
    for name, frame in (("plain", summary), ("randomized", randomized)):
        if frame is None:
            continue
        runs = frame.drop_duplicates("run")
        dropped = runs[~seeds.gate_passed(runs)]
        listed = ", ".join(dropped["run"]) if 0 < len(dropped) <= 12 else \
            ("none" if len(dropped) == 0 else "see the table")
        lines += [f"\n**Gate, {name} positions** (exact match on the test instances of the "
                  f"largest training sizes, mean over seeds; a run passes at >= 0.95). "
                  f"{len(runs)} runs, {len(dropped)} dropped: {listed}\n", gate_table(frame)]
    for paper in papers:
        lines += paper.length_generalization(study, record)
    for task in dict.fromkeys(summary["variant"]):
        metrics = (("accuracy",) if task in seeds.NEGATIVE_CONTROLS
                   else ("exact_match", "accuracy"))
        for metric in metrics:
            what = "token accuracy" if metric == "accuracy" else "exact match"
            lines += [f"\n**{task}**: {what} by evaluation length (mean [95% interval] over "
                      f"gated seeds)\n", factor_table(summary, task, metric=metric)]
    if randomized is not None:
        for task in dict.fromkeys(randomized["variant"]):
            for kind in ("length_sampled", "length"):
                how = "sampled" if kind.endswith("sampled") else "contiguous"
                lines += [f"\n**{task}, randomized positions** ({how} positions at evaluation): "
                          f"exact match\n", factor_table(randomized, task, kind=kind)]
    return "\n".join(lines)
