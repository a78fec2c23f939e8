"""Retrieval against training steps: the statistics of a passkey curve read during training
(STUDY/passkey_curve.csv, src/train/passkey_curve.hpp; one row per run, read, length and depth).
notebooks/budget_curves.py draws and writes them; the finetune_budget claims table
(claims/studies/finetune_budget.py) judges its protocol's rows on them.

    reads = per_read(curve)        # one row per (run, seq_len, step): mean / min over depths
    table = summary(reads, 0.9)    # per (run, seq_len): first read at the gate, last read, area
"""
import numpy as np
import pandas as pd


def per_read(curve):
    """One row per (run, seq_len, step): mean / min greedy exact match over the depths, mean
    digit accuracy."""
    g = curve.groupby(["run", "seq_len", "step"], sort=False)
    out = g.agg(mean=("greedy_exact_match", "mean"), min=("greedy_exact_match", "min"),
                digit=("digit_accuracy", "mean")).reset_index()
    return out.sort_values(["run", "seq_len", "step"]).reset_index(drop=True)


def summary(reads, gate=0.9):
    """Per (run, seq_len) of per_read's table: the first read whose mean over the depths is
    >= gate and the first whose minimum is (NaN: never), the last read's step and values, and

        area_per_step = sum_i (step_i - step_{i-1}) * mean_i / step_last,   step_0 = 0,

    the area under the mean curve divided by its last step: each read weighted by the steps
    since the previous one, the first read's value standing from step 0."""
    rows = []
    for (run, seq_len), part in reads.groupby(["run", "seq_len"], sort=False):
        part = part.sort_values("step")
        steps = part["step"].to_numpy(dtype=float)
        mean = part["mean"].to_numpy()
        widths = np.diff(np.concatenate([[0.0], steps]))  # the steps each read stands for
        first = lambda ok: float(steps[np.argmax(ok)]) if ok.any() else np.nan  # noqa: E731
        rows.append({"run": run, "seq_len": seq_len, "gate": gate,
                     "first_mean_at_gate": first(mean >= gate),
                     "first_min_at_gate": first(part["min"].to_numpy() >= gate),
                     "last_step": steps[-1], "last_mean": mean[-1],
                     "last_min": part["min"].iloc[-1], "last_digit": part["digit"].iloc[-1],
                     "area_per_step": float((widths * mean).sum() / steps[-1])})
    return pd.DataFrame(rows)
