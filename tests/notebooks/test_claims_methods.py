"""The claims table of the second context-extension study
(notebooks/poslab_analysis/claims/studies/context_extension_methods.py and the papers' rows
ding2024, jin2024, su2023, chiang2022, xiao2023, zhu2023), on a planted study whose answers are
known: the protocol's gate (the streaming rows need only the loss gate) and each row's verdict.

    /usr/bin/python3 tests/notebooks/test_claims_methods.py     (CTest: claims_methods)
"""
import os
import sys
import tempfile
import unittest

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "notebooks"))
from poslab_analysis.claims import tables  # noqa: E402
from poslab_analysis.reading import study_files  # noqa: E402

SEEDS = (71, 72, 73)
BIGRAM = 2.4
UNIGRAM = 3.1
L = 64
LENGTHS = (64, 128, 256, 512, 1024)
STAGE1 = ("rope64", "rope64_sink")


def run_rows(variant, seed, losses, passkeys=None, streams=None, main_len=L, parent=None,
             train=(0.0, 0.0)):
    """Summary rows of one run: losses {length: loss}; passkeys {length: exact match, the same at
    the five depths}; streams {mode: loss}; a seed-dependent wiggle gives intervals a width."""
    run = f"{variant},train.seed={seed}"
    if parent is None:
        parent = "" if variant in STAGE1 else f"rope64,train.seed={seed}"
    wiggle = (seed - 72) * 0.01
    rows = []

    def row(kind, length, **extra):
        rows.append({"study": "context_extension_methods", "run": run, "train.seed": seed,
                     "variant": variant, "parent": parent, "kind": kind, "seq_len": length,
                     "factor": length / main_len, "bigram_loss": BIGRAM, "unigram_loss": UNIGRAM, "in_distribution_ok":
                     "true", "train_seconds": train[0], "train_tokens_per_second": train[1],
                     "tokens_per_second": 1000.0, **extra})
    row("main", main_len, loss=losses[main_len] + wiggle)
    for length, loss in losses.items():
        row("length", length, loss=loss + wiggle)
    for length, p in (passkeys or {}).items():
        for depth in (0, 0.25, 0.5, 0.75, 1):
            row("passkey", length, passkey_depth=depth,
                passkey_greedy_exact_match=min(1.0, max(0.0, p + wiggle)))
    for mode, (sinks, loss) in (streams or {}).items():
        row(f"stream_{mode}", 6400, loss=loss + wiggle, stream_sinks=sinks)
    return rows


def planted_summary(sink_passkey={}, rope_passkey={}, se16_passkey={64: 0.0, 128: 0.0},
                    ft256_at_4x=1.33):
    """Every rule's answer is known (the comments say which verdict each planted value gives).
    sink_passkey / rope_passkey {seed: passkey at L} override 1.0 (the gate's (b))."""
    rows = []
    flat = dict(zip(LENGTHS, (1.30, 1.31, 1.32, 1.33, 1.60)))
    for seed in SEEDS:
        rows += run_rows("rope64", seed, dict(zip(LENGTHS, (1.30, 1.9, 3.0, 3.6, 4.0))),
                         {64: rope_passkey.get(seed, 1.0), 128: 0.0},
                         {"sinks": (4, 1.40), "window": (0, 2.10), "recompute": (0, 1.38),
                          "memory": (0, 1.36), "dense": (0, 3.5)})
        rows += run_rows("rope64_sink", seed, {64: 1.31}, {64: sink_passkey.get(seed, 1.0)},
                         {"sinks": (4, 1.41), "window": (0, 1.45)})
        rows += run_rows("stream_s1", seed, {64: 1.30}, streams={"sinks": (1, 1.52)})
        rows += run_rows("sink_stream_s1", seed, {64: 1.31}, streams={"sinks": (1, 1.415)},
                         parent=f"rope64_sink,train.seed={seed}")
        # 1. LongRoPE below the best of PI / NTK / YaRN at 4x: agree.
        for variant, at4 in (("zs_linear_s4", 2.2), ("zs_ntk_s4", 1.8), ("zs_yarn_s4", 1.7),
                             ("zs_longrope_s4", 1.6)):
            rows += run_rows(variant, seed, {64: 1.35, 256: at4}, {256: 0.0})
        # 2. Self-Extend W16: flat to 8x (agree); W56: 4x rises by 0.3 (disagree).
        # 3. W16 retrieves 0 at 2x (disagree); W56 0.9 at 2x and 0.8 at 4x (agree).
        rows += run_rows("zs_se_w16_g16", seed, flat, se16_passkey)
        rows += run_rows("zs_se_w56_g28", seed, {64: 1.30, 128: 1.32, 256: 1.60, 1024: 3.0},
                         {64: 1.0, 128: 0.9, 256: 0.8})
        # 4. ReRoPE w16 + log-n at 1x: +0.005 against rope64 (agree). 6. log-n with ReRoPE and
        # Self-Extend lower at 4x (agree); plain log-n higher (disagree).
        rows += run_rows("zs_rerope_w16_logn", seed, {64: 1.305, 256: 1.50, 1024: 1.6}, {64: 0.0})
        rows += run_rows("zs_rerope_w16", seed, {64: 1.305, 256: 1.55, 1024: 1.7})
        rows += run_rows("zs_rerope_w56", seed, {64: 1.30, 256: 1.9}, {64: 1.0})
        rows += run_rows("zs_se_w16_g16_logn", seed, {64: 1.31, 256: 1.30, 1024: 1.5})
        rows += run_rows("zs_logn", seed, {64: 1.30, 256: 3.1, 1024: 4.1})
        # 9. PoSE 0.02 above ft256 at 4x (agree); 10. below RandPos (agree); 11. passkey 0 at 4x
        # (disagree).
        rows += run_rows("pose_pi", seed, {64: 1.40, 128: 1.38, 256: 1.37}, {64: 0.1, 256: 0.0},
                         train=(20.0, 20480.0))
        rows += run_rows("randpos_pi", seed, {64: 1.60, 256: 2.5}, {256: 0.0},
                         train=(22.0, 18618.0))
        rows += run_rows("ft256_pi", seed, {256: ft256_at_4x, 64: 1.41, 128: 1.37}, {256: 0.0},
                         main_len=256, train=(64.0, 25600.0))
    return pd.DataFrame(rows)


def planted_positions(summary):
    """loss_by_position.csv: ReRoPE w16 + log-n's last 64 bytes fall with the length (5. agree)."""
    rows = []
    for seed in SEEDS:
        for variant, last in (("zs_rerope_w16_logn", {64: 1.2, 128: 1.15, 256: 1.1, 512: 1.08,
                                                       1024: 1.07}),
                              ("zs_rerope_w56", {64: 1.2, 256: 1.5})):
            for length, value in last.items():
                for position in range(length - 64, length):
                    rows.append({"run": f"{variant},train.seed={seed}", "train.seed": seed,
                                 "variant": variant, "kind": "length", "factor": length / L,
                                 "seq_len": length, "mem_len": 0, "position": position,
                                 "loss": value + (seed - 72) * 0.005})
    return pd.DataFrame(rows)


def verdicts(table):
    """{row's claim text up to its source: verdict}, in order."""
    out = []
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| published"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out.append((cells[0], cells[-1]))
    return out


class ClaimsMethods(unittest.TestCase):
    def table(self, summary):
        with tempfile.TemporaryDirectory() as d:
            study = os.path.join(d, "context_extension_methods")
            os.makedirs(study)
            summary.to_csv(os.path.join(study, "summary.csv"), index=False)
            planted_positions(summary).to_csv(os.path.join(study, "loss_by_position.csv"),
                                              index=False)
            streams = summary[summary["kind"].str.startswith("stream_")].assign(
                stream_recent=59, stream_positions="cache", position_low=64, position_high=128,
                tokens=64)
            streams.to_csv(os.path.join(study, "loss_by_stream_position.csv"), index=False)
            kept_streams = study_files.read_loss_by_stream_position(study)
            return tables.claims_table(study), kept_streams

    def test_every_row_has_its_planted_verdict(self):
        table, _ = self.table(planted_summary())
        got = [v for _, v in verdicts(table)]
        no_sink = ("no attention sink shown: the models have 2 layers, so only the second "
                   "layer's inputs depend on the context, and a window of 63 at positions inside "
                   "the cache is the training condition")
        self.assertEqual([v.split(" (")[0] if i in (5, 9) else v for i, v in enumerate(got)], [
            "agree",                                   # 1. LongRoPE
            "agree", "disagree",                       # 2. Self-Extend flat: W16, W56
            # 3. Self-Extend retrieves: W16 retrieves 0 at L, so the skill rule does not judge it
            # (the interval alone says "disagree"); W56 retrieves at L: judged
            "inconclusive (no skill at L: zs_se_w16_g16 retrieves 0.00 at L, the gate asks 0.9 "
            "of every seed)", "agree",
            "agree",                                   # 4. ReRoPE at L (qualified, below)
            "agree",                                   # 5. ReRoPE's last bytes fall
            "agree", "agree",                          # 6. log-n with ReRoPE, with Self-Extend
            "inconclusive",                            # 6. log-n alone: outside the setting
            f"inconclusive ({no_sink})",               # 7. window collapses (+0.70): no sink
            f"inconclusive ({no_sink}; outside the paper's setting: gpt-oss's learned sink "
            "logit, not the paper's prepended learned sink token; the threshold 0.02 is the size "
            "of the paper's whole effect (vanilla, 1 sink against 4: ln(18.49/18.05) = 0.024 "
            "nats per token of several bytes), and rope64 without a learned sink shows 1 = 4 as "
            "well)",                                   # 8. one learned sink is enough (+0.005)
            "agree", "agree",                          # 9., 10. PoSE
            # 11. PoSE's fine-tune starts from zs_linear_s4, never read at L here
            "inconclusive (no skill at L: zs_linear_s4 (where pose_pi starts) has no passkey "
            "read at L)"], table)
        self.assertTrue(got[5].startswith("agree (on the loss only: +0.38% of rope64's loss at L "
                                          "against Su's +0.19%"), got[5])
        self.assertTrue(got[9].startswith("inconclusive (outside the paper's setting: the paper "
                                          "trains with the log n factor"), got[9])
        self.assertIn("gate dropped 0", table)
        self.assertIn("pose_pi: 409,600 tokens", table)

    def test_a_sink_model_without_retrieval_keeps_its_stream_rows(self):
        # rope64_sink at seed 73 fails (b), the passkey at L: the protocol keeps its streaming
        # rows (and those of its child), which need only the loss gate.
        table, streams = self.table(planted_summary(sink_passkey={73: 0.2}))
        row8 = next(line for line in table.splitlines() if line.startswith("| 8."))
        self.assertIn("n=3", row8.split("rope64 (no learned sink)")[0])
        self.assertIn("rope64_sink,train.seed=73 (passkey at L 0.21 < 0.9; its stream_* rows "
                      "kept", table)
        self.assertIn("rope64_sink,train.seed=73", set(streams["run"]))

    def test_a_rope_seed_without_retrieval_drops_its_reads(self):
        table, streams = self.table(planted_summary(rope_passkey={71: 0.3}))
        row1 = next(line for line in table.splitlines() if line.startswith("| 1."))
        self.assertIn("n=2", row1)
        self.assertIn("zs_longrope_s4,train.seed=71 (its parent rope64,train.seed=71 was "
                      "dropped)", table)
        # Its streams stay: the loss gate alone.
        row7 = next(line for line in table.splitlines() if line.startswith("| 7."))
        self.assertIn("n=3", row7)


    def test_skill_rule_a_zero_shot_read_without_the_skill_at_L_is_not_judged(self):
        # Self-Extend W16 retrieves 0 at L and 0.9 at 2x: a read that "retrieves beyond L"
        # without retrieving at L. The interval says agree (and did before the skill rule); the
        # rule says there is no skill to extend.
        table, _ = self.table(planted_summary(se16_passkey={64: 0.0, 128: 0.9}))
        got = dict(verdicts(table))
        w16 = next(v for claim, v in got.items() if claim.startswith("3.") and "W = 16" in claim)
        self.assertEqual(w16, "inconclusive (no skill at L: zs_se_w16_g16 retrieves 0.00 at L, "
                              "the gate asks 0.9 of every seed)")
        # With the skill at L, the same read beyond L is judged.
        table, _ = self.table(planted_summary(se16_passkey={64: 0.95, 128: 0.9}))
        got = dict(verdicts(table))
        w16 = next(v for claim, v in got.items() if claim.startswith("3.") and "W = 16" in claim)
        self.assertEqual(w16, "agree")

    def test_a_fine_tune_far_from_its_base_is_qualified_not_converged(self):
        table, _ = self.table(planted_summary(ft256_at_4x=1.45))
        row9 = next(v for claim, v in verdicts(table) if claim.startswith("9."))
        self.assertEqual(row9, "agree (at 400 steps, not converged: ft256_pi's own loss at 4x "
                               "1.450 against rope64's 1.300 at 1x)")


if __name__ == "__main__":
    unittest.main()