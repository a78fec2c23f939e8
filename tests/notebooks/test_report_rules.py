"""What the report and `poslab plot` show of a study, each case planted in a small made-up
study (issue 33, a newcomer's own two-stage study):

  - the budget figure draws one curve per (scaling, factor s): YaRN at s = 4 and at s = 8 are two
    lines, each starting from the zero-shot read of its own s (it pooled them into one "yarn");
  - a legend entry only for a curve with a point (the report listed "rope128 (no scaling)" in a
    loss-by-position panel at a length rope128 was never read at);
  - a zero-shot run (train.steps = 0) has no final train loss in the run table (it showed 0.0000);
  - the study's tables say what their ± is (the standard deviation over seeds, where the figures
    draw 95% t intervals).

    /usr/bin/python3 tests/notebooks/test_report_rules.py       (CTest: report_rules, ~3 s)
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "notebooks"))
import report  # noqa: E402
from poslab_analysis.figures import charts_extension, plots_extension  # noqa: E402
from poslab_analysis.statistics import study_tables  # noqa: E402

# The newcomer's question: does YaRN s = 8 fine-tuned at 256 bytes hold at 512, against s = 4?
STUDY_TOML = """
[study]
name = "yarn_s"
[base.encoding]
type = "rope"
[base.train]
seq_len = 128
steps = 400
[sweep]
"train.seed" = [1, 2]
[[variant]]
name = "rope128"
set = { "eval.length_factors" = [1.0, 2.0, 4.0] }
[[variant]]
name = "zs_yarn_s8"
from = "rope128"
set = { "train.steps" = 0, "encoding.scaling" = "yarn", "encoding.factor" = 8.0 }
[[variant]]
name = "zs_yarn_s4"
from = "rope128"
set = { "train.steps" = 0, "encoding.scaling" = "yarn", "encoding.factor" = 4.0 }
[[variant]]
name = "ft_yarn_s4"
from = "rope128"
[variant.set]
"train.steps" = 200
"train.seq_len" = 256
"encoding.scaling" = "yarn"
"encoding.factor" = 4.0
[[variant]]
name = "ft_yarn_s8"
from = "rope128"
[variant.set]
"train.steps" = 200
"train.seq_len" = 256
"encoding.scaling" = "yarn"
"encoding.factor" = 8.0
"""

# Loss of each variant at each length it was read at (the same for both seeds, plus a small
# seed offset): far apart per factor, so that a pooled curve cannot pass for either. rope128 is
# read at 1x to 4x of 128, never at 1,024 bytes, the longest length its zero-shot children read.
LOSSES = {
    "rope128": {128: 1.50, 256: 2.90, 512: 3.50},
    "zs_yarn_s8": {256: 1.90, 512: 2.00, 1024: 2.10},
    "zs_yarn_s4": {256: 1.70, 512: 2.40, 1024: 3.00},
    "ft_yarn_s4": {256: 1.45, 512: 1.80, 1024: 2.50},
    "ft_yarn_s8": {256: 1.55, 512: 1.60, 1024: 1.70},
}
STEPS = {"rope128": 400, "zs_yarn_s8": 0, "zs_yarn_s4": 0, "ft_yarn_s4": 200, "ft_yarn_s8": 200}
TRAINED_AT = {"rope128": 128, "zs_yarn_s8": 128, "zs_yarn_s4": 128, "ft_yarn_s4": 256,
              "ft_yarn_s8": 256}


def summary_rows():
    rows = []
    for variant, losses in LOSSES.items():
        for seed in (1, 2):
            run = f"{variant},train.seed={seed}"
            parent = "" if variant == "rope128" else f"rope128,train.seed={seed}"
            trained = STEPS[variant] > 0
            common = {"study": "yarn_s", "run": run, "train.seed": seed, "variant": variant,
                      "parent": parent, "mem_len": 0, "in_distribution_ok": True,
                      "train_loss": 1.4 if trained else 0.0,  # as poslab writes it
                      "train_tokens_per_second": 5000.0 if trained else 0.0,
                      "train_seconds": 60.0 if trained else 7e-5}
            first = min(losses)
            rows.append({**common, "kind": "main", "factor": 1.0, "seq_len": first,
                         "loss": losses[first] + 0.01 * seed})
            for length, loss in losses.items():
                rows.append({**common, "kind": "length",
                             "factor": length / TRAINED_AT[variant], "seq_len": length,
                             "loss": loss + 0.01 * seed})
    return pd.DataFrame(rows)


def position_rows(summary):
    """loss_by_position rows: every length row's loss at 8 positions."""
    rows = []
    for _, r in summary[summary["kind"] == "length"].iterrows():
        for position in range(0, int(r["seq_len"]), int(r["seq_len"]) // 8):
            rows.append({"run": r["run"], "train.seed": r["train.seed"], "variant": r["variant"],
                         "kind": "length", "factor": r["factor"], "seq_len": r["seq_len"],
                         "mem_len": 0, "position": position, "loss": r["loss"]})
    return pd.DataFrame(rows)


class Study(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="poslab-report-rules.")
        self.study_dir = self.tmp.name
        with open(os.path.join(self.study_dir, "study.toml"), "w") as f:
            f.write(STUDY_TOML)
        self.summary = summary_rows()
        self.summary.to_csv(os.path.join(self.study_dir, "summary.csv"), index=False)
        self.info = plots_extension.variant_table(self.study_dir)

    def tearDown(self):
        self.tmp.cleanup()


class BudgetCurves(Study):
    def test_one_curve_per_scaling_and_factor(self):
        _, _, points = plots_extension.budget_setup(self.summary, self.info)
        curves = {label: rows for label, rows, _ in plots_extension.budget_curves(points)}
        self.assertEqual(sorted(curves), ["yarn, s = 4", "yarn, s = 8"])
        for factor, label in ((4, "yarn, s = 4"), (8, "yarn, s = 8")):
            rows = curves[label]
            means = rows.groupby("steps")["loss"].mean()
            # 0 steps: the zero-shot read of the same s at 256; 200 steps: that s's fine-tune.
            self.assertAlmostEqual(means[0], LOSSES[f"zs_yarn_s{factor}"][256] + 0.015)
            self.assertAlmostEqual(means[200], LOSSES[f"ft_yarn_s{factor}"][256] + 0.015)
            self.assertEqual(rows.groupby("steps")["run"].nunique().tolist(), [2, 2])

    def test_the_second_factor_is_dashed(self):
        _, _, points = plots_extension.budget_setup(self.summary, self.info)
        styles = {label: style for label, _, style in plots_extension.budget_curves(points)}
        self.assertEqual(styles["yarn, s = 4"]["color"], styles["yarn, s = 8"]["color"])
        self.assertEqual(styles["yarn, s = 4"].get("ls", "-"), "-")  # first in the study file
        self.assertEqual(styles["yarn, s = 8"].get("ls"), "--")

    def test_one_factor_keeps_the_scaling_as_the_label(self):
        one = self.summary[~self.summary["variant"].isin(["ft_yarn_s8", "zs_yarn_s8"])]
        _, _, points = plots_extension.budget_setup(one, self.info)
        labels = [label for label, _, _ in plots_extension.budget_curves(points)]
        self.assertEqual(labels, ["yarn"])

    def test_the_report_draws_the_same_curves(self):
        figure = charts_extension.budget_figure(self.summary, self.info)
        rows = figure["panels"][0]["data"]["values"]
        gated = [r for r in rows if r["set"] == "gated"]
        self.assertEqual(sorted({r["series"] for r in gated}), ["yarn, s = 4", "yarn, s = 8"])
        at = {(r["series"], r["x"]): r for r in gated}
        self.assertAlmostEqual(at[("yarn, s = 8", 0)]["mean"], 1.915)
        self.assertAlmostEqual(at[("yarn, s = 4", 0)]["mean"], 1.715)
        self.assertEqual(at[("yarn, s = 4", 200)]["n"], 2)


class LegendEntries(Study):
    def legend_of(self, panel):
        colour = panel["layer"][1]["encoding"]["color"]
        return colour["scale"]["domain"]

    def test_no_legend_entry_for_a_curve_without_points(self):
        positions = position_rows(self.summary)
        figure = charts_extension.position_figure(self.summary, positions, self.info)
        self.assertIsNotNone(figure)
        for panel in figure["panels"]:
            series = {r["series"] for r in panel["data"]["values"]}
            legend = self.legend_of(panel)
            self.assertEqual(set(legend), series, panel["title"])
            self.assertNotIn("rope128 (no scaling)", legend)  # never read at 1,024

    def test_a_curve_with_points_keeps_its_entry(self):
        figure = charts_extension.loss_vs_length_figure(self.summary, self.info)
        zero_shot = figure["panels"][1]
        self.assertIn("rope128 (no scaling)", self.legend_of(zero_shot))


class RunTable(Study):
    def test_zero_shot_runs_have_no_train_loss(self):
        rows, _ = report.run_table(self.study_dir, self.summary, None)
        by_id = {r["id"]: r for r in rows}
        self.assertIsNone(by_id["zs_yarn_s8,train.seed=1"]["train_loss"])
        self.assertIsNone(by_id["zs_yarn_s4,train.seed=2"]["train_loss"])
        self.assertEqual(by_id["ft_yarn_s4,train.seed=1"]["train_loss"], 1.4)

    def test_eval_json_steps_decide_when_the_run_directory_exists(self):
        run_dir = os.path.join(self.study_dir, "runs", "zs")
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, "eval.json"), "w") as f:
            f.write('{"loss": 1.9, "train_loss": 0.0, "steps": 0}')
        planned = [{"id": "zs_yarn_s8,train.seed=1", "dir_name": "zs", "overrides": [],
                    "status": "done"}]
        rows, _ = report.run_table(self.study_dir, self.summary, planned)
        self.assertIsNone(rows[0]["train_loss"])


class GateWording(Study):
    """Issue 51: the run table said gate "pass" for a zero-shot read that retrieved 0.02: a
    language model's gate is its loss below the bigram baseline, and the table now says so."""

    def test_a_language_model_says_loss_gate(self):
        summary = self.summary.assign(bigram_loss=2.5)
        rows, _ = report.run_table(self.study_dir, summary, None)
        by_id = {r["id"]: r for r in rows}
        self.assertEqual(by_id["zs_yarn_s8,train.seed=1"]["gate_kind"], "loss")
        self.assertTrue(by_id["zs_yarn_s8,train.seed=1"]["gate"])

    def test_a_generated_task_says_exact_match(self):
        rows, _ = report.run_table(self.study_dir, self.summary, None)  # no bigram_loss column
        self.assertEqual({r["gate_kind"] for r in rows}, {"exact match"})


class MovedPanelTitle(Study):
    """Issue 51: the panel of reads that change positions was titled "changed positions, log-n"
    in a study without a log-n arm."""

    def test_the_title_names_only_what_the_panel_holds(self):
        info = self.info.copy()
        info["scaling"] = info["scaling"].astype(object)
        info.loc["zs_yarn_s8", "scaling"] = "self_extend"
        info["log_n"] = "off"
        self.assertEqual(plots_extension.moved_title(info, ["zs_yarn_s8"]), "changed positions")
        info.loc["zs_yarn_s4", "scaling"] = "none"
        info.loc["zs_yarn_s4", "log_n"] = "always"
        self.assertEqual(plots_extension.moved_title(info, ["zs_yarn_s8", "zs_yarn_s4"]),
                         "changed positions, log-n")
        self.assertEqual(plots_extension.moved_title(info, ["zs_yarn_s4"]), "log-n")


class Tables(Study):
    def test_the_tables_say_what_plus_minus_is(self):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            study_tables.main(self.study_dir)
        text = printed.getvalue()
        self.assertIn("±", text)
        self.assertIn("± the standard deviation over seeds", text)
        self.assertIn("95% t interval", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
