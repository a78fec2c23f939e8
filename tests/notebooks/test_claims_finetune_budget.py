"""The claims table of the fine-tuning budget study
(notebooks/poslab_analysis/claims/studies/finetune_budget.py and the rows of chen2023, peng2023
and zhu2023), on a planted study whose answers are known: the protocol's gate (the LAST read of
each base's curve), the continuation control (every read of cont64 after step 250), the
per-seed statistics (area, first read >= 0.9, final read) and each row's verdict.

    /usr/bin/python3 tests/notebooks/test_claims_finetune_budget.py  (CTest: claims_finetune_budget)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import pandas as pd

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(REPO, "notebooks"))
from poslab_analysis.claims import tables  # noqa: E402
from poslab_analysis.claims.studies import finetune_budget as fb  # noqa: E402

PASSING = (111, 112, 113)
FAILING = 114           # its base's LAST read fails the gate (its first reads are 1.00)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
BASE_STEPS = (16000, 32000, 48000)
STEPS = (500, 1000, 1500, 2000, 2500)   # the fine-tunes' reads
CONTROL_STEPS = (50, 250) + STEPS       # cont64 reads early too: 50 and 250 are exempt

# The fine-tunes' mean curves at 256 (one value per read of STEPS, the same at every depth),
# and per seed a shift; seed 114's values would turn the verdicts if its base were not dropped.
CURVES = {
    # area: (0.5 + 1 + 1 + 1 + 1) * 500 / 2500 = 0.9
    "ft_pi_s4": [0.5, 1.0, 1.0, 1.0, 1.0],
    # area: (0 + 0.2 + 0.5 + 0.8 + 0.9) * 500 / 2500 = 0.48; never reaches 0.9 on the mean
    "ft_none": [0.0, 0.2, 0.5, 0.8, 0.85],
    "ft_yarn_s4": [0.5, 1.0, 1.0, 1.0, 1.0],   # shifted per seed below: area against PI +-
    "ft_yarn_s8": [0.9, 1.0, 1.0, 1.0, 1.0],
    "pose_pi_s4": [0.3, 0.8, 1.0, 1.0, 1.0],
}
YARN_SHIFT = {111: 0.10, 112: -0.10, 113: 0.02, FAILING: 0.0}  # area(YaRN) - area(PI) +- 0
# The final (test) reads, mean over depths, per seed.
FINAL = {
    ("ft_pi_s4", 256): {111: 0.95, 112: 0.96, 113: 0.97, FAILING: 0.10},   # agree (1)
    ("ft_none", 256): {111: 0.80, 112: 0.85, 113: 0.82, FAILING: 0.90},
    ("ft_yarn_s4", 256): {111: 0.97, 112: 0.96, 113: 0.99, FAILING: 0.10},
    ("ft_yarn_s8", 256): {111: 0.95, 112: 0.94, 113: 0.96, FAILING: 0.10},
    ("ft_yarn_s8", 512): {111: 0.02, 112: 0.00, 113: 0.05, FAILING: 0.10},  # disagree (4)
    ("pose_pi_s4", 256): {111: 0.99, 112: 0.80, 113: 0.92, FAILING: 0.10},  # inconclusive (5)
}


def curve_rows(variant, seed, steps, values, length, parent=True):
    """Curve rows of one run at one length: values[i] at every depth at steps[i], or a dict
    {(step, depth): value} of exceptions on top of `values`."""
    run = f"{variant},train.seed={seed}"
    rows = []
    for i, step in enumerate(steps):
        for depth in DEPTHS:
            v = values[i]
            rows.append({"run": run, "train.seed": seed, "variant": variant,
                         "parent": f"rope64_s48k,train.seed={seed}" if parent else "",
                         "step": step, "factor": length / 64, "seq_len": length, "depth": depth,
                         "instances": 50, "exact_match": v, "greedy_exact_match": v,
                         "digit_accuracy": v, "loss": 1.0})
    return rows


def summary_rows(variant, seed, finals, losses):
    """summary.csv rows of one run: passkey rows {length: value at every depth}, loss rows."""
    run = f"{variant},train.seed={seed}"
    rows = []
    for length, value in finals.items():
        for depth in DEPTHS:
            rows.append({"study": "finetune_budget", "run": run, "train.seed": seed,
                         "variant": variant, "kind": "passkey", "seq_len": length,
                         "passkey_depth": depth, "split": "test",
                         "passkey_greedy_exact_match": value})
    for length, loss in losses.items():
        rows.append({"study": "finetune_budget", "run": run, "train.seed": seed,
                     "variant": variant, "kind": "length", "seq_len": length, "split": "test",
                     "loss": loss})
    return rows


def planted_study(directory, control_dip=None, base_short_depths=None, unfinished=(),
                  short_curve=None):
    """Four bases (111-113 pass the gate; 114's last read is 0.60 at depth 0.5), their
    fine-tunes, cont64 (0.50 at steps 50 and 250, exempt; 1.00 after, except `control_dip` =
    (seed, step, value) at depth 0.25) and the step-0 reads. base_short_depths = seed: that
    base's last read covers 4 depths. unfinished: (variant, seed) pairs left out of both files
    (runs not finished yet). short_curve: (variant, seed) whose curve lacks its last read."""
    shutil.copy(os.path.join(REPO, "experiments", "finetune_budget.toml"),
                os.path.join(directory, "study.toml"))
    curve, summary = [], []
    for seed in PASSING + (FAILING,):
        # The base: 0.00 at its first read, 1.00 at its last (a gate on the first read would
        # drop it); 114: 1.00 at first, 0.60 at depth 0.5 on its last read.
        base = curve_rows("rope64_s48k", seed, BASE_STEPS,
                          [1.0, 1.0, 1.0] if seed == FAILING else [0.0, 0.5, 1.0], 64,
                          parent=False)
        if seed == FAILING:
            for r in base:
                if r["step"] == 48000 and r["depth"] == 0.5:
                    r["greedy_exact_match"] = 0.6
        if seed == base_short_depths:
            base = [r for r in base if not (r["step"] == 48000 and r["depth"] == 1.0)]
        curve += base
        summary += summary_rows("rope64_s48k", seed, {64: 1.0}, {64: 1.30})
        for arm, values in CURVES.items():
            shift = YARN_SHIFT[seed] if arm == "ft_yarn_s4" else 0.0
            values = [min(1.0, max(0.0, v + shift)) for v in values]
            if seed == FAILING:
                values = [1.0 if arm == "ft_none" else 0.0] * len(values)
            curve += curve_rows(arm, seed, STEPS, values, 256)
            curve += curve_rows(arm, seed, STEPS, [1.0] * len(STEPS), 64)
            finals = {length: v[seed] for (a, length), v in FINAL.items() if a == arm}
            finals[64] = 0.9
            summary += summary_rows(arm, seed, finals, {64: 1.35, 256: 1.30})
        control = curve_rows("cont64", seed, CONTROL_STEPS, [0.5, 0.5] + [1.0] * len(STEPS), 64)
        # cont64 of the dropped base fails too: it does not count (its base is out).
        for r in control:
            if seed == FAILING and r["step"] == 1000:
                r["greedy_exact_match"] = 0.0
            if control_dip and (seed, r["step"], r["depth"]) == (control_dip[0], control_dip[1],
                                                                 0.25):
                r["greedy_exact_match"] = control_dip[2]
        curve += control
        summary += summary_rows("cont64", seed, {64: 0.99, 256: 0.0}, {64: 1.30, 256: 3.0})
        for variant in fb.STEP_ZERO:
            summary += summary_rows(variant, seed, {64: 0.0, 256: 0.0}, {64: 2.0, 256: 2.5})
    summary, curve = pd.DataFrame(summary), pd.DataFrame(curve)
    for variant, seed in unfinished:
        summary = summary[(summary["variant"] != variant) | (summary["train.seed"] != seed)]
        curve = curve[(curve["variant"] != variant) | (curve["train.seed"] != seed)]
    if short_curve:
        curve = curve[(curve["variant"] != short_curve[0]) | (curve["train.seed"] != short_curve[1])
                      | (curve["step"] != STEPS[-1])]
    summary.to_csv(os.path.join(directory, "summary.csv"), index=False)
    curve.to_csv(os.path.join(directory, "passkey_curve.csv"), index=False)


class FinetuneBudgetTable(unittest.TestCase):
    def table(self, **plant):
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget")
            os.makedirs(study)
            planted_study(study, **plant)
            self.assertEqual(tables.kind_of(study), "finetune_budget")
            return tables.claims_table(study), fb.Study(study)

    def verdict_of(self, table, number):
        line = next(x for x in table.splitlines() if x.startswith(f"| {number}. "))
        return line.rstrip(" |").split("| ")[-1]

    def test_gate_reads_the_last_read_and_drops_the_failing_base(self):
        table, study = self.table()
        self.assertEqual(study.passed, [111, 112, 113])
        self.assertEqual(list(study.dropped), [FAILING])
        self.assertIn("step 48,000", study.dropped[FAILING])
        self.assertIn("0.60 at depth 0.5", study.dropped[FAILING])
        self.assertIn("Gate: 3 of 4 bases passed", table)
        self.assertIn(f"rope64_s48k seed {FAILING} dropped with its fine-tunes", table)

    def test_gate_needs_every_depth_on_the_last_read(self):
        _, study = self.table(base_short_depths=112)
        self.assertEqual(study.passed, [111, 113])
        self.assertIn("covers 4 of 5 depths", study.dropped[112])

    def test_per_seed_statistics(self):
        _, study = self.table()
        # area_per_step: each read weighted by the 500 steps since the previous one, / 2,500.
        self.assertAlmostEqual(study.area("ft_pi_s4")[111], 0.9)
        self.assertAlmostEqual(study.area("ft_none")[112], 0.47)
        self.assertEqual(list(study.area("ft_pi_s4").index), [111, 112, 113])  # 114 dropped
        self.assertEqual(study.first_at_gate("ft_pi_s4")[113], 1000)
        self.assertTrue(study.first_at_gate("ft_none").isna().all())  # never on the mean
        self.assertAlmostEqual(study.final("ft_yarn_s8", 512)[113], 0.05)

    def test_verdicts(self):
        table, _ = self.table()
        # 1: PI 0.95-0.97 at 256, low end 0.935 >= 0.9. (With seed 114 at 0.10: inconclusive.)
        self.assertEqual(self.verdict_of(table, 1), "agree")
        # 2: area(PI) - area(none) = 0.9 - 0.47 in every seed.
        self.assertEqual(self.verdict_of(table, 2), "agree")
        # 3: YaRN's area differs from PI's by +0.02, -0.10, +0.004: across 0.
        self.assertEqual(self.verdict_of(table, 3), "inconclusive")
        # 4: YaRN s = 8 at 512 minus at 256, about -0.93: below -0.1.
        self.assertEqual(self.verdict_of(table, 4), "disagree")
        # 5: PoSE 0.99, 0.80, 0.92: the interval straddles 0.9.
        self.assertEqual(self.verdict_of(table, 5), "inconclusive")
        # 6: PoSE - PI: +0.04, -0.16, -0.05, mean -0.057: the interval straddles -0.05.
        self.assertEqual(self.verdict_of(table, 6), "inconclusive")
        self.assertIn("Continuation control (cont64, >= 0.9 at 64 at every depth on every read "
                      "after step 250): kept for seed 111, 112, 113.", table)
        self.assertIn("| PI s = 4, fine-tuned 2,500 steps at 256 with the passkey mix (0.5), "
                      "L = 64 |", table)
        self.assertIn("Multiplicity: 6 comparisons, 3 verdicts", table)  # secondary not counted

    def test_a_failing_control_makes_every_row_inconclusive(self):
        table, study = self.table(control_dip=(112, 1500, 0.8))
        self.assertEqual(study.control[112][0], "failed")
        self.assertIn("**CONTINUATION CONTROL FAILED: cont64 of seed 112 reads 0.80 at 64 "
                      "(depth 0.25, step 1,500)", table)
        for number in range(1, 7):
            self.assertTrue(self.verdict_of(table, number).startswith(
                "inconclusive (continuation control failed: cont64 of seed 112"), number)
        self.assertIn("Multiplicity: 6 comparisons, 0 verdicts", table)

    def test_the_control_exempts_the_first_250_steps_only(self):
        # A dip at step 250 is inside the first 250 steps: exempt. At 500 it is not.
        table, study = self.table(control_dip=(113, 250, 0.0))
        self.assertEqual(study.control[113][0], "kept")
        self.assertEqual(self.verdict_of(table, 1), "agree")
        _, study = self.table(control_dip=(113, 500, 0.85))
        self.assertEqual(study.control[113][0], "failed")

    def test_a_study_still_running(self):
        # cont64 of seed 111 not finished: no fine-tuning row counts until it is read.
        table, study = self.table(unfinished=[("cont64", 111)])
        self.assertEqual(study.control[111][0], "not read")
        for number in range(1, 7):
            self.assertEqual(self.verdict_of(table, number),
                             "inconclusive (continuation control not read for seed 111)")
        # Base 113 not finished (nor anything after it): counted against the study file's sweep.
        table, study = self.table(unfinished=[(v, 113) for v in ("rope64_s48k", "cont64")
                                              + tuple(CURVES) + fb.STEP_ZERO])
        self.assertEqual(study.passed, [111, 112])
        self.assertIn("Gate: 2 of 4 bases passed", table)
        self.assertIn("not read yet (no finished run): seed 113", table)

    def test_a_curve_that_ends_early_is_named(self):
        table, _ = self.table()
        self.assertNotIn("do not end at their planned steps", table)
        table, _ = self.table(short_curve=("ft_none", 112))
        self.assertIn("**Curves that do not end at their planned steps: ft_none seed 112 ends "
                      "at step 2,000, planned 2,500.**", table)

    def test_the_second_round_gets_this_table_and_names_its_protocol(self):
        self.assertEqual(tables.kind_of("results/finetune_budget2"), "finetune_budget")
        self.assertEqual(tables.kind_of("/tmp/x/finetune_budget2-smoke/"), "finetune_budget")
        self.assertIsNone(tables.kind_of("results/pilots/finetune_budget2"))
        table, _ = self.table()
        self.assertIn("Protocol: experiments/finetune_budget.protocol.md.", table)
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget2")
            os.makedirs(study)
            planted_study(study)
            with open(os.path.join(study, "study.toml")) as f:
                text = f.read().replace('name = "finetune_budget"', 'name = "finetune_budget2"')
            with open(os.path.join(study, "study.toml"), "w") as f:
                f.write(text)
            second = tables.claims_table(study)
        self.assertIn("Protocol: experiments/finetune_budget2.protocol.md.", second)
        self.assertEqual(second.replace("finetune_budget2.protocol", "finetune_budget.protocol"),
                         table)

    def renamed(self, tmp, name, **plant):
        """The planted study under the study name `name` (its study.toml's [study] name)."""
        study = os.path.join(tmp, name)
        os.makedirs(study)
        planted_study(study, **plant)
        with open(os.path.join(study, "study.toml")) as f:
            text = f.read().replace('name = "finetune_budget"', f'name = "{name}"')
        with open(os.path.join(study, "study.toml"), "w") as f:
            f.write(text)
        return study

    def test_the_third_round_judges_the_control_on_means(self):
        self.assertEqual(tables.kind_of("results/finetune_budget3"), "finetune_budget")
        with tempfile.TemporaryDirectory() as tmp:
            # One cell at 0.80 (depth 0.25, step 1,500): the cell rule fails, the read's mean
            # over depths is 0.96 and depth 0.25's mean over the reads 0.96: the means rule keeps.
            study = fb.Study(self.renamed(tmp, "finetune_budget3", control_dip=(112, 1500, 0.8)))
            self.assertEqual(study.control_rule, "means")
            self.assertEqual(study.control[112], ("kept", None))
            table = tables.claims_table(study.dir)
            self.assertIn("Protocol: experiments/finetune_budget3.protocol.md.", table)
            self.assertIn("every read's mean over the depths and every depth's mean over the reads "
                          ">= 0.9): kept for seed 111, 112, 113.", table)
            self.assertEqual(self.verdict_of(table, 1), "agree")
            cells = fb.Study(self.renamed(tmp, "finetune_budget2", control_dip=(112, 1500, 0.8)))
            self.assertEqual(cells.control_rule, "cells")
            self.assertEqual(cells.control[112][0], "failed")
            # Every depth of one read at 0.85: that read's mean fails the means rule.
            path = os.path.join(study.dir, "passkey_curve.csv")
            curve = pd.read_csv(path)
            curve.loc[(curve["variant"] == "cont64") & (curve["train.seed"] == 112)
                      & (curve["step"] == 2000), "greedy_exact_match"] = 0.85
            curve.to_csv(path, index=False)
            study = fb.Study(study.dir)
            self.assertEqual(study.control[112], (
                "failed", "cont64 of seed 112 at 64: its read at step 2,000 averages 0.850 over "
                "the depths; 1 of 5 reads after step 250 below 0.9"))
            # One depth at 0.5 on every read from 1,000: the reads average 0.9, depth 1 0.6.
            curve = pd.read_csv(path)
            curve.loc[(curve["variant"] == "cont64") & (curve["train.seed"] == 113)
                      & (curve["depth"] == 1.0) & (curve["step"] >= 1000),
                      "greedy_exact_match"] = 0.5
            curve.to_csv(path, index=False)
            verdict, why = fb.Study(study.dir).control[113]
            self.assertEqual(verdict, "failed")
            self.assertEqual(why, "cont64 of seed 113 at 64: its reads at depth 1 average 0.600")
            self.assertIn("inconclusive (continuation control failed", self.verdict_of(
                tables.claims_table(study.dir), 1))

    def test_claims_py_prints_the_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget")
            os.makedirs(study)
            planted_study(study)
            out = subprocess.run([sys.executable, os.path.join(REPO, "notebooks", "claims.py"),
                                  study], capture_output=True, text=True, check=True).stdout
        self.assertIn("| 4. YaRN s = 8 fine-tuned at sL/2 = 256 still retrieves at sL = 512 "
                      "(Peng et al. 2023) |", out)
        self.assertIn("(secondary) steps to a mean of 0.9 at 256", out)

    def test_a_curve_file_without_its_columns_is_refused_in_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget")
            os.makedirs(study)
            planted_study(study)
            path = os.path.join(study, "passkey_curve.csv")
            pd.read_csv(path).drop(columns=["depth"]).to_csv(path, index=False)
            done = subprocess.run([sys.executable, os.path.join(REPO, "notebooks", "claims.py"),
                                   study], capture_output=True, text=True)
        self.assertEqual(done.returncode, 1)
        self.assertEqual(done.stderr.strip(), f"claims.py: error: {path} has no column 'depth'; "
                         "is it the passkey curve `poslab run` gathers (run, axes, variant, "
                         "parent, then step, factor, seq_len, depth, ...)?")


def main_rows(directory, runner_fails=()):
    """Add the `main` rows the runner writes (one per run: parent, loss, bigram baseline, its
    loss gate in_distribution_ok) to the planted summary.csv; runner_fails: runs whose
    in_distribution_ok is false."""
    path = os.path.join(directory, "summary.csv")
    summary = pd.read_csv(path)
    runs = summary.drop_duplicates("run")[["study", "run", "train.seed", "variant"]]
    main = runs.assign(kind="main", seq_len=64, split="test", loss=1.3, bigram_loss=2.4,
                       in_distribution_ok=~runs["run"].isin(runner_fails),
                       parent=[("" if v == "rope64_s48k" else f"rope64_s48k,train.seed={s}")
                               for v, s in zip(runs["variant"], runs["train.seed"])])
    pd.concat([summary, main], ignore_index=True).to_csv(path, index=False)


class TheFiguresFollowTheGate(unittest.TestCase):
    """reading/protocol_gates.py's PasskeyCurveGate: what every reader of summary.csv (the
    figures, summary_ci.csv, the report) drops is what the table's gate drops, on top of the
    runner's loss gate."""

    def gated(self, drop_curve=False, **main):
        from poslab_analysis.reading import study_files
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget")
            os.makedirs(study)
            planted_study(study)
            main_rows(study, **main)
            if drop_curve:
                os.remove(os.path.join(study, "passkey_curve.csv"))
            summary, why = study_files.read_gated_summary(study)
        ok = summary.drop_duplicates("run").set_index("run")["in_distribution_ok"]
        return ok, why

    def test_the_failing_base_and_its_fine_tunes_are_dropped(self):
        ok, why = self.gated()
        base = f"rope64_s48k,train.seed={FAILING}"
        self.assertEqual(why[base], "passkey gate: its last read (step 48,000) is 0.60 at "
                                    "depth 0.5 < 0.9")
        for arm in list(CURVES) + ["cont64", "zs_none"]:
            self.assertEqual(why[f"{arm},train.seed={FAILING}"], f"its parent {base} was dropped")
            self.assertFalse(ok[f"{arm},train.seed={FAILING}"])
        self.assertEqual(sorted(r for r in why if not r.endswith(str(FAILING))), [])
        self.assertTrue(ok["ft_pi_s4,train.seed=111"] and ok["rope64_s48k,train.seed=111"])

    def test_the_runners_loss_gate_still_drops(self):
        ok, why = self.gated(runner_fails=("zs_none,train.seed=111",))
        self.assertFalse(ok["zs_none,train.seed=111"])
        self.assertIn("the runner's loss gate", why["zs_none,train.seed=111"])
        self.assertTrue(ok["zs_pi_s4,train.seed=111"])

    def test_without_curves_no_base_passes(self):
        ok, why = self.gated(drop_curve=True)
        self.assertEqual(why["rope64_s48k,train.seed=111"],
                         "passkey gate: no passkey curve read at 64")
        self.assertFalse(ok.any())

    def test_the_gate_needs_the_study_folder(self):
        from poslab_analysis.reading import protocol_gates
        with tempfile.TemporaryDirectory() as tmp:
            study = os.path.join(tmp, "finetune_budget")
            os.makedirs(study)
            planted_study(study)
            main_rows(study)
            summary = pd.read_csv(os.path.join(study, "summary.csv"))
        with self.assertRaisesRegex(ValueError, "reads STUDY/passkey_curve.csv: pass the study"):
            protocol_gates.apply(summary)


if __name__ == "__main__":
    unittest.main()
