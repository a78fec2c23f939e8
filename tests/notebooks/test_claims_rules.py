"""The rules of the claims tables (notebooks/poslab_analysis/claims/), each planted: a comparison at the floor, at
the ceiling, an interval across 0, a pooled proportion against the same data judged per seed, and
the paper-metric helpers on data whose answer is known.

    /usr/bin/python3 tests/notebooks/test_claims_rules.py        (CTest: claims_rules)
"""
import math
import os
import sys
import types
import unittest

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "notebooks"))
from poslab_analysis.claims import rules, tables  # noqa: E402
from poslab_analysis.claims.papers import dai2019, kazemnejad2023, press2022, ruoss2023  # noqa: E402,E501
from poslab_analysis.statistics import proportions  # noqa: E402
from poslab_analysis.statistics.seeds import t_interval  # noqa: E402


def seeds(*values):
    return pd.Series(values, index=[21, 22, 23][:len(values)], dtype=float)


class Rules(unittest.TestCase):
    def test_clear_win_agrees(self):
        _, v = rules.compare(seeds(0.30, 0.35, 0.32), seeds(0.0, 0.0, 0.0), floor=0.0)
        self.assertEqual(v, "agree")

    def test_clear_loss_disagrees(self):
        _, v = rules.compare(seeds(0.10, 0.12, 0.11), seeds(0.40, 0.45, 0.42), floor=0.0)
        self.assertEqual(v, "disagree")

    def test_both_at_the_floor_is_inconclusive(self):
        # A consistent +0.01 difference, but both sides within 0.02 of 0: no ranking.
        m, v = rules.compare(seeds(0.010, 0.015, 0.012), seeds(0.0, 0.0, 0.0), floor=0.0,
                              ceiling=1.0)
        self.assertGreater(m[1], 0)  # the interval alone would say "agree"
        self.assertEqual(v, "inconclusive (both at the floor)")

    def test_one_side_at_the_floor_is_judged(self):
        _, v = rules.compare(seeds(0.2, 0.25, 0.3), seeds(0.0, 0.0, 0.0), floor=0.0)
        self.assertEqual(v, "agree")

    def test_both_at_the_ceiling_is_inconclusive(self):
        m, v = rules.compare(seeds(1.0, 0.999, 1.0), seeds(0.985, 0.986, 0.984), floor=0.0,
                              ceiling=1.0)
        self.assertGreater(m[1], 0)
        self.assertEqual(v, "inconclusive (both at the ceiling)")

    def test_exactly_zero_difference_is_inconclusive_not_disagree(self):
        # Both at 0 everywhere: the old rule said "disagree" (no positive difference).
        _, v = rules.compare(seeds(0.0, 0.0, 0.0), seeds(0.0, 0.0, 0.0))
        self.assertEqual(v, "inconclusive")
        _, v = rules.compare(seeds(0.5, 0.4, 0.6), seeds(0.5, 0.4, 0.6))
        self.assertEqual(v, "inconclusive")

    def test_interval_across_zero_is_inconclusive(self):
        m, v = rules.compare(seeds(0.60, 0.35, 0.52), seeds(0.50, 0.40, 0.50))
        self.assertLess(m[1], 0)
        self.assertGreater(m[2], 0)
        self.assertEqual(v, "inconclusive")
        for rule in (rules.ABOVE_ZERO, rules.BELOW_ZERO, rules.BEATS):
            self.assertEqual(rules.verdict((0.0, -0.1, 0.1, 3), *rule), "inconclusive")

    def test_thresholds(self):
        # at_least(0.9): a low end touching 0.9 agrees ("at least"); a high end at 0.9 is not
        # below it; straddling is inconclusive.
        at_09 = rules.at_least(0.9)
        self.assertEqual(rules.verdict((0.95, 0.9, 1.0, 3), *at_09), "agree")
        self.assertEqual(rules.verdict((0.85, 0.8, 0.9, 3), *at_09), "inconclusive")
        self.assertEqual(rules.verdict((0.85, 0.8, 0.899, 3), *at_09), "disagree")
        self.assertEqual(rules.verdict((0.9, 0.85, 0.95, 3), *at_09), "inconclusive")
        # above(-0.05): the whole interval above -0.05 agrees; an end at -0.05 does not.
        above = rules.above(-0.05)
        self.assertEqual(rules.verdict((0.0, -0.04, 0.04, 3), *above), "agree")
        self.assertEqual(rules.verdict((0.0, -0.05, 0.04, 3), *above), "inconclusive")
        self.assertEqual(rules.verdict((-0.2, -0.3, -0.06, 3), *above), "disagree")
        self.assertEqual(rules.verdict((-0.1, -0.2, -0.05, 3), *above), "inconclusive")
        # above(0) judges as ABOVE_ZERO does.
        for interval in ((0.1, 0.05, 0.15, 3), (0.0, -0.1, 0.1, 3), (-0.1, -0.15, -0.05, 3)):
            self.assertEqual(rules.verdict(interval, *rules.above(0.0)),
                             rules.verdict(interval, *rules.ABOVE_ZERO))

    def test_one_seed_is_inconclusive(self):
        self.assertEqual(rules.verdict((0.5, float("nan"), float("nan"), 1), *rules.BEATS),
                         "inconclusive")
        self.assertEqual(rules.compare(seeds(0.9), seeds(0.1))[1], "inconclusive")

    def test_wilson(self):
        p, low, high = proportions.wilson(0, 10)
        self.assertEqual((p, low), (0.0, 0.0))
        self.assertAlmostEqual(high, 3.8416 / 13.8416, places=4)
        p, low, high = proportions.wilson(5, 10)
        self.assertAlmostEqual(low, 0.2366, places=4)
        self.assertAlmostEqual(high, 0.7634, places=4)

    def test_pooled_answers_decide_where_three_seeds_cannot(self):
        # Three seeds of 1,152 answers near chance: the t interval over 3 seeds is too wide for
        # the band 0.5 +- 0.05, the pooled Wilson interval of 3,456 answers is not.
        n = 1152
        props = (0.51, 0.47, 0.53)
        groups = [[(round(p * n), n) for p in props]]
        v, pooled = rules.pooled_within(groups, 0.45, 0.55)
        self.assertEqual(v, "agree")
        self.assertEqual(pooled[0][3], 3 * n)
        seed_level = t_interval(list(props))
        self.assertLess(seed_level[1], 0.45)  # the seed-level interval leaves the band
        self.assertEqual(rules.verdict(seed_level, lambda lo, hi: lo >= 0.45 and hi <= 0.55,
                                        lambda lo, hi: lo > 0.55 or hi < 0.45), "inconclusive")

    def test_pooled_disagrees_when_outside_the_band(self):
        n = 1152
        v, _ = rules.pooled_within([[(round(0.50 * n), n)] * 3, [(round(0.60 * n), n)] * 3],
                                    0.45, 0.55)
        self.assertEqual(v, "disagree")

    def test_pooled_does_not_hide_unlike_seeds(self):
        # Pooled, 0.60 / 0.40 / 0.50 average to 0.50; two seeds are wholly outside the band.
        n = 1152
        v, pooled = rules.pooled_within([[(round(p * n), n) for p in (0.60, 0.40, 0.50)]],
                                         0.45, 0.55)
        self.assertAlmostEqual(pooled[0][0], 0.5, places=3)
        self.assertEqual(v, "inconclusive")

    def test_answers_from_a_proportion(self):
        rows = pd.DataFrame({"accuracy": [0.5, 0.25], "tokens": [1152, 4]})
        self.assertEqual(proportions.answers(rows), [(576, 1152), (1, 4)])


def length_summary(rows):
    """A summary.csv of a length study: rows of (encoding, seed, factor, exact_match, accuracy,
    instances)."""
    frame = pd.DataFrame(rows, columns=["encoding.type", "train.seed", "factor", "exact_match",
                                        "accuracy", "instances"])
    frame["variant"] = "copy"
    frame["kind"] = "length"
    frame["in_distribution_ok"] = True
    return frame


class PaperMetrics(unittest.TestCase):
    def test_exact_match_over_L_to_2L_pools_both_buckets(self):
        s = length_summary([("none", 21, 1.0, 1.0, 1.0, 100), ("none", 21, 1.5, 0.4, 0.8, 100),
                            ("none", 21, 2.0, 0.0, 0.2, 300), ("none", 21, 4.0, 0.0, 0.1, 100)])
        got = kazemnejad2023.pooled_up_to_2x(s, "copy", "none")
        self.assertAlmostEqual(got[21], 40 / 400)  # 1x and 4x left out; weighted by instances

    def test_accuracy_averaged_over_unseen_lengths(self):
        s = length_summary([("none", 21, 1.0, 1.0, 1.0, 1), ("none", 21, 1.5, 0, 0.8, 1),
                            ("none", 21, 2.0, 0, 0.6, 1), ("none", 21, 4.0, 0, 0.3, 1),
                            ("none", 21, 8.0, 0, 0.1, 1)])
        got = ruoss2023.length_averaged(s, "copy", "none")
        # bucket widths 0.5, 0.5, 2, 4 (lengths covered), 1x left out
        self.assertAlmostEqual(got[21], (0.5 * 0.8 + 0.5 * 0.6 + 2 * 0.3 + 4 * 0.1) / 7)

    def test_accuracy_averaged_with_each_bucket_weighted_equally(self):
        s = length_summary([("none", 21, 1.0, 1.0, 1.0, 1), ("none", 21, 1.5, 0, 0.8, 1),
                            ("none", 21, 2.0, 0, 0.6, 1), ("none", 21, 4.0, 0, 0.3, 1),
                            ("none", 21, 8.0, 0, 0.1, 1)])
        got = ruoss2023.length_averaged(s, "copy", "none", weighting="buckets")
        self.assertAlmostEqual(got[21], (0.8 + 0.6 + 0.3 + 0.1) / 4)  # 1x left out
        with self.assertRaises(ValueError):
            ruoss2023.length_averaged(s, "copy", "none", weighting="instances")

    def test_a_seed_missing_a_bucket_is_left_out(self):
        s = length_summary([("none", 21, 1.5, 0.4, 0.8, 100), ("none", 21, 2.0, 0.0, 0.2, 100),
                            ("none", 22, 1.5, 0.4, 0.8, 100), ("none", 21, 4.0, 0.0, 0.1, 100),
                            ("none", 21, 8.0, 0.0, 0.1, 100)])
        self.assertEqual(list(kazemnejad2023.pooled_up_to_2x(s, "copy", "none").index), [21])
        self.assertEqual(list(ruoss2023.length_averaged(s, "copy", "none").index), [21])

    def test_context_matched_growth(self):
        # L = 8: 1x positions 0..7 (last eighth: position 7), 2x positions 0..15 (>= 8 count).
        rows = []
        for seed, shift in ((11, 0.0), (12, 0.1)):
            run = f"python,seed={seed}"
            rows += [(run, seed, 1, p, 3.0 - 0.2 * p + shift) for p in range(8)]
            rows += [(run, seed, 2, p, (2.0 if p >= 8 else 9.0) + shift) for p in range(16)]
        by_position = pd.DataFrame(rows, columns=["run", "train.seed", "factor", "position",
                                                  "loss"])
        by_position["variant"] = "python"
        by_position["kind"] = "length"
        by_position["encoding.type"] = "alibi"
        summary = by_position.drop_duplicates("run")[["run", "train.seed", "variant", "kind",
                                                      "encoding.type"]].copy()
        summary["in_distribution_ok"] = True
        m = press2022.context_matched(by_position, summary, "alibi", "python", 2, 8)
        # far: 2.0 (+shift), near: position 7, 3.0 - 1.4 = 1.6 (+shift): +0.4 in both seeds
        self.assertAlmostEqual(m[0], 0.4)
        self.assertEqual(m[3], 2)


def lm_summary(encodings, seeds, growth_2x, t5_column=True):
    """A summary.csv of an LM length study on one corpus (L = 64): loss 1.5 + seed/1000 at 1x,
    plus growth_2x at 2x and 1.0 at 16x. t5_column False: no encoding.type column (a study with
    the encoding fixed in [base.encoding], as the T5 settling study)."""
    rows = []
    for encoding in encodings:
        for seed in seeds:
            base = 1.5 + seed / 1000
            for factor, extra in ((1.0, 0.0), (2.0, growth_2x + seed / 10000), (4.0, 0.0),
                                  (8.0, 0.0), (16.0, 1.0)):
                rows.append({"run": f"python,{encoding},seed={seed}", "train.seed": seed,
                             "encoding.type": encoding, "variant": "python", "kind": "length",
                             "factor": factor, "seq_len": int(64 * factor),
                             "loss": base + extra, "in_distribution_ok": True})
    frame = pd.DataFrame(rows)
    return frame if t5_column else frame.drop(columns=["encoding.type"])


class T5Settling(unittest.TestCase):
    """The T5 row of the LM table is decided by results/settle_t5_max_distance when it exists
    (experiments/settle/t5_max_distance.protocol.md: upper end <= +0.05 agrees, lower end > +0.05
    disagrees), the LM study's own T5 (max_distance 128 > L) staying beside it, not counted."""
    ENCODINGS = ("sinusoidal", "rope", "t5_bias", "alibi", "none", "learned", "transformer_xl")

    def tables(self, settle):
        import tempfile
        with tempfile.TemporaryDirectory() as results:
            os.makedirs(os.path.join(results, "lm_extrapolation"))
            lm_summary(self.ENCODINGS, (11, 12, 13), 0.2).to_csv(
                os.path.join(results, "lm_extrapolation", "summary.csv"), index=False)
            if settle is not None:
                os.makedirs(os.path.join(results, "settle_t5_max_distance"))
                settle.to_csv(os.path.join(results, "settle_t5_max_distance", "summary.csv"),
                              index=False)
            record = rules.Tally()
            text = tables.claims_table(os.path.join(results, "lm_extrapolation"), record)
        t5 = [line for line in text.splitlines() if "T5 bias: no worse" in line
              or "the LM study's T5" in line]
        return t5, record

    def test_without_the_settling_study_the_row_is_inconclusive(self):
        t5, record = self.tables(None)
        self.assertEqual(len(t5), 1)
        self.assertTrue(t5[0].endswith("| inconclusive (not the paper's regime) |"))
        self.assertIn("gives disagree in this regime", t5[0])

    def test_flat_at_2x_agrees_and_the_old_row_is_a_reference(self):
        t5, record = self.tables(lm_summary(["t5_bias"], (31, 32, 33), -0.02, t5_column=False))
        self.assertEqual(len(t5), 2)
        self.assertIn("max_distance 64, loss at 2x minus 1x: -0.017", t5[0])  # -0.02 + seed/10000
        self.assertTrue(t5[0].endswith("| agree |"))
        self.assertTrue(t5[1].endswith("| (reference) |"))
        self.assertIn("+0.201", t5[1])  # the LM study's own T5, still shown
        # One T5 comparison counted, not two: 16 rows as without the settling study.
        self.assertEqual(len(record.rows), len(self.tables(None)[1].rows))

    def test_growth_beyond_the_band_disagrees(self):
        t5, _ = self.tables(lm_summary(["t5_bias"], (31, 32, 33), 0.2, t5_column=False))
        self.assertTrue(t5[0].endswith("| disagree |"))

    def test_a_gated_run_is_left_out(self):
        settle = lm_summary(["t5_bias"], (31, 32, 33), -0.02, t5_column=False)
        # seed 33 fails the gate and would, if counted, push the interval across +0.05
        settle.loc[(settle["train.seed"] == 33) & (settle["factor"] == 2.0), "loss"] += 1.0
        settle.loc[settle["train.seed"] == 33, "in_distribution_ok"] = False
        t5, _ = self.tables(settle)
        self.assertIn("n=2", t5[0])
        self.assertIn("gate dropped 1", t5[0])
        self.assertTrue(t5[0].endswith("| agree |"))


class SkillRule(unittest.TestCase):
    """The gate's rule applied to the arms a retrieval row judges (rules.no_skill, no_signal,
    unless): a read that does not retrieve at L, or a fine-tune without passkey rows, is not
    judged on retrieval, whatever its interval says; the reason is in the verdict."""

    def test_a_read_without_the_skill_at_L_gives_its_reason(self):
        reason = rules.no_skill("zs_x", seeds(0.0, 0.1, 0.05))
        self.assertEqual(reason, "no skill at L: zs_x retrieves 0.05 at L, the gate asks 0.9 of "
                                 "every seed")
        # One seed below the gate is enough: the gate asks it of every seed.
        self.assertIsNotNone(rules.no_skill("zs_x", seeds(1.0, 1.0, 0.88)))
        self.assertIn("has no passkey read at L", rules.no_skill("zs_x", seeds()))
        self.assertIsNone(rules.no_skill("zs_x", seeds(0.9, 1.0, 0.95)))

    def test_a_fine_tune_without_the_signal_is_outside_the_setting(self):
        self.assertEqual(rules.no_signal("ft_x", 0.0),
                         "outside the paper's setting: ft_x is fine-tuned on text without "
                         "passkey rows, its base learned retrieval from them")
        self.assertIsNone(rules.no_signal("ft_x", 0.5))
        self.assertIsNone(rules.no_signal("ft_x", None))  # unknown: not claimed

    def test_unless_overrides_any_verdict_and_counts_as_inconclusive(self):
        self.assertEqual(rules.unless([None, None], "agree"), "agree")
        self.assertEqual(rules.unless(["a", None, "b"], "disagree"), "inconclusive (a; b)")
        record = rules.Tally()
        rules.tally(record, "P", [rules.unless(["a"], "agree")])
        self.assertEqual(record.rows, [("P", ["inconclusive"])])


class Multiplicity(unittest.TestCase):
    """statistics/multiplicity.py: a verdict's p-value from its interval and rule, and Holm's
    step-down correction, on cases whose answers are known."""

    def test_t_cdf_matches_closed_forms(self):
        from poslab_analysis.statistics import multiplicity
        for t in (0.5, 2.0, 10.0):
            # df = 1: Cauchy; df = 2: 1/2 + t / (2 sqrt(2 + t^2))
            self.assertAlmostEqual(multiplicity.t_cdf(t, 1), 0.5 + math.atan(t) / math.pi, 5)
            self.assertAlmostEqual(multiplicity.t_cdf(t, 2), 0.5 + t / (2 * math.sqrt(2 + t * t)),
                                   5)
        self.assertAlmostEqual(multiplicity.t_cdf(4.303, 2), 0.975, 3)

    def test_p_value_is_the_t_test_against_the_rules_threshold(self):
        from poslab_analysis.statistics import multiplicity
        # Three seeds, mean 0.2, interval [0.1, 0.3]: se = 0.1 / 4.303. Against 0 (ABOVE_ZERO):
        # t = 0.2 / se = 8.606, p = 2 (1 - T_2(8.606)); against 0.05 (AT_MOST_005 flipped): the
        # same se, t = 0.15 / se.
        interval = (0.2, 0.1, 0.3, 3)
        se = 0.1 / 4.303
        for rule, threshold in ((rules.ABOVE_ZERO, 0.0),
                                ((lambda lo, hi: lo > 0.05, lambda lo, hi: hi < 0.05), 0.05)):
            t = (0.2 - threshold) / se
            want = 2 * (1 - (0.5 + t / (2 * math.sqrt(2 + t * t))))
            got = multiplicity.p_value([(interval, rule)], lambda vs: vs[0], rules.verdict)
            self.assertAlmostEqual(got, want, 6)
        # Seeds that agree exactly: p = 0. A rule on the mean alone is not tested by its
        # interval: no p.
        self.assertEqual(multiplicity.p_value([((0.2, 0.2, 0.2, 3), rules.ABOVE_ZERO)],
                                              lambda vs: vs[0], rules.verdict), 0.0)
        on_the_mean = (lambda lo, hi: True, lambda lo, hi: False)
        self.assertIsNone(multiplicity.p_value([((0.2, 0.1, 0.3, 3), on_the_mean)],
                                               lambda vs: vs[0], rules.verdict))
        # No verdict, no p; one seed, no p.
        self.assertIsNone(multiplicity.p_value([((0.0, -0.1, 0.1, 3), rules.BEATS)],
                                               lambda vs: vs[0], rules.verdict))
        self.assertIsNone(multiplicity.p_value([((0.5, float("nan"), float("nan"), 1),
                                                 rules.BEATS)], lambda vs: vs[0], rules.verdict))

    def test_holm_steps_down(self):
        from poslab_analysis.statistics import multiplicity
        # m = 4: 0.01 <= 0.05/4, 0.015 <= 0.05/3, 0.03 > 0.05/2 stops; 0.04 fails after it.
        self.assertEqual(multiplicity.holm([0.03, 0.01, 0.04, 0.015]),
                         [False, True, False, True])
        self.assertEqual(multiplicity.holm([0.02]), [True])

    def test_the_holm_line_counts_every_comparison(self):
        record = rules.Tally()
        rules.tally(record, "P", ["agree"], row="1. P", evidence=[((0.2, 0.1, 0.3, 3),
                                                                   rules.ABOVE_ZERO)])
        rules.tally(record, "P", ["inconclusive"], row="2. P",
                    evidence=[((0.0, -0.1, 0.1, 3), rules.BEATS)])
        line = record.holm_line()
        self.assertIn("2 comparisons, 1 verdicts", line)
        self.assertIn("1 survive: 1. P agree (p = 0.013)", line)


class Sensitivity(unittest.TestCase):
    """One analysis choice per row gives the verdict (the protocol's); another is shown beside
    it and never counted. A claim measured outside its paper's setting is inconclusive, with the
    reason, whatever its interval says (docs/06's rule)."""

    def test_sensitivity_text_names_the_choice_and_is_not_counted(self):
        text = rules.sensitivity("each bucket weighted equally", (0.2, 0.1, 0.3, 3), "agree")
        self.assertEqual(text, "sensitivity, each bucket weighted equally: +0.200 [+0.100, "
                               "+0.300], n=3, agree (shown, not voted)")
        self.assertEqual(rules.sensitivity("x", None, "disagree"),
                         "sensitivity, x: disagree (shown, not voted)")

    def test_outside_the_papers_setting_is_inconclusive_with_its_reason(self):
        from poslab_analysis.claims.studies.state_reuse import Study
        record = rules.Tally()
        # +0.004 [+0.001, +0.007]: "disagree" on this study's evaluation (Dai's 4-layer row)
        line = Study.row(types.SimpleNamespace(boot={}), "4. longer memory", "paper", "measured",
                         (0.004, 0.001, 0.007, 3), "below 0 agrees", rules.BELOW_ZERO, "P",
                         record, outside="not the paper's evaluation")
        self.assertTrue(line.endswith("| inconclusive (not the paper's evaluation) |"), line)
        self.assertIn("sensitivity, the rule on this study's evaluation: disagree (shown, not "
                      "voted)", line)
        self.assertEqual(record.rows, [("P", ["inconclusive"])])
        # without `outside` the same row is judged as before
        line = Study.row(types.SimpleNamespace(boot={}), "4. longer memory", "paper", "measured",
                         (0.004, 0.001, 0.007, 3), "below 0 agrees", rules.BELOW_ZERO, "P",
                         record)
        self.assertTrue(line.endswith("| disagree |"), line)

    def test_ruoss_weighting_flips_a_verdict_and_only_the_protocols_counts(self):
        # Plain: 0.5 at every unseen bucket. Randomized: +0.4 at 1.5x and 2x in every seed, and
        # at 4x and 8x a seed effect d = -0.1, 0, +0.1. Weighted by lengths (0.5, 0.5, 2, 4):
        # (0.4 + 6d) / 7 = -0.029, +0.057, +0.143: the interval includes 0 (inconclusive).
        # Each bucket once: (0.8 + 2d) / 4 = 0.15, 0.20, 0.25: above 0 (agree).
        plain, randomized = [], []
        for seed, d in ((21, -0.1), (22, 0.0), (23, 0.1)):
            for factor in (1.0, 1.5, 2.0, 4.0, 8.0):
                plain.append(("learned", seed, factor, 0.5, 0.5, 100))
                gain = 0.0 if factor == 1.0 else (0.4 if factor <= 2.0 else d)
                randomized.append(("learned", seed, factor, 0.5, 0.5 + gain, 100))
        plain, randomized = length_summary(plain), length_summary(randomized)
        randomized = pd.concat([randomized, randomized.assign(kind="length_sampled")])
        record = rules.Tally()
        lines = ruoss2023.randomized_rows(plain, randomized, record)
        row = lines[0].split(" | ")
        self.assertEqual(row[3], "inconclusive")
        self.assertIn("+0.057", row[2])
        self.assertEqual(row[6], "sensitivity, each bucket weighted equally: +0.200 [+0.076, "
                                 "+0.324], n=3, agree (shown, not voted) |")
        self.assertEqual(record.rows, [(ruoss2023.NAME, ["inconclusive"])])


class Summary(unittest.TestCase):
    def test_tally_counts_each_comparison(self):
        record = rules.Tally()
        rules.tally(record, "P", ["agree"])
        rules.tally(record, "P", ["inconclusive (both at the floor)", "disagree"])
        rules.tally(None, "P", ["agree"])  # no record: nothing happens
        self.assertEqual(record.rows, [("P", ["agree"]), ("P", ["inconclusive", "disagree"])])




class ReclOrder(unittest.TestCase):
    """Settling run 5's rule: 'A > B' per seed group, a censored RECL read as a lower bound."""

    def test_holds_in_every_group_agrees(self):
        self.assertEqual(dai2019.recl_order_verdict([(96, False), (128, True), (64, False)],
                                                   [(32, False), (32, False), (32, False)]),
                         "agree")

    def test_a_censored_lower_side_cannot_be_beaten(self):
        # B's ">= 128" may be larger than A's 192: the order is not established in that group.
        self.assertEqual(dai2019.recl_order_verdict([(192, False), (96, False)],
                                                   [(128, True), (32, False)]), "inconclusive")

    def test_reversed_in_every_group_disagrees(self):
        self.assertEqual(dai2019.recl_order_verdict([(32, False), (32, False)],
                                                   [(64, False), (128, True)]), "disagree")

    def test_ties_and_missing_groups_are_inconclusive(self):
        self.assertEqual(dai2019.recl_order_verdict([(64, False)], [(64, False)]), "inconclusive")
        self.assertEqual(dai2019.recl_order_verdict([], []), "inconclusive")

class ContextExtensionTable(unittest.TestCase):
    """The context-extension table on a planted summary: RoPE degrades beyond L (+1.0 at 4x),
    YaRN zero-shot is 0.2 better than the better of PI and NTK, one condition fails the gate, and
    the passkey is at the floor for both fine-tunes (rule 4: the loss part agrees, the passkey
    part is inconclusive)."""

    def planted(self):
        rows = []

        def add(variant, length, loss, kind="length", seed_noise=(0.0, 0.01, -0.01), ok=True,
                **extra):
            for seed, noise in zip((41, 42, 43), seed_noise):
                rows.append({"run": f"{variant},train.seed={seed}", "train.seed": seed,
                             "variant": variant, "kind": kind, "seq_len": length,
                             "loss": loss + noise, "in_distribution_ok": ok, **extra})

        for variant, base in (("rope64", 1.40), ("zs_linear_s4", 1.60), ("zs_ntk_s4", 1.55),
                              ("zs_yarn_s4", 1.35)):
            add(variant, 64, base, kind="main")
            growth = 1.0 if variant == "rope64" else 0.1
            add(variant, 256, base + growth)
        add("ft_linear_400", 256, 1.50, kind="main")
        add("ft_none_400", 256, 2.00, kind="main")
        for variant in ("ft_linear_400", "ft_none_400"):
            add(variant, 256, 0.0, kind="passkey", seed_noise=(0, 0, 0),
                passkey_greedy_exact_match=0.0)
        add("nope64", 64, 9.0, kind="main", ok=False)  # dropped by the gate
        return pd.DataFrame(rows)

    def table(self, summary=None, by_position=None):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            (self.planted() if summary is None else summary).to_csv(
                os.path.join(tmp, "summary.csv"), index=False)
            if by_position is not None:
                by_position.to_csv(os.path.join(tmp, "loss_by_position.csv"), index=False)
            record = rules.Tally()
            text = tables.claims_table(tmp, record, kind="context_extension")
        return text, record

    def line(self, text, start):
        found = [l for l in text.splitlines() if l.startswith(start)]
        self.assertEqual(len(found), 1, start)
        return found[0]

    def test_planted_effects(self):
        text, _ = self.table()
        self.assertIn("gate dropped 3 (nope64", text)
        rope = self.line(text, "| 1. RoPE read beyond L without extension degrades (Chen et al. 2023) | perplexity at the extended window; here the loss at that length | rope64, loss at 4x")
        self.assertTrue(rope.endswith("| agree |"), rope)
        yarn = self.line(text, "| 7. YaRN beats PI and NTK without fine-tuning")
        self.assertIn("-0.200", yarn)  # 1.45 - min(1.70, 1.65) at 4x
        self.assertTrue(yarn.endswith("| agree |"), yarn)
        ntk = self.line(text, "| 5. NTK-aware scaling beats PI without fine-tuning (s = 4, at 4x)")
        self.assertTrue(ntk.endswith("| agree |"), ntk)
        passkey = self.line(text, "| 4. fine-tuning without interpolation")
        # The skill rule: this study's models never read a passkey at L, so neither fine-tune
        # is judged on retrieval (before the rule: "inconclusive (both at the floor)").
        self.assertTrue(passkey.endswith(
            "| agree (loss), inconclusive (no skill at L: zs_linear_s4 (where ft_linear_400 "
            "starts) has no passkey read at L; no skill at L: rope64 (where ft_none_400 starts) "
            "has no passkey read at L) (passkey) |"), passkey)

    def test_whole_chunks_and_context_matched_are_both_shown_one_counted(self):
        # ft_linear_400 reads no further back than 8 bytes: loss 3.0 at positions 0-7 of a
        # chunk, 2.0 (+ a seed effect e = -0.01, 0, +0.01 beyond L) after, at 1x and 4x alike.
        # Whole chunks fall from 1x to 4x (fewer early tokens): 2.125 -> 2.031, rule 2 agrees;
        # context-matched, positions >= 64 at 4x minus 56..63 at 1x is e: inconclusive.
        summary = self.planted()
        summary = summary[~((summary["variant"] == "ft_linear_400") & (summary["kind"] == "main"))]
        rows, extra = [], []
        for seed, e in ((41, -0.01), (42, 0.0), (43, 0.01)):
            run = f"ft_linear_400,train.seed={seed}"
            for length in (64, 256):
                losses = [3.0 if p < 8 else 2.0 + (e if p >= 64 else 0.0) for p in range(length)]
                rows += [(run, seed, "ft_linear_400", "length", length, p, x)
                         for p, x in enumerate(losses)]
                extra.append({"run": run, "train.seed": seed, "variant": "ft_linear_400",
                              "kind": "length", "seq_len": length,
                              "loss": sum(losses) / length, "in_distribution_ok": True})
        summary = pd.concat([summary, pd.DataFrame(extra)], ignore_index=True)
        by_position = pd.DataFrame(rows, columns=["run", "train.seed", "variant", "kind",
                                                  "seq_len", "position", "loss"])
        text, record = self.table(summary, by_position)
        row2 = self.line(text, "| 2. PI fine-tuned briefly uses the extended window")
        self.assertIn("loss at 4x minus at 1x: -0.094", row2)
        self.assertTrue(row2.endswith("| agree |"), row2)
        self.assertIn("sensitivity, context-matched (positions >= L of the 4x chunks minus "
                      "positions 7L/8..L-1 of the 1x chunks): ", row2)
        self.assertIn("0.000 [-0.025, +0.025], n=3, "
                      "inconclusive (shown, not voted)", row2)
        # the sensitivity is not counted: Chen's comparisons are as many as without it
        chen = [v for paper, v in record.rows if paper == "Chen et al. 2023"]
        _, plain_record = self.table()
        self.assertEqual(len(chen),
                         len([v for paper, v in plain_record.rows if paper == "Chen et al. 2023"]))

    def test_missing_conditions_are_inconclusive_not_errors(self):
        text, record = self.table()
        xpos = self.line(text, "| 12. xPos extrapolates better than RoPE")
        self.assertIn("no runs", xpos)
        self.assertTrue(xpos.endswith("| inconclusive |"))
        self.assertIn("Sun et al. 2023", [paper for paper, _ in record.rows])


class PoseTable(unittest.TestCase):
    """The PoSE study's table (claims/studies/pose.py, Zhu et al.'s rows in
    claims/papers/zhu2023.py) on a planted summary: PoSE 0.01 above the full-length fine-tune
    and 0.40 below RandPos at every length, 3 seeds (both rows agree), then 0.20 above the
    full-length fine-tune (disagree), then the same data with one seed (no interval, every
    verdict inconclusive, as the committed study)."""

    def planted(self, pose_gap=0.01, seed_list=(1, 2, 3)):
        rows = []
        noise = {1: 0.0, 2: 0.01, 3: -0.01}
        for variant, base in (("ft256_pi", 2.00), ("pose_pi", 2.00 + pose_gap),
                              ("randpos_pi", 2.40 + pose_gap), ("pi_zero", 3.50)):
            for seed in seed_list:
                for length in (64, 128, 192, 256):
                    rows.append({"run": f"{variant},train.seed={seed}", "train.seed": seed,
                                 "variant": variant, "kind": "length", "seq_len": length,
                                 "split": "valid", "loss": base + noise[seed] + 0.001 * seed
                                 * (variant == "pose_pi"),
                                 "in_distribution_ok": variant != "pi_zero"})
                rows.append({**rows[-1], "kind": "main"})
        return pd.DataFrame(rows)

    def table(self, summary):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            summary.to_csv(os.path.join(tmp, "summary.csv"), index=False)
            record = rules.Tally()
            text = tables.claims_table(tmp, record, kind="pose")
        return text, record

    def rows(self, text):
        found = [l for l in text.splitlines() if "(Zhu et al. 2023)" in l]
        self.assertEqual(len(found), 2, text)
        return found

    def test_planted_effects(self):
        text, record = self.table(self.planted())
        self.assertIn("gate dropped 3 (pi_zero", text)
        self.assertIn("on the valid split", text)
        self.assertIn("read at 64, 128, 192, 256 bytes; 3 seeds", text)
        full, randpos = self.rows(text)
        self.assertIn("pose_pi minus ft256_pi, loss at 64: +0.012 [", full)
        self.assertTrue(full.endswith("| agree |"), full)
        self.assertIn("pose_pi minus randpos_pi, loss at 64: -0.398 [", randpos)
        self.assertTrue(randpos.endswith("| agree |"), randpos)
        # each length is one comparison
        self.assertEqual(record.rows, [("Zhu et al. 2023", ["agree"] * 4)] * 2)

    def test_far_from_the_full_length_fine_tune_disagrees(self):
        full, randpos = self.rows(self.table(self.planted(pose_gap=0.20))[0])
        self.assertTrue(full.endswith("| disagree |"), full)
        self.assertTrue(randpos.endswith("| agree |"), randpos)

    def test_one_seed_shows_no_interval_and_is_inconclusive(self):
        text, record = self.table(self.planted(seed_list=(1,)))
        self.assertIn("one seed, so no interval and every verdict inconclusive", text)
        for row in self.rows(text):
            self.assertNotIn("[", row)
            self.assertEqual(row.count("(1 seed)"), 4, row)
            self.assertTrue(row.endswith("| inconclusive |"), row)
        self.assertEqual(record.rows, [("Zhu et al. 2023", ["inconclusive"] * 4)] * 2)

if __name__ == "__main__":
    unittest.main(verbosity=1)
