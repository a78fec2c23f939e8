"""Passkey retrieval against training steps (issue 48): the curves that
`train.eval_passkey_instances` writes into RUN/passkey_curve.csv (src/train/passkey_curve.hpp),
gathered by `poslab run` into STUDY/passkey_curve.csv (one row per run, read and cell).

    /usr/bin/python3 notebooks/passkey_curve.py STUDY_DIR [--runs REGEX] [--metric M] [--gate G]
                                                [--out NAME] [--columns factor|seq_len]
    /usr/bin/python3 notebooks/passkey_curve.py --self-test

Writes, into STUDY_DIR:
  passkey_curve.png / .svg       one row of panels per run, one column per length (factor of the
                                 run's training length): the metric against the training step,
                                 a thin line per depth of the key line, the minimum over the
                                 depths thick, the gate dashed, the step where it is reached
                                 marked
  passkey_curve_crossings.csv    per run and length: `reached`, the first read at which the metric
                                 is >= the gate at EVERY depth; `held`, the first read from which
                                 it stays so at every later read; the last read's step, its
                                 minimum and mean over the depths
--runs keeps the runs whose name matches REGEX (re.search). The metric is
greedy_exact_match (the study gate's) unless --metric names another column of the curve
(exact_match, digit_accuracy); the gate is 0.9 unless --gate says otherwise. --out NAME writes
NAME.png / .svg and NAME_crossings.csv into STUDY_DIR instead (say, a second metric's figure
beside the first). --columns seq_len gives one column per length in bytes instead of per factor
(for runs trained at different lengths, whose factors name different lengths).
"""
import argparse
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

METRICS = ("greedy_exact_match", "exact_match", "digit_accuracy")


def read_curve(study_dir, runs=None):
    """STUDY/passkey_curve.csv, the runs matching the regex `runs` (all if None)."""
    path = os.path.join(study_dir, "passkey_curve.csv")
    if not os.path.exists(path):
        raise SystemExit(f"passkey_curve.py: error: {path} does not exist (no finished run of the "
                         "study read retrieval during training: train.eval_passkey_instances)")
    curve = pd.read_csv(path)
    if runs is not None:
        curve = curve[curve["run"].str.contains(runs, regex=True)]
        if curve.empty:
            raise SystemExit(f"passkey_curve.py: error: no run of {path} matches --runs {runs!r}")
    return curve


def crossings(curve, metric="greedy_exact_match", gate=0.9):
    """One row per (run, factor): where the minimum over the depths of `metric` first reaches
    `gate` (reached), where it reaches it for good (held: every later read too), and the last
    read. NaN where never."""
    rows = []
    for (run, factor), part in curve.groupby(["run", "factor"], sort=False):
        by_step = part.groupby("step")[metric]
        low = by_step.min().sort_index()      # the worst depth at each read
        mean = by_step.mean().sort_index()
        ok = low >= gate
        reached = ok.idxmax() if ok.any() else np.nan
        # held: the first step of the final run of reads that are all >= gate
        failing = ok[~ok]
        if not ok.iloc[-1]:
            held = np.nan
        elif failing.empty:
            held = ok.index[0]
        else:
            held = ok.index[ok.index > failing.index[-1]][0]
        rows.append({"run": run, "factor": factor, "seq_len": part["seq_len"].iloc[0],
                     "metric": metric, "gate": gate, "reached": reached, "held": held,
                     "last_step": low.index[-1], "last_min": low.iloc[-1],
                     "last_mean": mean.iloc[-1]})
    return pd.DataFrame(rows)


def draw(curve, found, out_base, metric="greedy_exact_match", gate=0.9, columns="factor"):
    runs = list(dict.fromkeys(curve["run"]))
    factors = sorted(curve[columns].unique())  # the column values: factors or lengths
    fig, axes = plt.subplots(len(runs), len(factors), squeeze=False, sharey=True,
                             figsize=(4.2 * len(factors), 2.3 * len(runs) + 0.6))
    depths = sorted(curve["depth"].unique())
    colours = plt.get_cmap("viridis")
    for r, run in enumerate(runs):
        for f, factor in enumerate(factors):
            ax = axes[r][f]
            part = curve[(curve["run"] == run) & (curve[columns] == factor)]
            if part.empty:
                ax.set_visible(False)
                continue
            run_factor = part["factor"].iloc[0]
            for i, depth in enumerate(depths):
                d = part[part["depth"] == depth].sort_values("step")
                ax.plot(d["step"], d[metric], lw=0.8, color=colours(i / max(1, len(depths) - 1)),
                        label=f"depth {depth:g}")
            low = part.groupby("step")[metric].min()
            ax.plot(low.index, low.values, color="black", lw=2, label="min over depths")
            ax.axhline(gate, color="grey", ls="--", lw=0.8)
            row = found[(found["run"] == run) & (found["factor"] == run_factor)].iloc[0]
            if not np.isnan(row["reached"]):
                ax.axvline(row["reached"], color="red", lw=0.8)
            if np.isnan(row["reached"]):
                when = f"never >= {gate:g} (last min {row['last_min']:.2f})"
            else:
                held = "not held" if np.isnan(row["held"]) else f"held from {row['held']:,.0f}"
                when = f">= {gate:g} first at {row['reached']:,.0f}, {held}"
            ax.set_title(f"{run}\n{part['seq_len'].iloc[0]} bytes ({run_factor:g}x): {when}",
                         fontsize=7.5)
            ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
            if r == len(runs) - 1:
                ax.set_xlabel("training step")
            if f == 0:
                ax.set_ylabel(metric.replace("_", " "), fontsize=8)
    axes[0][0].legend(fontsize=6, loc="lower right")
    fig.suptitle("passkey retrieval during training (validation split; red: first read at "
                 f">= {gate:g} at every depth)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    paths = [out_base + ".png", out_base + ".svg"]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def self_test():
    """A planted curve: two depths that reach 0.9 at different reads, then one dips and recovers,
    so reached (first read with both >= 0.9) and held (from the recovery on) differ; a second
    run that never reaches it; a third that reaches it at its first read and keeps it."""
    rows = []
    plan = {"a": {0.0: [0.1, 0.95, 0.95, 0.5, 1.0, 1.0], 1.0: [0.0, 0.5, 0.9, 0.9, 0.92, 1.0]},
            "b": {0.0: [0.0, 0.2, 0.8, 0.89, 0.89, 0.89], 1.0: [0.0, 0.9, 0.9, 0.9, 0.9, 0.95]},
            "c": {0.0: [1.0] * 6, 1.0: [0.9] * 6}}
    for run, by_depth in plan.items():
        for depth, values in by_depth.items():
            for i, v in enumerate(values):
                rows.append({"run": run, "step": 100 * (i + 1), "factor": 1, "seq_len": 64,
                             "depth": depth, "greedy_exact_match": v})
    found = crossings(pd.DataFrame(rows)).set_index("run")
    assert found.loc["a", "reached"] == 300, found
    assert found.loc["a", "held"] == 500, found   # the dip at 400 (depth 0: 0.5)
    assert found.loc["a", "last_min"] == 1.0 and found.loc["a", "last_step"] == 600
    assert np.isnan(found.loc["b", "reached"]) and np.isnan(found.loc["b", "held"])
    assert abs(found.loc["b", "last_mean"] - 0.92) < 1e-12
    assert found.loc["c", "reached"] == 100 and found.loc["c", "held"] == 100
    print("passkey_curve.py self-test: reached / held / last read of three planted runs: ok")


def main(argv):
    # The whole docstring is the help: it says what each option does and what is written.
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study_dir", nargs="?")
    parser.add_argument("--runs", default=None)
    parser.add_argument("--metric", default="greedy_exact_match", choices=METRICS)
    parser.add_argument("--gate", type=float, default=0.9)
    parser.add_argument("--out", default="passkey_curve")
    parser.add_argument("--columns", default="factor", choices=("factor", "seq_len"))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv[1:])
    if args.self_test:
        self_test()
        return 0
    if not args.study_dir:
        parser.error("give STUDY_DIR (or --self-test)")
    curve = read_curve(args.study_dir, args.runs)
    found = crossings(curve, args.metric, args.gate)
    if os.path.basename(args.out) != args.out or not args.out:
        parser.error(f"--out {args.out!r}: a file name without a directory (written into STUDY_DIR)")
    table = os.path.join(args.study_dir, args.out + "_crossings.csv")
    found.to_csv(table, index=False)
    print(table)
    for path in draw(curve, found, os.path.join(args.study_dir, args.out), args.metric,
                     args.gate, args.columns):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
