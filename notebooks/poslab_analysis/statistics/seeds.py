"""The statistics of poslab's studies: means over seeds with 95% t intervals, the in-distribution
gate, and paired differences between two conditions. `poslab plot STUDY` writes
STUDY/summary_ci.csv with write_summary_ci.

What a number in a claims table means
-------------------------------------
A study trains every condition (task x encoding x variant ...) with several seeds and evaluates
every run on the same held-out instances or bytes. For one condition and one evaluation setting:

    mean      the mean over seeds of the run's metric (each run's metric is itself a mean over
              its instances or tokens)
    ci_low,   the 95% t interval of that mean over seeds:
    ci_high       mean +- t_{0.975, n-1} * sd / sqrt(n)
              It contains the seed-to-seed spread (initialisation, data order), the variation a
              reader who reruns the study will see. It is wide with 3 seeds (t = 4.30): that is
              honest, not a defect.
    n         seeds that count (after the gate, see below)

The sampling error of one run's evaluation is reported beside it (summary.csv's Wilson interval
per run, `sampling_halfwidth` here: the mean over seeds of its half-width), so a reader can check
that the evaluation set is large enough for that error to be small beside the seed spread.

The gate: a comparison is made only between models that learned the task where it was trained
(summary.csv's in_distribution_ok, computed by `poslab train`). A run that fails it is dropped
from every setting of its condition, and `dropped` says how many were. Conditions left with fewer
than 3 seeds are marked (`few_seeds`). Negative controls (tasks no encoding is expected to learn,
such as parity) are never gated: pass them in `ungated_tasks`.

Paired differences: to say "A beats B", compare the two on the same seeds and the same evaluation
instances, d_s = metric_A(seed s) - metric_B(seed s), and give the mean of d with its 95% t
interval. The pairing removes what the two runs of a seed share (the evaluation data, and where
the code makes them equal, the data order), so it is tighter than comparing two intervals.

Only the Python standard library, pandas and numpy (Debian packages) are used; the t quantiles
are tabulated below so that scipy is not needed.
"""
import math
import os

import numpy as np
import pandas as pd

from poslab_analysis.reading import study_files

# t_{0.975, df} for df = 1..30; beyond that the normal quantile is close enough.
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]

SEED_COLUMN = "train.seed"
METRICS = ["loss", "accuracy", "exact_match", "passkey_greedy_exact_match"]
# Columns that describe an evaluation setting rather than a condition (passkey_depth: the depth
# of the key line in a passkey row, kind "passkey"; present only in studies that evaluate it).
SETTING_COLUMNS = ["kind", "factor", "seq_len", "mem_len", "split", "passkey_depth"]
# Columns of summary.csv that are measurements, not part of what a run is.
MEASUREMENTS = {"study", "run", "loss", "accuracy", "exact_match", "exact_match_ci_low",
                "exact_match_ci_high", "instances", "tokens", "peak_memory_mb", "tokens_per_second",
                "in_distribution_ok", "unigram_loss", "bigram_loss", "train_loss",
                "train_tokens_per_second", "train_seconds", "commit", SEED_COLUMN,
                "passkey_greedy_exact_match",
                "started", "finished",  # when the run started and finished (UTC)
                "parent"}  # a stage-2 run's parent run: it names the seed, not a condition
NEGATIVE_CONTROLS = ("parity",)


def trained_lengths(rows):
    """The length each row's run was trained at: its evaluation length over its factor."""
    return (rows["seq_len"] / rows["factor"]).round()


def trained_at_several_lengths(rows):
    """Were these rows' runs trained at different lengths (ALiBi at L beside sinusoidal at 2L, a
    fine-tune at 4L beside its parent at L)? Then one factor names two lengths: draw and tabulate
    them in bytes."""
    return "factor" in rows and trained_lengths(rows).nunique() > 1


def t975(df):
    """The 0.975 quantile of Student's t with df degrees of freedom."""
    if df < 1:
        return float("nan")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def t_interval(values):
    """(mean, low, high, n) of the 95% t interval of the mean of `values` (NaNs dropped)."""
    x = np.asarray([v for v in values if v == v], dtype=float)
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(x.mean())
    if n == 1:
        return mean, float("nan"), float("nan"), 1
    half = t975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half, n


# Metrics that live in [0, 1] (a t interval can leave it; the score cannot), and the loss (>= 0).
BOUNDED_METRICS = ("accuracy", "exact_match")


def mean_points(frame, x, y):
    """One curve's points, as both figure backends draw them (figures/plots.py's band,
    figures/charts.py's rows): a DataFrame [x, mean, low, high, n], one row per value of x in
    increasing order, with the mean of y over the rows (seeds) at that x and its 95% t interval
    (t_interval). A point of one seed has its band at the point (low = high = mean); a point of
    none has n = 0 and NaN. The band is clipped to what y can be: [0, 1] for a score, >= 0 for a
    loss."""
    points = []
    for value, group in frame.groupby(x):
        mean, low, high, n = t_interval(group[y])
        if n == 1:
            low = high = mean
        if n > 1 and y in BOUNDED_METRICS:
            low, high = max(low, 0.0), min(high, 1.0)
        elif n > 1 and y == "loss":
            low = max(low, 0.0)
        points.append((value, mean, low, high, n))
    return pd.DataFrame(points, columns=[x, "mean", "low", "high", "n"]).sort_values(x)


def condition_columns(summary):
    """The columns that name a condition: the study's axes and variant, except the seed."""
    return [c for c in summary.columns if c not in MEASUREMENTS and c not in SETTING_COLUMNS]


def gate_passed(summary, ungated_tasks=NEGATIVE_CONTROLS):
    """Boolean Series: does the row's run pass the gate? Runs without a gate value (streams such
    as long_range), and the negative-control tasks, pass."""
    if "in_distribution_ok" not in summary:
        return pd.Series(True, index=summary.index)
    value = summary["in_distribution_ok"].astype(str).str.lower()
    passed = value != "false"
    task = task_column(summary)
    if task:
        passed |= summary[task].isin(ungated_tasks)
    return passed


def task_column(summary):
    """The column that names the task: task.name when the study sweeps it, else the variant
    (studies such as length_generalization give each task its own variant, named after it)."""
    for column in ("task.name", "variant"):
        if column in summary:
            return column
    return None


def aggregate(summary, ungated_tasks=NEGATIVE_CONTROLS):
    """One row per (condition, evaluation setting): mean and 95% t interval over the seeds that
    pass the gate, for loss, accuracy and exact match; n, dropped, few_seeds."""
    keys = condition_columns(summary) + [c for c in SETTING_COLUMNS if c in summary]
    summary = summary.copy()
    summary["_passed"] = gate_passed(summary, ungated_tasks)
    if "exact_match_ci_high" in summary:
        summary["_sampling"] = (summary["exact_match_ci_high"] - summary["exact_match_ci_low"]) / 2
    rows = []
    for key, group in summary.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        kept = group[group["_passed"]]
        row = dict(zip(keys, key))
        row["n"] = int(kept[SEED_COLUMN].nunique()) if SEED_COLUMN in kept else len(kept)
        row["dropped"] = int(len(group) - len(kept))
        row["few_seeds"] = row["n"] < 3
        for metric in METRICS:
            if metric not in group:
                continue
            mean, low, high, _ = t_interval(kept[metric])
            row[f"{metric}_mean"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = mean, low, high
        if "_sampling" in kept:
            row["sampling_halfwidth"] = float(kept["_sampling"].mean()) if len(kept) else float("nan")
        if "instances" in kept:
            row["instances"] = float(kept["instances"].mean()) if len(kept) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def paired_difference(summary, metric, where_a, where_b, setting):
    """Mean of metric_A - metric_B over the seeds both have, with its 95% t interval.

    where_a, where_b: dicts {column: value} selecting the two conditions; setting: dict selecting
    the evaluation setting (e.g. {"kind": "length", "factor": 2.0}). Returns
    (mean, low, high, n)."""
    def pick(where):
        rows = summary
        for column, value in {**where, **setting}.items():
            rows = rows[rows[column] == value]
        return rows.set_index(SEED_COLUMN)[metric]
    a, b = pick(where_a), pick(where_b)
    common = a.index.intersection(b.index)
    return t_interval((a[common] - b[common]).tolist())


def write_summary_ci(study_dir, ungated_tasks=NEGATIVE_CONTROLS):
    """Writes STUDY_DIR/summary_ci.csv from STUDY_DIR/summary.csv; returns its path."""
    summary = study_files.read_summary(study_dir)  # the protocol's gate applied
    table = aggregate(summary, ungated_tasks)
    path = os.path.join(study_dir, "summary_ci.csv")
    table.to_csv(path, index=False, float_format="%.6g")
    return path



def paired(a, b):
    """Paired over seeds: the t interval of a - b over the seeds both Series (indexed by seed)
    have."""
    common = a.index.intersection(b.index)
    return t_interval((a[common] - b[common]).tolist())


def proportion_interval(values):
    """The interval of a proportion's mean over seeds (passkey retrieval, say): the 95% t interval
    of t_interval with its ends clipped to [0, 1], the values the proportion can take. It stays an
    interval over seeds (a rerun draws new seeds; the seed-to-seed spread of retrieval is far wider
    than the sampling error of one run's 250 answers, whose Wilson interval would hide it);
    clipping moves no verdict whose threshold lies in [0, 1]. docs/06, "Intervals of a
    proportion"."""
    return clipped(t_interval(values), 0.0, 1.0)


def paired_proportion(a, b):
    """paired(a, b) for a proportion: the difference of two proportions lies in [-1, 1]."""
    return clipped(paired(a, b), -1.0, 1.0)


def clipped(interval, low, high):
    """(mean, low, high, n) with its ends clipped to [low, high] (NaN ends stay NaN)."""
    mean, lo, hi, n = interval
    if n < 2:
        return interval
    return mean, max(lo, low), min(hi, high), n
