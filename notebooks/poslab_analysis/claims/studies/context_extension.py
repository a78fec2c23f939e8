"""The context-extension study (experiments/context_extension.protocol.md, rules 1 to 12):
RoPE models trained at L = 64 bytes, extended by scaling their positions (PI, NTK-aware, YaRN,
dynamic NTK) zero-shot or with a short fine-tune, beside ALiBi and xPos trained at L and RoPE
trained at 4L. Lengths in bytes (2x = 128, 4x = 256, 16x = 1,024); loss in nats per byte on the
test split; every comparison paired by seed (a stage-2 run and its rope64 parent share the
seed). Its table: the gate line, the papers' rows, and a note on settling run 6 if it has run."""
import numpy as np
import pandas as pd

from poslab_analysis.claims.rules import fmt, qualified, table_head, tally, unless, verdict
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds

CE_TRAIN_LEN = 64      # L: every stage-1 model but rope256 trained on 64-byte chunks
CE_BUDGET = 400        # B, the fine-tuning budget read at every length (pilot 2)
CE_BUDGETS = (50, 100, 200, 400)
CE_WITHIN = 0.05       # nats/byte: "relatively well", "usable", "within reach of rope256"
METHODS = ("none", "linear", "ntk", "yarn")
SETTLE = "settle_zero_shot_gate"


def ce_rows(summary, variant, kinds=("length", "main"), gate=True):
    """The gated rows (every row with gate=False) of one variant of the context-extension
    study."""
    rows = summary[(summary["variant"] == variant) & summary["kind"].isin(kinds)]
    return rows[seeds.gate_passed(rows)] if gate else rows


def ce_loss(summary, variant, length, gate=True):
    """Test loss of every gated seed of `variant` on chunks of `length` bytes (its scaling on):
    Series over seeds. A fine-tune's main evaluation is its only reading at 256 bytes when the
    study reads it at no other length (budgets below B)."""
    rows = ce_rows(summary, variant, gate=gate)
    rows = rows[rows["seq_len"] == length].drop_duplicates("train.seed")
    return rows.set_index("train.seed")["loss"]


def ce_passkey(summary, variant, length):
    """The paper's passkey metric, greedy exact match, of every gated seed at `length` bytes,
    averaged over the depths (Series over seeds)."""
    rows = ce_rows(summary, variant, kinds=("passkey",))
    rows = rows[rows["seq_len"] == length]
    return rows.groupby("train.seed")["passkey_greedy_exact_match"].mean()


def ce_gate_line(summary):
    """Which runs the gate dropped (loss at the run's own main evaluation not below the bigram
    baseline of the test split)."""
    main = summary[summary["kind"] == "main"]
    dropped = sorted(main[~seeds.gate_passed(main)]["run"])
    return (f"{main['run'].nunique()} runs, gate dropped {len(dropped)}"
            + (f" ({'; '.join(dropped)})" if dropped else ""))


def zero_shot_settle_loss(settle, variant, length):
    """Settling run 6 (experiments/settle/zero_shot_gate.protocol.md): the test loss of `variant`
    at `length` bytes per seed, under its amended gate: a run that trains counts if it passes
    the gate, a zero-shot read if its parent (rope64 of the same seed) does."""
    main = settle[settle["kind"] == "main"].drop_duplicates("run")
    passed = set(main[(main["variant"] == "rope64")
                      & seeds.gate_passed(main)]["train.seed"])
    rows = settle[(settle["variant"] == variant) & settle["kind"].isin(["length", "main"])
                  & (settle["seq_len"] == length) & settle["train.seed"].isin(passed)]
    return rows.drop_duplicates("train.seed").set_index("train.seed")["loss"]


def zero_shot_settle_line(settle):
    """Which runs settling run 6 has and which its amended gate dropped, and each zero-shot
    read's loss at L (what the study's gate judged)."""
    main = settle[settle["kind"] == "main"].drop_duplicates("run")
    parents = main[main["variant"] == "rope64"]
    dropped = parents[~seeds.gate_passed(parents)]
    at_l = "; ".join(
        f"{v} {fmt(*seeds.t_interval(zero_shot_settle_loss(settle, v, CE_TRAIN_LEN)))}"
        for v in ("zs_linear_s4", "zs_ntk_s4", "zs_yarn_s4"))
    return (f"settling run 6: {len(main)} runs, seeds "
            f"{', '.join(str(int(x)) for x in sorted(main['train.seed'].unique()))}, the amended "
            f"gate dropped {len(dropped)} rope64 runs (and their reads); loss at L of each "
            f"zero-shot read: {at_l} (bigram {main['bigram_loss'].iloc[0]:.3f})")


def best_of(a, b):
    """Per seed, the smaller of two losses (the better of two methods)."""
    common = a.index.intersection(b.index)
    return np.minimum(a[common], b[common])


class Study:
    """What the papers' rows read: losses by variant and length (gated, or every run), the
    fine-tunes by method and budget, settling run 6, and the table's row format."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary = study_files.read_summary(study_dir)
        self.by_position = study_files.read_loss_by_position(study_dir)
        # ft[(method, steps)]: the fine-tune of `method` with `steps` steps; ft_b: at budget B.
        self.ft = {(method, steps): f"ft_{method}_{steps}" for method in METHODS
                   for steps in CE_BUDGETS}
        self.ft_b = {method: self.ft[(method, CE_BUDGET)] for method in METHODS}
        # 5 and 7 are judged on the study's runs, then (settling run 6, if it has run) on fresh
        # seeds where a zero-shot read counts when its parent passed the gate.
        self.settle = study_files.read_sibling(study_dir, SETTLE, family="context_extension")
        settle_source = ("; settling run 6: fresh seeds, a zero-shot read counts when its "
                         "parent passed the gate")
        # (how a rule reads the loss, the claim's suffix, show the every-run comparison beside it?)
        self.readings = [(self.loss, "", True)] + ([(self.settle_loss, settle_source, False)]
                                                   if self.settle is not None else [])

    def loss(self, variant, multiple, gate=True):
        """Loss of `variant` at `multiple` x L, per seed."""
        return ce_loss(self.summary, variant, int(multiple * CE_TRAIN_LEN), gate)

    def settle_loss(self, variant, multiple, gate=True):  # gate: the parent's, always
        return zero_shot_settle_loss(self.settle, variant, int(multiple * CE_TRAIN_LEN))

    def position_loss(self, variant, multiple, first, end):
        """Mean loss of `variant`'s tokens at positions first .. end-1 of its multiple x L chunks,
        per gated seed (Series; empty without loss by position). The context-matched readings
        compare tokens by how much context they see, not whole chunks, whose mean falls as a
        chunk grows even for a model that reads no further than L back (fewer tokens with little
        context: the early-token curse)."""
        if self.by_position is None:
            return pd.Series(dtype=float)
        gated = set(ce_rows(self.summary, variant)["run"])
        bp = self.by_position
        rows = bp[(bp["variant"] == variant) & (bp["kind"] == "length")
                  & (bp["seq_len"] == int(multiple * CE_TRAIN_LEN)) & bp["run"].isin(gated)
                  & (bp["position"] >= first) & (bp["position"] < end)]
        return rows.groupby("train.seed")["loss"].mean()

    def beyond_l(self, variant, multiple):
        """Per seed: the mean loss of the tokens at positions >= L of the multiple x L chunks
        (each sees at least L bytes of context)."""
        return self.position_loss(variant, multiple, CE_TRAIN_LEN, int(multiple * CE_TRAIN_LEN))

    def last_eighth(self, variant):
        """Per seed: the mean loss of positions 7L/8 .. L-1 of the 1x chunks (context 56-63 at
        L = 64: the fullest context a read at L gives)."""
        return self.position_loss(variant, 1, 7 * CE_TRAIN_LEN // 8, CE_TRAIN_LEN)

    def passkey(self, variant, multiple):
        return ce_passkey(self.summary, variant, int(multiple * CE_TRAIN_LEN))

    # The gate reads each run at its own main evaluation, scaling on: a zero-shot scaling that
    # spoils the model at L (PI: every position squeezed by s) is dropped with it, and a rule
    # that needs it has no runs. Such rows also show the comparison with every run kept, as
    # information outside the protocol (no verdict).
    @staticmethod
    def ungated(make):
        return (f"; outside the protocol, every run kept (the zero-shot runs the gate dropped "
                f"too): {fmt(*make(False))}")

    @staticmethod
    def row(claim, source, paper, measured, interval, rule_text, judged, record, extra="",
            reasons=(), note=None):
        """A claims row of `source` (a paper's name), judged by `judged` = (agrees, disagrees)
        on `interval`, unless one of `reasons` says an arm lacks the skill or the paper's setting
        (rules.unless); `note` qualifies the verdict (rules.qualified). The verdict is counted in
        `record`."""
        v = unless(reasons, verdict(interval, *judged))
        if note:
            v = qualified(v, note)
        tally(record, source, [v], row=f"{claim.split(' ')[0]} {source}",
              evidence=[(interval, judged)])
        return (f"| {claim} ({source}) | {paper} | {measured}: {fmt(*interval)}{extra} | "
                f"{rule_text} | {v} |")

    @staticmethod
    def reference(claim, paper, measured):
        """A row measured for reference: no rule, not counted."""
        return f"| {claim} | {paper} | {measured} | reported, no rule | (reference) |"


def table(study_dir, papers, record=None):
    """The claims table: the gate line, the papers' rows (paper.context_extension(study,
    record) -> lines) and, if it has run, a note on settling run 6."""
    study = Study(study_dir)
    intro = (f"{ce_gate_line(study.summary)}. Loss in nats per byte on the test split (the "
             "papers: perplexity of LLaMA models on long documents, passkey accuracy); L = 64 "
             "bytes; every difference paired over seeds.")
    lines = table_head(intro)
    for paper in papers:
        lines += paper.context_extension(study, record)
    if study.settle is not None:
        lines.append(f"\nRows marked settling run 6: results/settle_zero_shot_gate, "
                     f"{zero_shot_settle_line(study.settle)}.")
    return "\n".join(lines)
