"""The claims table of the sink-token study (notebooks/poslab_analysis/claims/studies/
sink_token.py and papers/xiao2023.py's sink_token, rows 7, 8 and 8b of
experiments/sink_token.protocol.md), on a planted study whose verdicts are known: summary.csv,
loss_by_stream_position.csv, sinks/<run>/sink_heads.csv and one resolved config, written by hand.

    /usr/bin/python3 tests/notebooks/test_claims_sink_token.py     (CTest: claims_sink_token)

What is planted, per seed s in 121..123 (w = (s - 122) x 0.01 gives every difference a spread,
so its 95% t interval is its mean +- 0.025):
  - the stream losses of each base: S = 4 at 1.40; window = S = 4 + d_window + w; S = 1 (the
    *_s1 child) = S = 4 + d_s1 + w; recompute = S = 4;
  - along the stream, 10 buckets of 64 bytes; the window's buckets alternate +-0.03 around its
    loss, so a difference with the window has the within-stream SE 0.03 / 3 = 0.0100, the others
    0.0000;
  - the sink diagnostic of each base run: 16 heads at 0.01 on key 0, one head at `mass`; its
    `sink` column is the diagnostic's own flag (mass >= 0.5), which the protocol does not use:
    a planted sink head of 0.12 or 0.15 is a sink head by the protocol (>= 0.1), not by that
    flag.
"""
import os
import sys
import tempfile
import unittest

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "notebooks"))
from poslab_analysis.claims import tables  # noqa: E402

SEEDS = (121, 122, 123)
BIGRAM = 2.4
S4_LOSS = 1.40
BUCKETS = 10


def run_rows(variant, seed, streams, main_loss=1.40, parent=""):
    """summary.csv rows of one run: its main row (the chunked test loss at 64) and one row per
    streaming mode, streams {kind: loss}; in_distribution_ok as the runner writes it (the run's
    own main loss against the bigram baseline)."""
    run = f"{variant},train.seed={seed}"
    base = {"study": "sink_token", "run": run, "train.seed": seed, "variant": variant,
            "parent": parent, "factor": 1.0, "mem_len": 0, "split": "test",
            "bigram_loss": BIGRAM, "unigram_loss": 3.1,
            "in_distribution_ok": "true" if main_loss < BIGRAM else "false"}
    rows = [{**base, "kind": "main", "seq_len": 64, "loss": main_loss}]
    rows += [{**base, "kind": kind, "seq_len": 640, "mem_len": 31, "loss": loss}
             for kind, loss in streams.items()]
    return rows


def bucket_rows(row, alternate):
    """loss_by_stream_position.csv rows of one summary stream row: 10 buckets of 64 bytes whose
    token-weighted mean is the row's loss; `alternate` +-amplitude around it, bucket by bucket."""
    return [{"run": row["run"], "train.seed": row["train.seed"], "variant": row["variant"],
             "parent": row["parent"], "kind": row["kind"], "factor": 1, "seq_len": 640,
             "mem_len": 31, "stream_sinks": 4, "stream_recent": 27, "stream_positions": "cache",
             "position_low": 64 * b, "position_high": 64 * (b + 1), "tokens": 64,
             "loss": row["loss"] + alternate * (1 if b % 2 else -1)} for b in range(BUCKETS)]


def sink_heads(mass):
    """sink_heads.csv of a 4-layer, 4-head model: every head at 0.01 on key 0 but layer 1 head
    2 at `mass`; `sink` as the diagnostic writes it (its own threshold, 0.5)."""
    return pd.DataFrame([{"layer": layer, "head": head,
                          "first_key_mass": mass if (layer, head) == (1, 2) else 0.01,
                          "uniform_mass": 0.0209524154, "ratio": 1.0,
                          "sink": "true" if (layer, head) == (1, 2) and mass >= 0.5 else "false",
                          "window": 64, "first_query": 32, "windows": 1000}
                         for layer in range(4) for head in range(4)])


STUDY_FILE = """[study]
name = "sink_token"
[base.model]
n_layers = 4
[base.train]
seq_len = 64
steps = 8000
[base.eval]
split = "test"
stream_length = 19200
stream_sinks = 4
stream_recent = 27
[[variant]]
name = "vanilla4"
set = {}
"""


def write_study(directory, d_window=None, d_s1=None, vanilla_mass=None, sink_mass=None,
                failing=()):
    """A planted study in directory/sink_token. d_window / d_s1 {base: the mean difference};
    vanilla_mass / sink_mass {seed: the largest head's mass on key 0}; `failing`: (base, seed)
    whose main loss is above the bigram baseline (its *_s1 child's own main row passes)."""
    d_window = {"vanilla4": 0.5, "sink4": 0.3, **(d_window or {})}
    d_s1 = {"vanilla4": 0.0, "sink4": -0.01, **(d_s1 or {})}
    masses = {"vanilla4": {s: 0.05 for s in SEEDS} | (vanilla_mass or {}),
              "sink4": {s: 0.15 for s in SEEDS} | (sink_mass or {})}
    study = os.path.join(directory, "sink_token")
    os.makedirs(study)
    with open(os.path.join(study, "study.toml"), "w") as f:
        f.write(STUDY_FILE)
    rows, buckets = [], []
    for base in ("vanilla4", "sink4"):
        for seed in SEEDS:
            w = (seed - 122) * 0.01
            main = 3.0 if (base, seed) in failing else 1.40
            rows += run_rows(base, seed, {"stream_sinks": S4_LOSS,
                                          "stream_window": S4_LOSS + d_window[base] + w,
                                          "stream_recompute": S4_LOSS}, main_loss=main)
            rows += run_rows(base + "_s1", seed, {"stream_sinks": S4_LOSS + d_s1[base] + w},
                             parent=f"{base},train.seed={seed}")
            run = f"{base}__train.seed-{seed}"
            os.makedirs(os.path.join(study, "sinks", run))
            sink_heads(masses[base][seed]).to_csv(
                os.path.join(study, "sinks", run, "sink_heads.csv"), index=False)
    summary = pd.DataFrame(rows)
    summary.to_csv(os.path.join(study, "summary.csv"), index=False)
    for _, row in summary[summary["kind"] != "main"].iterrows():
        buckets += bucket_rows(row, 0.03 if row["kind"] == "stream_window" else 0.0)
    pd.DataFrame(buckets).to_csv(os.path.join(study, "loss_by_stream_position.csv"), index=False)
    return study


def rows_of(table):
    """{row number ("7", "8", "8b"): (measured cell, verdict cell)}."""
    out = {}
    for line in table.splitlines():
        if line.startswith("| 7.") or line.startswith("| 8"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0].split(".")[0]] = (cells[3], cells[-1])
    return out


class ClaimsSinkToken(unittest.TestCase):
    def table(self, **planted):
        with tempfile.TemporaryDirectory() as d:
            return tables.claims_table(write_study(d, **planted))

    def test_row_7_is_inconclusive_without_a_vanilla_sink_head(self):
        # window minus S = 4 is +0.5 [+0.475, +0.525]: the interval alone would agree; every
        # vanilla4 head stays below 0.1 (largest 0.05), so the claim's premise is not shown.
        table = self.table()
        measured, v7 = rows_of(table)["7"]
        self.assertEqual(v7, "inconclusive (no sink head in any gated seed of vanilla4 (seed "
                             "121: largest mass on key 0 0.050; seed 122: largest mass on key 0 "
                             "0.050; seed 123: largest mass on key 0 0.050))")
        self.assertIn("window minus S = 4: +0.500 [+0.475, +0.525], n=3", measured)
        self.assertIn("seed 121: 0 of 16 heads >= 0.1 (largest 0.050", measured)

    def test_row_7_judged_when_one_vanilla_seed_has_a_sink_head(self):
        # One head of 0.12 in seed 122 (a sink head by the protocol, not by the 0.5 flag).
        measured, v7 = rows_of(self.table(vanilla_mass={122: 0.12}))["7"]
        self.assertEqual(v7, "agree")
        self.assertIn("seed 122: 1 of 16 heads >= 0.1 (largest 0.120, layer 1 head 2", measured)
        # The same sink head, a window that costs +0.03 [+0.005, +0.055]: below COLLAPSE.
        _, v7 = rows_of(self.table(vanilla_mass={122: 0.12}, d_window={"vanilla4": 0.03}))["7"]
        self.assertEqual(v7, "disagree")

    def test_row_8_one_sink_is_enough_or_not(self):
        # sink4, S = 1 minus S = 4: -0.01 [-0.035, +0.015], upper end <= 0.02: agree.
        measured, v8 = rows_of(self.table())["8"]
        self.assertEqual(v8, "agree")
        self.assertIn("sink4, S = 1 minus S = 4: -0.010 [-0.035, +0.015], n=3 (within-stream SE "
                      "per seed 0.0000, 0.0000, 0.0000, 64-byte buckets)", measured)
        # +0.06 [+0.035, +0.085]: S = 1 is worse than S = 4 by more than ENOUGH: disagree.
        _, v8 = rows_of(self.table(d_s1={"sink4": 0.06}))["8"]
        self.assertEqual(v8, "disagree")

    def test_row_8b_collapse_with_its_direction(self):
        rows = rows_of(self.table())
        measured, v8b = rows["8b"]
        # window minus S = 1 = 0.3 - (-0.01) = +0.31, the same w in both cancels: [+0.31, +0.31].
        self.assertEqual(v8b, "agree (window worse than S = 1: interval above 0)")
        self.assertIn("sink4, window minus S = 1: +0.310 [+0.310, +0.310], n=3 (within-stream SE "
                      "per seed 0.0100, 0.0100, 0.0100, 64-byte buckets)", measured)
        _, v8b = rows_of(self.table(d_window={"sink4": 0.03}))["8b"]
        self.assertEqual(v8b, "disagree (window worse than S = 1: interval above 0)")

    def test_rows_8_and_8b_need_a_sink_head_in_every_gated_seed(self):
        rows = rows_of(self.table(sink_mass={123: 0.08}))
        reason = ("inconclusive (no sink head in a gated seed of sink4 (seed 123: largest mass "
                  "on key 0 0.080))")
        self.assertEqual(rows["8"][1], reason)
        self.assertEqual(rows["8b"][1], reason)

    def test_the_gate_drops_a_failing_seed_with_its_child(self):
        # sink4 at seed 123 fails the gate; its child sink4_s1 (whose own main row passes) goes
        # with it. That seed also lacks a sink head: once dropped, rows 8 and 8b are judged on
        # the two gated seeds (S = 1 minus S = 4: +0.19, +0.20; window minus S = 1: +0.30).
        table = self.table(sink_mass={123: 0.08}, failing=(("sink4", 123),),
                           d_s1={"sink4": 0.2}, d_window={"sink4": 0.5})
        self.assertIn("12 runs, gate dropped 2 (sink4,train.seed=123 (loss at L 3.000 not below "
                      "the bigram baseline 2.400); sink4_s1,train.seed=123 (its parent "
                      "sink4,train.seed=123 was dropped))", table)
        rows = rows_of(table)
        self.assertEqual(rows["8"][1], "disagree")
        self.assertIn("sink4, S = 1 minus S = 4: +0.195 [+0.131, +0.259], n=2", rows["8"][0])
        self.assertEqual(rows["8b"][1], "agree (window worse than S = 1: interval above 0)")
        self.assertNotIn("seed 123", rows["8"][0])  # its diagnostic is not shown either
        self.assertIn("n=3", rows["7"][0])  # vanilla4 keeps its three seeds

    def test_the_regime_is_read_from_the_study_file(self):
        table = self.table()
        self.assertIn("here: 4 layers, L = 64, 8,000 steps, cache 32 = L/2, test stream 19,200 "
                      "bytes; the paper: Llama-2-7B, cache 4,096", table)

    def test_the_pilot_of_the_same_name_has_no_claims_table(self):
        # results/pilots/sink_token (other variants: depth4_vanilla, ...) is not the study.
        self.assertIsNone(tables.kind_of("results/pilots/sink_token"))
        self.assertEqual(tables.kind_of("results/sink_token"), "sink_token")
        self.assertEqual(tables.kind_of("/tmp/x/sink_token-smoke/"), "sink_token")


if __name__ == "__main__":
    unittest.main()
