"""Retrieval against the fine-tuning budget, the arms side by side (issue 48, item 3): the passkey
curves read during training (STUDY/passkey_curve.csv, src/train/passkey_curve.hpp) of several
runs in one panel per length in bytes, so that "which arm retrieves at sL after how many steps"
reads off one picture. (notebooks/passkey_curve.py draws each run with its depths instead.)

    /usr/bin/python3 notebooks/budget_curves.py STUDY_DIR [--runs REGEX] [--extra LABEL=CSV ...]
                                                 [--until STEP] [--gate G] [--out NAME]
    /usr/bin/python3 notebooks/budget_curves.py --self-test

--extra adds the curve of one run from its own RUN/passkey_curve.csv (a run outside the study,
or one still training, whose rows the study's file does not hold yet), drawn as LABEL.
Writes into STUDY_DIR:
  NAME.png / .svg     one panel per length: greedy exact match averaged over the depths (solid)
                      and its minimum over the depths (dotted) against the training step, one
                      colour per run; the gate dashed
  NAME.csv            per run, length and read: mean and min greedy exact match over the depths,
                      mean digit accuracy
  NAME_summary.csv    per run and length: the first read with mean >= gate, the first with
                      min >= gate (NaN: never), the last read's step and values, and the area
                      under the mean curve divided by its last step (the mean of the reads,
                      each weighted by the steps since the previous one, starting from step 0
                      with the first read's value)
NAME defaults to budget_curves.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# The curve's statistics live in the analysis package, where the finetune_budget claims table
# reads them too.
from poslab_analysis.statistics.budget_curve import per_read, summary  # noqa: E402


def draw(reads, out_base, gate=0.9):
    lengths = sorted(reads["seq_len"].unique())
    runs = list(dict.fromkeys(reads["run"]))
    fig, axes = plt.subplots(1, len(lengths), squeeze=False, sharey=True,
                             figsize=(4.6 * len(lengths), 3.8))
    colours = plt.get_cmap("tab10")
    for c, L in enumerate(lengths):
        ax = axes[0][c]
        for i, run in enumerate(runs):
            part = reads[(reads["run"] == run) & (reads["seq_len"] == L)]
            if part.empty:
                continue
            ax.plot(part["step"], part["mean"], color=colours(i % 10), lw=1.6, label=run)
            ax.plot(part["step"], part["min"], color=colours(i % 10), lw=1.0, ls=":")
        ax.axhline(gate, color="grey", ls="--", lw=0.8)
        ax.set_title(f"read at {L} bytes", fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("greedy exact match\n(solid: mean over depths, dotted: min)", fontsize=8)
    handles = [plt.Line2D([], [], color=colours(i % 10), lw=1.6) for i in range(len(runs))]
    fig.legend(handles, runs, fontsize=7, loc="center right")  # every run, whatever it reads
    fig.suptitle("passkey retrieval during training, validation split", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1 - 2.3 / fig.get_figwidth(), 1))
    paths = [out_base + ".png", out_base + ".svg"]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def self_test():
    """Two runs, two depths, reads at uneven steps: known means, minimums, first crossings and
    areas (each read weighted by the steps since the previous one)."""
    rows = []
    plan = {"a": {0.0: [0.0, 1.0, 1.0, 1.0], 1.0: [0.0, 0.6, 0.8, 1.0]},
            "b": {0.0: [0.5, 0.5, 0.5, 0.5], 1.0: [0.5, 0.5, 0.5, 0.5]}}
    for run, by_depth in plan.items():
        for depth, values in by_depth.items():
            for i, v in enumerate(values):
                rows.append({"run": run, "step": [100, 200, 400, 800][i], "seq_len": 256,
                             "depth": depth,
                             "greedy_exact_match": v, "digit_accuracy": v})
    reads = per_read(pd.DataFrame(rows))
    s = summary(reads).set_index("run")
    assert s.loc["a", "first_mean_at_gate"] == 400, s   # means 0, 0.8, 0.9, 1.0
    assert s.loc["a", "first_min_at_gate"] == 800, s    # mins 0, 0.6, 0.8, 1.0
    # widths 100, 100, 200, 400: (0 * 100 + 0.8 * 100 + 0.9 * 200 + 1.0 * 400) / 800 = 0.825
    assert abs(s.loc["a", "area_per_step"] - 0.825) < 1e-12, s
    assert np.isnan(s.loc["b", "first_mean_at_gate"]) and s.loc["b", "area_per_step"] == 0.5
    print("budget_curves.py self-test: means, minimums, first crossings and areas: ok")


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("study_dir", nargs="?",
                        help="a study's results folder holding passkey_curve.csv (`poslab run` "
                             "collects it); the figure, NAME.csv and NAME_summary.csv go there")
    parser.add_argument("--runs", default=None, metavar="REGEX",
                        help="only the runs whose name (the csv's `run` column, e.g. "
                             "'ft_pi_s4,train.seed=142') matches this regular expression; "
                             "default: every run")
    parser.add_argument("--extra", action="append", default=[], metavar="LABEL=CSV",
                        help="also draw one run's own RUN/passkey_curve.csv as LABEL (a run "
                             "outside the study or still training); repeatable")
    parser.add_argument("--until", type=float, default=None, metavar="STEP",
                        help="only the reads at steps <= STEP (e.g. an --extra run trained "
                             "longer than the study's fine-tunes, cut to their budget); default: "
                             "every read")
    parser.add_argument("--gate", type=float, default=0.9,
                        help="the retrieval level drawn dashed and used for the first crossings (default 0.9)")
    parser.add_argument("--out", default="budget_curves", metavar="NAME",
                        help="file name (no folder) of the outputs, written into STUDY_DIR (default budget_curves)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the statistics on planted curves and exit")
    args = parser.parse_args(argv[1:])
    if args.self_test:
        self_test()
        return 0
    if not args.study_dir:
        parser.error("give STUDY_DIR (or --self-test)")
    if os.path.basename(args.out) != args.out or not args.out:
        parser.error(f"--out {args.out!r}: a file name without a directory (written into STUDY_DIR)")
    parts = []
    path = os.path.join(args.study_dir, "passkey_curve.csv")
    if os.path.exists(path):
        curve = pd.read_csv(path)
        if args.runs is not None:
            curve = curve[curve["run"].str.contains(args.runs, regex=True)]
        parts.append(curve)
    for extra in args.extra:
        label, sep, csv = extra.partition("=")
        if not sep or not label or not os.path.exists(csv):
            parser.error(f"--extra {extra!r}: give LABEL=PATH of an existing passkey_curve.csv")
        part = pd.read_csv(csv)
        part.insert(0, "run", label)
        parts.append(part)
    if not parts or all(p.empty for p in parts):
        raise SystemExit(f"budget_curves.py: error: no curve rows ({path} missing or no run "
                         "matches, and no --extra)")
    rows = pd.concat(parts, ignore_index=True)
    if args.until is not None:
        rows = rows[rows["step"] <= args.until]
        if rows.empty:
            raise SystemExit(f"budget_curves.py: error: no read at a step <= {args.until:g}")
    reads = per_read(rows)
    base = os.path.join(args.study_dir, args.out)
    reads.to_csv(base + ".csv", index=False)
    summary(reads, args.gate).to_csv(base + "_summary.csv", index=False)
    print(base + ".csv")
    print(base + "_summary.csv")
    for p in draw(reads, base, args.gate):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
