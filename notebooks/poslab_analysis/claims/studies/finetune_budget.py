"""Retrieval against the fine-tuning budget (experiments/finetune_budget.toml and its protocol,
experiments/finetune_budget.protocol.md; issue 48), and its second round
(experiments/finetune_budget2.toml: lr 3e-4, 5,000 steps, seeds 131-133, the same claims and
rules; tables.ROUNDS gives it this table). Three RoPE bases (rope64_s48k) trained at L = 64 bytes with half of their rows passkey instances; from each, fine-tunes
at 256 with the passkey mix (ft_none, ft_pi_s4, ft_yarn_s4, ft_yarn_s8, and PoSE at 64 with ids
covering 256: pose_pi_s4), the continuation control cont64 and the step-0 reads zs_*.

What the table reads:
  - STUDY/passkey_curve.csv: the reads during training (VALIDATION split, 50 instances per
    depth): the gate (the bases' curves at 64), the continuation control (cont64's at 64), and
    each fine-tune's curve at 256 (area, first read >= 0.9);
  - STUDY/summary.csv: the final reads (TEST split): passkey greedy exact match per depth
    (kind "passkey") and the loss on the whole test split (kind "length").

The protocol fixes every rule; they are stated next to the code that applies them below
(`base_gate`, `control_check`, `Study.area`, `Study.first_at_gate`, `Study.final`) and in the
papers' rows (claims/papers/chen2023.py, peng2023.py, zhu2023.py: `finetune_budget`). The
protocol's gate and control take the place of the skill rule of rules.py for this study: the
bases must retrieve at L (the gate), and the fine-tunes are read against their steps from a
base that does, with the control showing the fine-tuning path keeps the skill; the step-0 reads
(zs_*: the scaled ones read 0.00 at 64 in the pilot, which rules.no_skill would count against
PI, YaRN and PoSE) are shown as secondary rows, not used to drop a row.
"""
import json
import os
import tomllib

import pandas as pd

from poslab_analysis.claims.rules import Tally, fmt, table_head, tally, unless, verdict
from poslab_analysis.reading import protocol_gates, study_files
from poslab_analysis.statistics import budget_curve, seeds

L = 64                # the bases' training length, bytes
TARGET = 256          # sL for s = 4: where the fine-tunes are judged
GATE = 0.9            # greedy exact match: the gate, the control, the retrieval rows' threshold
DEPTHS = 5            # 0, 0.25, 0.5, 0.75, 1: every read covers them all
CONTROL_AFTER = 250   # the control is judged on the reads after the first 250 steps
BASE = "rope64_s48k"
CONTROL = "cont64"
# The fine-tuning arms, as the rows name them.
ARMS = {"ft_none": "none", "ft_pi_s4": "PI s = 4", "ft_yarn_s4": "YaRN s = 4",
        "ft_yarn_s8": "YaRN s = 8", "pose_pi_s4": "PoSE (PI s = 4)"}
STEP_ZERO = ("zs_none", "zs_pi_s4", "zs_yarn_s4", "zs_yarn_s8")


def base_gate(curve, seed):
    """The protocol's gate for the base of `seed`: "a base passes when the last read of its
    curve (step 48,000, validation, 50 instances per depth) is >= 0.9 greedy exact match at 64
    at every depth". Returns (step of the last read or None, why it fails or None)."""
    rows = curve[(curve["variant"] == BASE) & (curve["train.seed"] == seed)
                 & (curve["seq_len"] == L)]
    if rows.empty:
        return None, f"no curve read of {BASE} at {L}"
    # The same test drops the failing bases and their fine-tunes from the figures and
    # summary_ci.csv (reading/protocol_gates.py's PasskeyCurveGate).
    return protocol_gates.last_read_fails(rows, L, GATE, DEPTHS)


# The control's rule, per round (the study file's name; a name not listed: "cells").
#   "cells" (rounds 1 and 2): every cell, one depth of one read (50 instances), >= 0.9.
#   "means" (round 3, experiments/finetune_budget3.protocol.md): every read's mean over the 5
#     depths (250 instances) >= 0.9, and at every depth the mean over the reads >= 0.9.
# Why round 3 changed it: a control whose true retrieval is 0.97 in every cell has a cell below
# 0.9 by sampling alone with probability 0.0037 (binomial, 44 of 50 or fewer), so one of 240 with
# probability 0.59; its read means (250 instances) fall below 0.9 with probability < 1e-6 each.
CONTROL_RULES = {"finetune_budget3": "means"}


def control_check(curve, seed, rule="cells"):
    """The continuation control of `seed`, judged on cont64's reads at 64 after the first 250
    steps (those at 50-250 are not judged) by `rule` (CONTROL_RULES): "cells": "cont64 must
    keep >= 0.9 greedy exact match at 64 at every depth on every read after the first 250
    steps"; "means": each read's mean over the depths >= 0.9 and each depth's mean over the
    reads >= 0.9. Returns (verdict, why): ("kept", None), ("failed", what fell below 0.9 first
    and how much did) or ("not read", why) when cont64 has no read at 64 after step 250 (not run
    yet, or a smoke run's few steps)."""
    rows = curve[(curve["variant"] == CONTROL) & (curve["train.seed"] == seed)
                 & (curve["seq_len"] == L) & (curve["step"] > CONTROL_AFTER)]
    if rows.empty:
        return "not read", f"{CONTROL} of seed {seed} has no read at {L} after step {CONTROL_AFTER}"
    short = [(step, n) for step, n in rows.groupby("step")["depth"].nunique().items()
             if n < DEPTHS]
    if short:
        return "failed", (f"{CONTROL} of seed {seed}: the read at step {short[0][0]:,} covers "
                          f"{short[0][1]} of {DEPTHS} depths")
    if rule == "means":
        reads = rows.groupby("step")["greedy_exact_match"].mean()
        depths = rows.groupby("depth")["greedy_exact_match"].mean()
        low_reads, low_depths = reads[~(reads >= GATE)], depths[~(depths >= GATE)]
        if low_reads.empty and low_depths.empty:
            return "kept", None
        parts = ([f"its read at step {low_reads.index[0]:,} averages {low_reads.iloc[0]:.3f} over "
                  f"the depths; {len(low_reads)} of {len(reads)} reads after step "
                  f"{CONTROL_AFTER} below {GATE}"] if len(low_reads) else []) + \
                ([f"its reads at depth {d:g} average {v:.3f}" for d, v in low_depths.items()])
        return "failed", f"{CONTROL} of seed {seed} at {L}: " + "; ".join(parts)
    below = rows[~(rows["greedy_exact_match"] >= GATE)].sort_values(["step", "depth"])
    if below.empty:
        return "kept", None
    first = below.iloc[0]
    return "failed", (f"{CONTROL} of seed {seed} reads {first['greedy_exact_match']:.2f} at {L} "
                      f"(depth {first['depth']:g}, step {int(first['step']):,}); "
                      f"{len(below)} of {len(rows)} cells after step {CONTROL_AFTER} below {GATE}")


class Study:
    """What the papers' rows read: per base seed that passed the gate, each arm's area, first
    read >= 0.9 and final read, and the loss; the gate's and the control's outcome per seed."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.name = study_name(study_dir)
        self.control_rule = CONTROL_RULES.get(self.name, "cells")
        self.summary = study_files.read_checked_summary(os.path.join(study_dir, "summary.csv"))
        self.curve = read_curve(study_dir)
        self.smoke = read_smoke(study_dir)
        self.planned = planned_seeds(study_dir)  # the sweep's seeds (study.toml), or None
        self.seeds = sorted(set(self.summary["train.seed"].dropna().astype(int))
                            | set(self.curve["train.seed"].dropna().astype(int)))
        # The gate, per base seed: {seed: (last step, why it fails or None)}.
        self.gate = {seed: base_gate(self.curve, seed) for seed in self.seeds}
        self.passed = [seed for seed in self.seeds if self.gate[seed][1] is None]
        self.dropped = {seed: why for seed, (_, why) in self.gate.items() if why is not None}
        # The control, on the seeds whose base passed (a dropped base's fine-tunes count in no
        # comparison, so neither does its control).
        self.control = {seed: control_check(self.curve, seed, self.control_rule)
                        for seed in self.passed}
        # The curves' statistics, per (run, seq_len), with the run's variant and seed beside.
        runs = self.curve[["run", "variant", "train.seed"]].drop_duplicates("run")
        stats = budget_curve.summary(budget_curve.per_read(self.curve), GATE) \
            if len(self.curve) else pd.DataFrame(columns=["run", "seq_len"])
        self.curve_stats = stats.merge(runs, on="run", how="left")
        self.variants = (study_files.variant_table(study_dir)
                         if os.path.exists(os.path.join(study_dir, "study.toml")) else None)

    def bases(self):
        """How many bases the study has: the seeds the study file sweeps and any other seed
        read (a study still running has fewer finished than planned)."""
        return len(set(self.planned or []) | set(self.seeds))

    # ---- the reasons no fine-tuning row counts ----

    def control_reasons(self):
        """The reasons every fine-tuning row is inconclusive: the control failed for some
        passing seed ("the fine-tuning path is wrong and no fine-tuning row counts"), or was not
        read for it. Empty when it kept retrieval for every passing seed."""
        failed = [why for outcome, why in self.control.values() if outcome == "failed"]
        unread = [seed for seed, (outcome, _) in self.control.items() if outcome == "not read"]
        return ([f"continuation control failed: {'; '.join(failed)}"] if failed else []) + \
            ([f"continuation control not read for seed {', '.join(map(str, unread))}"]
             if unread else [])

    def judged(self, interval, rule):
        """The verdict of a fine-tuning row: the protocol's rule = (agrees, disagrees) on the
        interval (rules.verdict: at least 2 seeds), unless the continuation control did not
        keep retrieval (rules.unless: "inconclusive (continuation control ...)")."""
        few = ([f"{len(self.passed)} of {self.bases()} bases passed the gate, a verdict "
                "needs 2"] if len(self.passed) < 2 else [])
        return unless(few + self.control_reasons(), verdict(interval, *rule))

    # ---- per seed that passed the gate (Series indexed by train.seed) ----

    def _curve_stat(self, variant, length, column):
        s = self.curve_stats
        if column not in s:  # no curve in the study: no statistics
            return pd.Series(dtype=float)
        rows = s[(s["variant"] == variant) & (s["seq_len"] == length)
                 & s["train.seed"].isin(self.passed)]
        return rows.set_index("train.seed")[column].astype(float).sort_index()

    def area(self, variant, length=TARGET):
        """"area: the area under the curve of greedy exact match at 256 (mean over the 5
        depths) against steps, divided by 2,500" (round 2: by 5,000, its budget):
        budget_curve.summary's area_per_step (each read weighted by the steps since the previous
        one, the first read's value standing from step 0, divided by the last read's step: the
        budget for a finished fine-tune; budget_note warns when it is not)."""
        return self._curve_stat(variant, length, "area_per_step")

    def first_at_gate(self, variant, length=TARGET):
        """"first >= 0.9: the first read whose mean over depths is >= 0.9" (NaN: never)."""
        return self._curve_stat(variant, length, "first_mean_at_gate")

    def last_step(self, variant, length=TARGET):
        """The step of the curve's last read (the budget for a finished fine-tune)."""
        return self._curve_stat(variant, length, "last_step")

    def final(self, variant, length):
        """"final: the test read's greedy exact match at 256 (at 512 for claim 4), mean over
        depths": summary.csv's passkey rows at `length` bytes, a seed counted only when all 5
        depths were read."""
        s = self.summary
        rows = s[(s["variant"] == variant) & (s["kind"] == "passkey") & (s["seq_len"] == length)
                 & s["train.seed"].isin(self.passed)]
        by_seed = rows.groupby("train.seed")["passkey_greedy_exact_match"]
        full = by_seed.count() >= DEPTHS
        return by_seed.mean()[full].astype(float).sort_index()

    def loss(self, variant, length):
        """The loss on the whole test split in chunks of `length` bytes (kind "length")."""
        s = self.summary
        rows = s[(s["variant"] == variant) & (s["kind"] == "length") & (s["seq_len"] == length)
                 & s["train.seed"].isin(self.passed)].drop_duplicates("train.seed")
        return rows.set_index("train.seed")["loss"].astype(float).sort_index()

    def curve_means(self, variant, length):
        """The curve's mean over depths at each read, averaged over the passing seeds: a Series
        indexed by step."""
        c = self.curve
        rows = c[(c["variant"] == variant) & (c["seq_len"] == length)
                 & c["train.seed"].isin(self.passed)]
        per_seed = rows.groupby(["train.seed", "step"])["greedy_exact_match"].mean()
        return per_seed.groupby("step").mean()

    def final_split(self):
        """The split of the final reads, as summary.csv says ("test" in the study; a pilot read
        validation)."""
        splits = self.summary.loc[self.summary["kind"] == "passkey", "split"].dropna().unique()
        return " and ".join(sorted(map(str, splits))) or "(no final read)"

    # ---- the row format ----

    def regime(self, variant):
        """The regime an arm is measured in, from the committed study file: "PI s = 4,
        fine-tuned 2,500 steps at sL = 256 with the passkey mix (0.5), L = 64"."""
        if self.variants is None or variant not in self.variants.index:
            return f"{variant} (no study.toml)"
        v = self.variants.loc[variant]
        mix = (f"with the passkey mix ({v['passkey_fraction']:g})" if v["passkey_fraction"] > 0
               else "on text without passkey rows")
        steps = f"{v['steps']:,} steps"
        if variant.startswith("pose"):
            how = (f"PoSE: fine-tuned {steps} at {v['seq_len']} with position ids covering "
                   f"{TARGET}, linear s = {v['factor']:g}")
        else:
            s = "" if v["scaling"] == "none" else f" s = {v['factor']:g}"
            name = {"none": "no scaling", "linear": "PI", "yarn": "YaRN"}.get(v["scaling"],
                                                                            v["scaling"])
            how = f"{name}{s}, fine-tuned {steps} at {v['seq_len']}"
        return f"{how} {mix}, L = {L}"

    @staticmethod
    def per_seed(series, digits=3):
        """'111: 0.950, 112: 0.904' (NaN: never; no seeds: "no runs")."""
        return ", ".join(f"{seed}: {'never' if v != v else f'{v:,.{digits}f}'}"
                         for seed, v in series.items()) or "no runs"

    def row(self, claim, source, regime, paper, measured, interval, rule_text, rule, record,
            extra="", shown=None):
        """A claims row of `source` (a paper's name) with its regime column, judged by the
        protocol's `rule` = (agrees, disagrees) on the t interval over the passing seeds
        (`judged`: inconclusive while the control has not kept retrieval); `shown`: the interval
        as printed (clipped to the metric's range), else `interval`. Counted in `record`."""
        v = self.judged(interval, rule)
        tally(record, source, [v], row=f"{claim.split(' ')[0]} {source}",
              evidence=[(interval, rule)])
        return (f"| {claim} ({source}) | {regime} | {paper} | {measured}: "
                f"{fmt(*(shown or interval))}{extra} | {rule_text} | {v} |")


CURVE_COLUMNS = ("run", "train.seed", "variant", "step", "seq_len", "depth",
                 "greedy_exact_match", "digit_accuracy")


def read_curve(study_dir):
    """STUDY/passkey_curve.csv (`poslab run` gathers the runs' curves into it), or an empty
    table without one (then no base can pass the gate). A file without the columns the table
    reads is refused, naming the file and the columns."""
    path = os.path.join(study_dir, "passkey_curve.csv")
    if not os.path.exists(path):
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    curve = pd.read_csv(path)
    missing = [c for c in CURVE_COLUMNS if c not in curve.columns]
    if missing:
        raise study_files.StudyFileError(
            f"{path} has no column {', '.join(repr(c) for c in missing)}; is it the passkey curve "
            "`poslab run` gathers (run, axes, variant, parent, then step, factor, seq_len, "
            "depth, ...)?")
    return curve


def study_file(study_dir):
    """STUDY/study.toml (the copy of the study file `poslab run` keeps), parsed; {} without it."""
    path = os.path.join(study_dir, "study.toml")
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        return tomllib.load(f)


def planned_seeds(study_dir):
    """The base seeds the study file sweeps ([sweep] "train.seed" of STUDY/study.toml), or None
    without the file: the gate line counts the bases against them, finished or not."""
    values = study_file(study_dir).get("sweep", {}).get("train.seed")
    return sorted(int(v) for v in values) if values else None


def read_smoke(study_dir):
    """Is the study a smoke run (run_options.json, written by `poslab run`)?"""
    path = os.path.join(study_dir, "run_options.json")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return bool(json.load(f).get("smoke", False))


def gate_line(study):
    """How many of the bases passed the gate (of the seeds the study file sweeps), which were
    dropped and why, and which have not been read yet (a study still running)."""
    n = study.bases()
    unread = [seed for seed in study.planned or [] if seed not in study.seeds]
    steps = sorted({step for step, _ in study.gate.values() if step is not None})
    read = f"last read at step {', '.join(f'{s:,}' for s in steps)}" if steps else "no reads"
    dropped = "; ".join(f"{BASE} seed {seed} dropped with its fine-tunes ({why})"
                        for seed, why in study.dropped.items())
    return (f"Gate: {len(study.passed)} of {n} bases passed (>= {GATE} greedy exact match at "
            f"{L} at every depth on the last read of the validation curve; {read})"
            + (f"; {dropped}" if dropped else "")
            + (f"; not read yet (no finished run): seed {', '.join(map(str, unread))}"
               if unread else ""))


def control_line(study):
    """The continuation control per passing seed; a failure is said loudly."""
    failed = [why for outcome, why in study.control.values() if outcome == "failed"]
    unread = [why for outcome, why in study.control.values() if outcome == "not read"]
    kept = [seed for seed, (outcome, _) in study.control.items() if outcome == "kept"]
    parts = []
    if failed:
        parts.append("**CONTINUATION CONTROL FAILED: " + "; ".join(failed) + ". The fine-tuning "
                     "path does not keep retrieval at L, so by the protocol no fine-tuning row "
                     "counts: every one below is inconclusive.**")
    if unread:
        parts.append("Continuation control not read: " + "; ".join(unread)
                     + "; every fine-tuning row below is inconclusive until it is.")
    if kept:
        rule = (f">= {GATE} at {L} at every depth on every read after step {CONTROL_AFTER}"
                if study.control_rule == "cells" else
                f"at {L} after step {CONTROL_AFTER}, every read's mean over the depths and every "
                f"depth's mean over the reads >= {GATE}")
        parts.append(f"Continuation control ({CONTROL}, {rule}): kept for seed "
                     f"{', '.join(str(s) for s in kept)}.")
    return " ".join(parts)


def secondary_rows(study):
    """The protocol's secondary rows, without verdicts: each arm's final retrieval at 64 (what
    the fine-tune keeps), the test loss at 64 and 256 against cont64's (paired by seed), the
    steps to a mean of 0.9 at 256, and the step-0 reads."""
    split = study.final_split()

    def retrieval(variant, length):  # the final read's interval over the passing seeds
        return fmt(*seeds.proportion_interval(study.final(variant, length).tolist()))

    kept = [f"{name} {retrieval(arm, L)}" for arm, name in ARMS.items()]
    lines = [secondary(f"each arm's final retrieval at {L} (what the fine-tune keeps)",
                       f"{split} greedy exact match at {L}, mean over depths: "
                       f"{'; '.join(kept)}; {CONTROL} {retrieval(CONTROL, L)}")]
    for length in (L, TARGET):
        control = study.loss(CONTROL, length)
        minus = [f"{name} {fmt(*seeds.paired(study.loss(arm, length), control))}"
                 for arm, name in ARMS.items()]
        lines.append(secondary(f"{split} loss at {length} against {CONTROL}'s",
                               f"arm minus {CONTROL}, nats per byte, paired by seed: "
                               f"{'; '.join(minus)} ({CONTROL} itself "
                               f"{fmt(*seeds.t_interval(control.tolist()))})"))
    first = [f"{name} {study.per_seed(study.first_at_gate(arm), 0)}" for arm, name in ARMS.items()]
    lines.append(secondary(f"steps to a mean of {GATE} at {TARGET}",
                           f"first validation read whose mean over depths is >= {GATE}, per "
                           f"seed: {'; '.join(first)}"))
    step_zero = [f"{variant} {L} {retrieval(variant, L)}, {TARGET} {retrieval(variant, TARGET)}"
                 for variant in STEP_ZERO]
    lines.append(secondary("step 0: each arm's scaling on the base, not fine-tuned",
                           f"{split} greedy exact match, mean over depths: "
                           f"{'; '.join(step_zero)}"))
    return lines


def budget_note(study):
    """A warning when a fine-tune's curve does not end at its planned steps (the area is divided
    by the last read's step, the protocol's budget): empty when every curve does, and for a
    smoke run (its steps are the [smoke] section's, not the study file's)."""
    if study.smoke or study.variants is None:
        return ""
    odd = []
    for arm in ARMS:
        planned = int(study.variants.loc[arm, "steps"]) if arm in study.variants.index else None
        for seed, step in study.last_step(arm).items():
            if planned is not None and step != planned:
                odd.append(f"{arm} seed {seed} ends at step {step:,.0f}, planned {planned:,}")
    return (" **Curves that do not end at their planned steps: " + "; ".join(odd) + ".**"
            if odd else "")


def secondary(what, measured):
    """A secondary row of the protocol: measured, no rule, no verdict, not counted."""
    return f"| (secondary) {what} | | not a claim | {measured} | reported, no rule | (no verdict) |"


def study_name(study_dir):
    """The study file's name (STUDY/study.toml's [study] name; "finetune_budget" without the
    file): it names the protocol the table applies and picks the control's rule."""
    return study_file(study_dir).get("study", {}).get("name", "finetune_budget")


def protocol_line(study):
    """Which protocol the table applies, so a later round's table names its amendment."""
    return f"Protocol: experiments/{study.name}.protocol.md. "


def table(study_dir, papers, record=None):
    """The claims table: the protocol, the gate line, the control line, the papers' rows
    (paper.finetune_budget(study, record) -> lines), the secondary rows and the Holm line."""
    study = Study(study_dir)
    intro = (("SMOKE RUN (tiny models, a few steps): the numbers test the code, not the claims. "
              if study.smoke else "")
             + protocol_line(study) + f"{gate_line(study)}. {control_line(study)} Retrieval: passkey greedy exact match, "
             f"mean over the {DEPTHS} depths; curves on the validation split (area, first read), "
             f"final reads and loss on the {study.final_split()} split; mean and 95% t interval "
             "over the passing base "
             f"seeds (n - 1 df), differences paired by seed; L = {L} bytes." + budget_note(study))
    lines = table_head(intro, regime=True)
    own = Tally()  # this table's verdicts, for its Holm line; then the caller's count
    for paper in papers:
        lines += paper.finetune_budget(study, own)
    lines += secondary_rows(study)
    own.pass_to(record)
    lines.append(own.holm_line())
    return "\n".join(lines)
