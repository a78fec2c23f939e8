"""The claims table of the context-extension study with retrieval
(notebooks/poslab_analysis/claims/studies/context_extension_retrieval.py), on a planted study
whose answers are known: the protocol's gate (loss and passkey at L for stage 1, the parent for
stage 2) and the verdict of each row.

    /usr/bin/python3 tests/notebooks/test_claims_retrieval.py     (CTest: claims_retrieval)
"""
import os
import sys
import tempfile
import unittest

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "notebooks"))
from poslab_analysis.claims import tables  # noqa: E402
from poslab_analysis.claims.studies import context_extension_retrieval as cer  # noqa: E402
from poslab_analysis.reading import study_files  # noqa: E402
from poslab_analysis.statistics import seeds  # noqa: E402

SEEDS = (61, 62, 63)
BIGRAM = 2.4
UNIGRAM = 3.1
L = 64


def planted_rows(variant, seed, losses, passkeys, sliding=None, main_len=L, fail_loss=False,
                 depths=(0, 0.25, 0.5, 0.75, 1)):
    """Summary rows of one run: losses {length: loss}, passkeys {length: exact match} (the same
    at every depth, plus a seed-dependent wiggle so that intervals have width)."""
    run = f"{variant},train.seed={seed}"
    parent = "" if variant in ("rope64", "alibi64", "xpos64") else f"rope64,train.seed={seed}"
    wiggle = (seed - 62) * 0.01
    rows = []

    def row(kind, length, **extra):
        rows.append({"study": "context_extension_retrieval", "run": run, "train.seed": seed,
                     "variant": variant, "parent": parent, "kind": kind, "seq_len": length,
                     "factor": length / main_len, "bigram_loss": BIGRAM, "unigram_loss": UNIGRAM,
                     "in_distribution_ok": "false" if fail_loss else "true", **extra})
    row("main", main_len, loss=losses[main_len] + wiggle)
    for length, loss in losses.items():
        row("length", length, loss=loss + wiggle)
    for length, loss in (sliding or {}).items():
        row("length_sliding", length, loss=loss + wiggle)
    for length, p in passkeys.items():
        for depth in depths:
            row("passkey", length, passkey_depth=depth,
                passkey_greedy_exact_match=min(1.0, max(0.0, p + wiggle / 2)))
    return rows


def planted_study(directory, rope_passkey_at_l=1.0, failing_seed=None, one_depth_seed=None,
                  pi_at_l=0.95, fine_tune_fraction=0.5):
    """rope64 retrieves at L with `rope_passkey_at_l` at every seed, except at `failing_seed`
    (0.3, below the gate); at `one_depth_seed` its passkey is read at depth 0.5 only. The
    zero-shot PI read (where PI's fine-tunes start) retrieves `pi_at_l` at L; the fine-tunes keep
    `fine_tune_fraction` of passkey rows (study.toml), the base half."""
    write_study_toml(directory, fine_tune_fraction)
    rows = []
    lengths = (64, 128, 256, 512, 1024)
    for seed in SEEDS:
        at_l = 0.3 if seed == failing_seed else rope_passkey_at_l
        rows += planted_rows("rope64", seed, dict(zip(lengths, (1.3, 1.9, 3.0, 3.6, 4.0))),
                             {64: at_l, 128: 0.0, 256: 0.0},
                             **({"depths": (0.5,)} if seed == one_depth_seed else {}))
        rows += planted_rows("alibi64", seed, dict(zip(lengths, (1.35, 1.34, 1.34, 1.34, 1.34))),
                             {64: 1.0}, sliding={64: 1.35, 1024: 1.30})
        rows += planted_rows("xpos64", seed, dict(zip(lengths, (1.31, 1.7, 2.5, 3.0, 3.3))),
                             {64: 1.0, 256: 0.0})
        # Zero-shot PI spoils the loss at L: the runner's gate fails it, the protocol's keeps it
        # (a stage-2 run counts when its parent does).
        rows += planted_rows("zs_linear_s4", seed, {64: 2.9, 256: 2.2}, {64: pi_at_l, 256: 0.1},
                             fail_loss=True)
        rows += planted_rows("zs_ntk_s4", seed, {64: 1.35, 256: 1.8}, {256: 0.3})
        rows += planted_rows("zs_yarn_s4", seed, {64: 1.34, 256: 1.7}, {256: 0.4})
        rows += planted_rows("zs_dynamic_ntk_s1", seed,
                             dict(zip(lengths, (1.3, 1.6, 2.0, 2.3, 2.5))), {})
        rows += planted_rows("ft_none", seed, {64: 1.40, 256: 1.45}, {256: 0.2}, main_len=256)
        rows += planted_rows("ft_linear_s4", seed, {64: 1.33, 256: 1.30}, {256: 0.95},
                             main_len=256)
        rows += planted_rows("ft_ntk_s4", seed, {64: 1.33, 256: 1.31}, {256: 0.9}, main_len=256)
        rows += planted_rows("ft_yarn_s4", seed, {64: 1.32, 256: 1.25, 512: 1.5}, {512: 0.2},
                             main_len=256)
        rows += planted_rows("ft_yarn_s8", seed, {64: 1.33, 256: 1.28, 512: 1.29}, {512: 0.8},
                             main_len=256)
    pd.DataFrame(rows).to_csv(os.path.join(directory, "summary.csv"), index=False)


def write_study_toml(directory, fine_tune_fraction):
    """The committed study file's part the skill rule reads: each variant's passkey_fraction."""
    variants = "".join(
        f'[[variant]]\nname = "{name}"\nfrom = "rope64"\n[variant.set]\n'
        f'"train.passkey_fraction" = {fine_tune_fraction}\n'
        for name in ("ft_none", "ft_linear_s4", "ft_ntk_s4", "ft_yarn_s4", "ft_yarn_s8"))
    with open(os.path.join(directory, "study.toml"), "w") as f:
        f.write('[study]\nname = "context_extension_retrieval"\n[base.train]\n'
                'passkey_fraction = 0.5\n[[variant]]\nname = "rope64"\n[[variant]]\n'
                'name = "zs_linear_s4"\nfrom = "rope64"\n' + variants)


class RetrievalTable(unittest.TestCase):
    def table(self, **plant):
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "context_extension_retrieval")
            os.makedirs(study)
            planted_study(study, **plant)
            self.assertEqual(tables.kind_of(study), "context_extension_retrieval")
            return tables.claims_table(study), cer.Study(study)

    def verdict_of(self, table, number):
        line = next(x for x in table.splitlines() if x.startswith(f"| {number}. "))
        return line.rstrip(" |").split("| ")[-1]

    def test_gate_keeps_retrieving_models(self):
        _, study = self.table()
        self.assertEqual(study.dropped, [])
        self.assertIn("zs_linear_s4,train.seed=61", study.kept)  # its own loss failed

    def test_gate_drops_a_model_that_does_not_retrieve_and_its_children(self):
        table, study = self.table(rope_passkey_at_l=0.5)
        self.assertIn("rope64,train.seed=61 (passkey at L 0.49 < 0.9)", study.dropped)
        self.assertIn("ft_none,train.seed=61 (its parent rope64,train.seed=61 was dropped)",
                      study.dropped)
        self.assertEqual(self.verdict_of(table, 1), "inconclusive")

    def test_gate_needs_every_depth(self):
        # A mean over fewer depths than the protocol's five is not the gate's statistic.
        _, study = self.table(one_depth_seed=62)
        self.assertIn("rope64,train.seed=62 (passkey at L read at 1 of 5 depths)", study.dropped)

    def test_figures_summary_ci_and_run_tables_apply_the_same_gate(self):
        # summary_ci.csv (behind the figures and the docs' numbers) reads the study through
        # study_files.read_summary, which applies the protocol's gate: rope64 at seed 61 does not
        # retrieve, so it and its children drop out of the means; seeds 62 and 63 stay.
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "context_extension_retrieval")
            os.makedirs(study)
            planted_study(study, failing_seed=61)
            ci = pd.read_csv(seeds.write_summary_ci(study))
            # The tables per run beside summary.csv (copy distance, loss by position) too.
            pd.DataFrame({"run": [f"{v},train.seed={seed}" for v in ("rope64", "ft_none")
                                  for seed in SEEDS], "loss": 1.0}).to_csv(
                os.path.join(study, "loss_by_copy_distance.csv"), index=False)
            copies = study_files.read_loss_by_copy_distance(study)
            self.assertEqual(sorted(copies["run"]), ["ft_none,train.seed=62",
                                                     "ft_none,train.seed=63",
                                                     "rope64,train.seed=62",
                                                     "rope64,train.seed=63"])
        for variant in ("rope64", "zs_linear_s4", "ft_none"):
            rows = ci[ci["variant"] == variant]
            self.assertTrue((rows["n"] == 2).all(), variant)
            self.assertTrue((rows["dropped"] == 1).all(), variant)
        self.assertTrue((ci[ci["variant"] == "alibi64"]["n"] == 3).all())
        passkey_at_l = ci[(ci["variant"] == "rope64") & (ci["kind"] == "passkey")
                          & (ci["seq_len"] == L)]
        self.assertTrue((passkey_at_l["passkey_greedy_exact_match_mean"] > 0.9).all())

    def test_verdicts_on_the_planted_study(self):
        table, _ = self.table()
        expected = {
            1: "agree",         # rope64 loss rises from 1x to 2x
            3: "agree",         # ft_linear_s4 at 1x within 0.05 of rope64 (1.33 vs 1.30)
            5: "agree",         # NTK below PI at 4x
            # dynamic below no scaling at 2x..16x; its loss at 16x (2.5) above the bigram's
            6: "agree (against no scaling only: above the bigram (2.400) at 16x (3 of 3 "
               "seeds); below the unigram at every length)",
            7: "agree",         # YaRN below the better of PI and NTK at 4x
            8: "agree",         # ft YaRN below the better fine-tune at 4x
            10: "agree",        # s = 8 flat from 256 to 512 (+0.01)
            12: "agree",        # xPos below RoPE at 4x
        }
        for number, want in expected.items():
            self.assertEqual(self.verdict_of(table, number), want, f"row {number}")
        # Row 2: ft_linear_s4 retrieves at 256 (0.95 mean) -> agree; row 4: PI minus none on
        # passkey at 256 (0.95 vs 0.2) -> agree.
        self.assertEqual(self.verdict_of(table, 2), "agree")
        self.assertEqual(self.verdict_of(table, 4), "agree")


    def test_skill_rule_a_fine_tune_that_starts_without_the_skill_is_not_judged(self):
        # The zero-shot PI read retrieves 0 at L: PI's fine-tune starts without the skill. Its
        # 0.95 at 4x would say "agree" (it did before the skill rule); the row says why not.
        table, _ = self.table(pi_at_l=0.0)
        for number in (2, 4):
            self.assertEqual(
                self.verdict_of(table, number),
                "inconclusive (no skill at L: zs_linear_s4 (where ft_linear_s4 starts) retrieves "
                "0.00 at L, the gate asks 0.9 of every seed)", f"row {number}")

    def test_skill_rule_a_fine_tune_on_plain_text_is_outside_the_setting(self):
        table, _ = self.table(fine_tune_fraction=0.0)
        self.assertEqual(self.verdict_of(table, 2),
                         "inconclusive (outside the paper's setting: ft_linear_s4 is fine-tuned "
                         "on text without passkey rows, its base learned retrieval from them)")
        self.assertIn("ft_none is fine-tuned on text without passkey rows",
                      self.verdict_of(table, 4))
        # The loss rows do not need the skill: row 3 is judged as before.
        self.assertEqual(self.verdict_of(table, 3), "agree")


if __name__ == "__main__":
    unittest.main()