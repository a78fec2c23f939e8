"""Markdown tables of a study's results: the tables of its report page (`poslab report`), and a
study at a glance.

    /usr/bin/python3 notebooks/study_tables.py results/shaw_clip

Means over seeds, with the standard deviation over seeds after ±, over every run (the gate not
applied); the output says so above its tables (PLUS_MINUS), since the figures draw another
thing: the 95% t interval of the mean over the gated seeds. (The numbers the docs quote carry a
docs-truth marker naming the CSV cell they come from: tests/docs/check_docs.py.)
"""
import os

import pandas as pd

from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds as poslab_stats


PLUS_MINUS = ("Each cell: the mean over seeds ± the standard deviation over seeds, of every run "
              "(the gate not applied); the figures draw the 95% t interval of the mean over the "
              "seeds that pass the gate.")


def fmt(mean, std):
    return f"{mean:.3f}" if pd.isna(std) else f"{mean:.3f} ± {std:.3f}"


def table(frame, index, columns, value, prefix=""):
    stats = frame.groupby([index, columns])[value].agg(["mean", "std"])
    cols = sorted(frame[columns].unique())
    rows = list(dict.fromkeys(frame[index]))
    lines = [f"| {index} | " + " | ".join(f"{prefix}{c:g}" if not isinstance(c, str) else c
                                          for c in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for r in rows:
        cells = [fmt(*stats.loc[(r, c)]) if (r, c) in stats.index else "" for c in cols]
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def by_task(s):
    """(task, rows) per task: the task.name column when the study sweeps it, else the variant
    (length_generalization names each variant after its task), else one group (a language-model
    study such as state_reuse, whose summary has no task column)."""
    column = next((c for c in ("task.name", "variant") if c in s), None)
    if column is None:
        return [("lm", s)]
    return [(task, s[s[column] == task]) for task in dict.fromkeys(s[column])]


def main(study_dir):
    s = study_files.read_summary(study_dir)  # the protocol's gate applied
    name = os.path.basename(os.path.normpath(study_dir))
    print(PLUS_MINUS + "\n")
    if name.startswith("shaw_clip"):
        m = s[s["kind"] == "main"]
        print("validation loss (nats/byte) by clip k and table choice\n")
        print(table(m, "encoding.clip_k", "variant", "loss"))
    elif name.startswith("xl_terms"):
        m = s[s["kind"] == "memory"]
        print("validation loss (nats/byte) by variant and evaluation memory length\n")
        print(table(m, "variant", "mem_len", "loss", "memory "))
    elif name.startswith("state_reuse"):
        for task, rows in by_task(s):
            trained_column = "memory.mem_len" if "memory.mem_len" in rows else "mem_len"
            for trained in sorted(rows[rows["kind"] == "main"][trained_column].unique()):
                m = rows[(rows["kind"] == "memory")
                         & (rows["run"].isin(rows[(rows["kind"] == "main")
                                                  & (rows[trained_column] == trained)]["run"]))]
                print(f"\n{task}, trained with memory {trained:g}: loss by evaluation memory\n")
                print(table(m, "encoding.type" if "encoding.type" in m else "variant",
                            "mem_len", "loss", "memory "))
    elif name.startswith("length_generalization"):
        for kind in ("length", "length_sampled"):  # the randomized arm reads both ways
            for task, rows in by_task(s[s["kind"] == kind]):
                how = " (positions sampled as in training)" if kind == "length_sampled" else ""
                print(f"\n{task}: exact match by evaluation length / training length{how}\n")
                print(table(rows, "encoding.type", "factor", "exact_match", "x"))
    else:
        generic_tables(s)
    passkey_tables(s)
    return 0


def generic_tables(s):
    """Any other study: the loss of each condition (encoding, else variant) by evaluation length
    and by evaluation memory, where the study reads them, else at its main evaluation."""
    index = next((c for c in ("encoding.type", "variant") if c in s and s[c].nunique() > 1),
                 None)
    if index is None:
        s = s.assign(condition=s["study"] if "study" in s else "runs")
        index = "condition"
    shown = False
    # Runs trained at different lengths (a fine-tune at 4L beside its parent at L): lengths in
    # bytes, since one factor would be two lengths.
    in_bytes = poslab_stats.trained_at_several_lengths(s)
    length = ("seq_len", "", "evaluation length in bytes") if in_bytes else \
        ("factor", "x", "evaluation length / training length")
    for kind, column, prefix, what in (("length",) + length,
                                       ("memory", "mem_len", "memory ", "evaluation memory")):
        rows = s[s["kind"] == kind].dropna(subset=["loss"])
        if not rows.empty:
            print(f"\nloss by {index} and {what}\n")
            print(table(rows, index, column, "loss", prefix))
            shown = True
    main = s[s["kind"] == "main"].dropna(subset=["loss"])
    if not shown and not main.empty:
        print(f"\nloss at the main evaluation by {index}\n")
        print(table(main.assign(at="main"), index, "at", "loss"))


def passkey_tables(s):
    """Passkey retrieval (kind "passkey" rows): teacher-forced exact match and digit accuracy by
    depth of the key line and length factor, one table per condition (encoding / variant)."""
    p = s[s["kind"] == "passkey"]
    if p.empty:
        return
    conditions = [c for c in ("encoding.type", "variant") if c in p and p[c].nunique() > 1]
    groups = (p.groupby(conditions[0] if len(conditions) == 1 else conditions, sort=False)
              if conditions else [((), p)])
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(str(k) for k in key)
        for value, what in (("exact_match", "exact match (teacher-forced)"),
                            ("accuracy", "digit accuracy")):
            print(f"\npasskey {what}{': ' + name if name else ''}, by depth and length\n")
            print(table(part, "passkey_depth", "factor", value, "x"))
