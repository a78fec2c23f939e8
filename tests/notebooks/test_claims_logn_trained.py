"""The claims table of the log-n trained-in study (notebooks/poslab_analysis/claims/studies/
logn_trained.py and papers/chiang2022.py's logn_trained, row 6 of
experiments/logn_trained.protocol.md), on a planted study whose verdicts are known: summary.csv
written by hand, the committed experiments/logn_trained.toml as its study.toml, and no configs/
or runs/ (as in a `git archive` copy of results/).

    /usr/bin/python3 tests/notebooks/test_claims_logn_trained.py   (CTest: claims_logn_trained)

What is planted, per seed s in 71, 72, 74 (w = -0.01, 0, +0.01 gives every difference a spread,
so its 95% t interval over the 3 seeds is its mean +- 4.303 x 0.01 / sqrt(3) = +- 0.025):
  - rope64's test loss at f x 64 bytes: BASE_LOSS[f]; rope64_logn's: BASE_LOSS[f] + d[f] + w,
    with a different d at every factor (16x -0.100, 8x -0.050, 4x +0.060, 2x -0.030,
    1x +0.002), so that reading the wrong length changes the number and, at 4x, the verdict;
  - each run's main row (the loss at 64) with in_distribution_ok as the runner writes it, true
    unless the case fails the seed's arm (its loss then 3.0, above the bigram baseline 2.4);
  - passkey at 64: rope64 1.0 at every depth; rope64_logn 0.1, 0.2, 0.3 by seed (it does not
    retrieve: row 6, a loss claim, is judged anyway);
  - beside the study, results/context_extension_methods/summary.csv with rope64's loss at 64:
    seed 71 the same, seed 72 higher by 0.0001, seed 74 absent; and the sink diagnostic of
    rope64 at seed 71 only.
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
from poslab_analysis.reading import study_files  # noqa: E402
from poslab_analysis.reading.study_files import StudyFileError  # noqa: E402
from poslab_analysis.statistics import seeds  # noqa: E402

SEEDS = (71, 72, 74)
W = {71: -0.01, 72: 0.0, 74: 0.01}
BIGRAM = 2.4
BASE_LOSS = {1.0: 1.33, 2.0: 1.95, 4.0: 3.0, 8.0: 3.6, 16.0: 3.9}
D = {1.0: 0.002, 2.0: -0.03, 4.0: 0.06, 8.0: -0.05, 16.0: -0.1}
LOGN_PASSKEY = {71: 0.1, 72: 0.2, 74: 0.3}


def run_rows(variant, seed, losses, passkey, main_ok=True):
    """summary.csv rows of one run: main (the loss at 64), length at each factor, passkey at 64
    at 5 depths; in_distribution_ok as the runner writes it."""
    main_loss = losses[1.0] if main_ok else 3.0
    base = {"study": "logn_trained", "run": f"{variant},train.seed={seed}", "train.seed": seed,
            "variant": variant, "mem_len": 0, "split": "test", "unigram_loss": 3.1,
            "bigram_loss": BIGRAM, "in_distribution_ok": "true" if main_loss < BIGRAM else "false",
            "commit": "abcdef0123456789"}
    rows = [{**base, "kind": "main", "factor": 1.0, "seq_len": 64, "loss": main_loss}]
    rows += [{**base, "kind": "length", "factor": f, "seq_len": int(64 * f), "loss": loss}
             for f, loss in losses.items()]
    rows += [{**base, "kind": "passkey", "factor": 1.0, "seq_len": 64, "passkey_depth": depth,
              "loss": 0.01, "passkey_greedy_exact_match": passkey}
             for depth in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return rows


def write_study(directory, d16=None, failing=(), missing=(), override=None, columns=None):
    """A planted study in directory/logn_trained. d16: rope64_logn minus rope64 at 16x (before
    w); `failing`: (arm, seed) whose main row fails the loss gate; `missing`: (arm, seed) not run
    yet; override {seed: the difference at 16x of that seed, w included}; columns: drop these
    summary.csv columns."""
    d = {**D, **({16.0: d16} if d16 is not None else {})}
    study = os.path.join(directory, "logn_trained")
    os.makedirs(study)
    shutil.copy(os.path.join(REPO, "experiments", "logn_trained.toml"),
                os.path.join(study, "study.toml"))
    rows = []
    for seed in SEEDS:
        logn = {f: BASE_LOSS[f] + d[f] + W[seed] for f in BASE_LOSS}
        if override and seed in override:
            logn[16.0] = BASE_LOSS[16.0] + override[seed]
        for arm, losses, passkey in (("rope64", BASE_LOSS, 1.0),
                                     ("rope64_logn", logn, LOGN_PASSKEY[seed])):
            if (arm, seed) not in missing:
                rows += run_rows(arm, seed, losses, passkey, main_ok=(arm, seed) not in failing)
    summary = pd.DataFrame(rows).drop(columns=list(columns or []))
    summary.to_csv(os.path.join(study, "summary.csv"), index=False)
    # The second context-extension study beside it: rope64's loss at 64 at seeds 71 and 72.
    sibling = os.path.join(directory, "context_extension_methods")
    os.makedirs(sibling)
    pd.DataFrame([{"run": f"rope64,train.seed={seed}", "train.seed": seed, "variant": "rope64",
                   "kind": "main", "loss": BASE_LOSS[1.0] + (0.0001 if seed == 72 else 0.0),
                   "commit": "7205645d388c"} for seed in (71, 72)]).to_csv(
        os.path.join(sibling, "summary.csv"), index=False)
    # The sink diagnostic of rope64 at seed 71: 8 heads at 0.01 on key 0 but layer 0 head 2.
    sinks = os.path.join(study, "sinks", "rope64__train.seed-71")
    os.makedirs(sinks)
    pd.DataFrame([{"layer": layer, "head": head,
                   "first_key_mass": 0.3 if (layer, head) == (0, 2) else 0.01,
                   "uniform_mass": 0.021, "windows": 1000}
                  for layer in range(2) for head in range(4)]).to_csv(
        os.path.join(sinks, "sink_heads.csv"), index=False)
    return study


def row_6(table):
    """The cells of row 6: (regime, measured, rule, verdict)."""
    lines = [line for line in table.splitlines() if line.startswith("| 6.")]
    assert len(lines) == 1, table
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    return cells[1], cells[3], cells[4], cells[5]


class ClaimsLognTrained(unittest.TestCase):
    def table(self, **planted):
        with tempfile.TemporaryDirectory() as d:
            study = write_study(d, **planted)
            self.assertEqual(tables.kind_of(study), "logn_trained")
            return tables.claims_table(study)

    def test_agree_at_16x_with_the_other_lengths_beside(self):
        # 16x: -0.100 [-0.125, -0.075], below 0: agree. The other lengths are shown, each its
        # own planted difference (4x would disagree if it were the one read).
        table = self.table()
        _, measured, rule, verdict = row_6(table)
        self.assertEqual(verdict, "agree")
        self.assertIn("rope64_logn minus rope64, loss at 16x, paired by seed: -0.100 [-0.125, "
                      "-0.075], n=3 (per seed 71: -0.110, 72: -0.100, 74: -0.090)", measured)
        self.assertIn("beside, not decisive: 2x -0.030 [-0.055, -0.005], n=3; 4x +0.060 "
                      "[+0.035, +0.085], n=3 (the evaluation-only row's length); 8x -0.050 "
                      "[-0.075, -0.025], n=3; 1x +0.002 [-0.023, +0.027], n=3 (the factor's "
                      "cost at L)", measured)
        self.assertIn("rope64 at 16x +3.900 [+3.900, +3.900], n=3; rope64_logn at 16x +3.800 "
                      "[+3.775, +3.825], n=3", measured)
        self.assertEqual(rule, "interval below 0 agrees, above 0 disagrees, across 0 "
                               "inconclusive")
        self.assertIn("Gate (both arms' test loss at 64 below the bigram baseline, "
                      "in_distribution_ok): 3 of 3 seeds passed.", table)
        self.assertIn("1 survive: 6. Chiang & Cholak 2022 (trained in) agree", table)

    def test_disagree_when_log_n_costs_at_16x(self):
        _, measured, _, verdict = row_6(self.table(d16=0.1))
        self.assertEqual(verdict, "disagree")
        self.assertIn("loss at 16x, paired by seed: +0.100 [+0.075, +0.125], n=3", measured)

    def test_inconclusive_when_the_interval_includes_0(self):
        _, measured, _, verdict = row_6(self.table(d16=0.01))
        self.assertEqual(verdict, "inconclusive")
        self.assertIn("loss at 16x, paired by seed: +0.010 [-0.015, +0.035], n=3", measured)

    def test_the_gate_drops_a_seed_whose_either_arm_fails(self):
        # rope64_logn at seed 74 fails the loss gate and its difference at 16x is +1.0: kept, it
        # would make the interval include 0. Dropped, seeds 71 and 72 give -0.110 and -0.100:
        # -0.105 +- 12.706 x 0.00707 / sqrt(2) = [-0.169, -0.041], agree. rope64 at seed 74,
        # which passes, leaves the paired statistics with it.
        table = self.table(failing=(("rope64_logn", 74),), override={74: 1.0})
        _, measured, _, verdict = row_6(table)
        self.assertEqual(verdict, "agree")
        self.assertIn("paired by seed: -0.105 [-0.169, -0.041], n=2 (per seed 71: -0.110, 72: "
                      "-0.100)", measured)
        self.assertIn("rope64 at 16x +3.900 [+3.900, +3.900], n=2", measured)
        self.assertIn("in_distribution_ok): 2 of 3 seeds passed; seed 74 dropped from every "
                      "paired statistic (rope64_logn: test loss at 64 3.000, bigram baseline "
                      "2.400, in_distribution_ok false)", table)

    def test_the_figures_drop_the_same_seed(self):
        # summary_ci.csv and the figures read summary.csv through the protocol's gate
        # (reading/protocol_gates.py): rope64 at seed 74 passes the loss gate itself, and goes
        # with its seed's rope64_logn, so every mean is over the seeds row 6 pairs.
        with tempfile.TemporaryDirectory() as d:
            study = write_study(d, failing=(("rope64_logn", 74),))
            summary = study_files.read_summary(study)
            ci = seeds.aggregate(summary)
        main = summary[summary["kind"] == "main"].set_index("run")["in_distribution_ok"]
        self.assertEqual(main.to_dict(), {
            "rope64,train.seed=71": True, "rope64,train.seed=72": True,
            "rope64,train.seed=74": False, "rope64_logn,train.seed=71": True,
            "rope64_logn,train.seed=72": True, "rope64_logn,train.seed=74": False})
        at_16x = ci[(ci["kind"] == "length") & (ci["factor"] == 16.0)].set_index("variant")
        self.assertEqual(at_16x.loc["rope64", "n"], 2)
        self.assertEqual(at_16x.loc["rope64", "dropped"], 1)
        self.assertAlmostEqual(at_16x.loc["rope64_logn", "loss_mean"], 3.9 - 0.1 - 0.005)

    def test_one_seed_left_is_no_verdict(self):
        table = self.table(failing=(("rope64", 72), ("rope64_logn", 74)))
        _, measured, _, verdict = row_6(table)
        self.assertEqual(verdict, "inconclusive (1 of 3 seeds passed the gate, a verdict needs 2)")
        self.assertIn("paired by seed: -0.110 (1 seed)", measured)

    def test_a_seed_not_finished_is_named_not_dropped(self):
        table = self.table(missing=(("rope64_logn", 74),))
        _, measured, _, verdict = row_6(table)
        self.assertEqual(verdict, "agree")
        self.assertIn("2 of 3 seeds passed; seed 74 not finished (rope64_logn not in "
                      "summary.csv)", table)
        self.assertIn("-0.105 [-0.169, -0.041], n=2", measured)

    def test_retrieval_is_reported_not_judged(self):
        # rope64_logn retrieves 0.2 at L: row 6 is a loss claim, so it is judged all the same
        # (the skill rule of the retrieval rows does not apply), and the retrieval is shown.
        table = self.table()
        self.assertEqual(row_6(table)[3], "agree")
        line = [x for x in table.splitlines() if "retrieval at L = 64" in x][0]
        self.assertIn("row 6 is a loss claim and needs no retrieval", line)
        self.assertIn("rope64 +1.000 [+1.000, +1.000], n=3 (per seed 71: 1.00, 72: 1.00, 74: "
                      "1.00); rope64_logn +0.200 [+0.000, +0.448], n=3 (per seed 71: 0.10, 72: "
                      "0.20, 74: 0.30)", line)
        self.assertTrue(line.endswith("| reported, no rule | (no verdict) |"))

    def test_the_regime_is_read_from_the_committed_study_file(self):
        regime = row_6(self.table())[0]
        self.assertEqual(
            regime, "here: trained and read with max(1, log_2 n_i) per causal row (n_i = the "
            "keys query i sees; encoding.log_n = always), 2 layers, d_model 64, L = 64, 32,000 "
            "steps; read at 16x = 1,024 bytes; the paper: ln n of the whole input (its length "
            "with CLS) on the query input, in training and at test; 2 layers, d_model 16; "
            "trained at 50, tested at 1,000 (20x)")

    def test_the_retrained_base_against_the_committed_one_and_the_sinks(self):
        table = self.table()
        self.assertIn("rope64 retrained, against ", table)
        self.assertIn("test loss at 64: seed 71: 1.330000 here, 1.330000 there (equal to every "
                      "digit, binaries abcdef0 here and 7205645 there); seed 72: 1.330000 here, "
                      "1.330100 there (differs by -0.0001, binaries abcdef0 here and 7205645 "
                      "there); seed 74: not in ", table)
        self.assertIn("seed 71: 1 of 8 heads >= 0.1 (largest 0.300, layer 0 head 2; split not "
                      "recorded, 1000 windows); seed 72: not run (sinks/rope64__train.seed-72 "
                      "missing)", table)

    def test_a_summary_without_the_gate_column_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            study = write_study(d, columns=["in_distribution_ok"])
            with self.assertRaisesRegex(StudyFileError, r"logn_trained/summary.csv has no column "
                                                        r"'in_distribution_ok'"):
                tables.claims_table(study)
            done = subprocess.run([sys.executable, os.path.join(REPO, "notebooks", "claims.py"),
                                   study], capture_output=True, text=True)
            self.assertEqual(done.returncode, 1)
            self.assertIn("claims.py: error: ", done.stderr)
            self.assertNotIn("Traceback", done.stderr)

    def test_claims_py_prints_the_table(self):
        with tempfile.TemporaryDirectory() as d:
            study = write_study(d)
            done = subprocess.run([sys.executable, os.path.join(REPO, "notebooks", "claims.py"),
                                   study], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(row_6(done.stdout)[3], "agree")

    def test_the_pilot_of_the_same_name_has_no_claims_table(self):
        self.assertIsNone(tables.kind_of("results/pilots/logn_trained"))
        self.assertEqual(tables.kind_of("results/logn_trained"), "logn_trained")
        self.assertEqual(tables.kind_of("/tmp/x/logn_trained-smoke/"), "logn_trained")


if __name__ == "__main__":
    unittest.main()
