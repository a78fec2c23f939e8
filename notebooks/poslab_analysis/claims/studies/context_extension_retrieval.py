"""The context-extension study with retrieval (experiments/context_extension_retrieval.toml and
its protocol, rules 1-8 and 10-12): RoPE, ALiBi and xPos (scale_base L/2) trained at L = 64 bytes
with half of their rows passkey instances, so that they retrieve at L; RoPE then extended
zero-shot (PI, NTK, YaRN at s = 4, dynamic NTK) or fine-tuned at 256 on plain text (none, PI, NTK,
YaRN at s = 4 and 8; PI keeping the mix). Lengths in bytes; loss in nats per byte on the test
split; passkey = greedy exact match averaged over the five depths; every comparison paired by
seed (a stage-2 run and its rope64 parent share the seed).

The gate (the protocol's, reading/protocol_gates.py, which the figures and summary_ci.csv apply
too): a stage-1 run counts if its loss at L is below the bigram baseline and its passkey at L is
>= 0.9; a stage-2 run counts if its rope64 parent does (the protocol's text: stage-2 runs are
dropped with their parent, not by their own loss). Its table: the gate line, then the papers'
rows."""

import os

import pandas as pd

from poslab_analysis.claims.rules import ABOVE_ZERO, compare, fmt, no_signal, no_skill, \
    Tally, table_head, tally, unless
from poslab_analysis.claims.studies import context_extension
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds

TRAIN_LEN = 64        # L of every stage-1 model
FINE_TUNE_LEN = 256   # the fine-tunes' segment (4L)
WITHIN = 0.05         # nats/byte: "relatively well", "usable"


class Study:
    """What the papers' rows read: loss and passkey per seed by variant and length in bytes
    (gated), the context-matched positions, the sliding-window loss, and the row format."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary, self.why = study_files.read_gated_summary(study_dir)  # the protocol's
        self.dropped = [f"{run} ({why})" for run, why in self.why.items()]  # gate, its drops
        self.by_position = study_files.read_loss_by_position(study_dir)
        self.kept = set(self.summary["run"][seeds.gate_passed(self.summary)])
        self.bigram = float(self.summary["bigram_loss"].iloc[0])
        self.unigram = (float(self.summary["unigram_loss"].iloc[0])
                        if "unigram_loss" in self.summary else float("nan"))

    def _rows(self, variant, kinds, length):
        s = self.summary
        return s[(s["variant"] == variant) & s["kind"].isin(kinds) & (s["seq_len"] == length)
                 & s["run"].isin(self.kept)]

    def loss(self, variant, length, kinds=("length", "main")):
        """Loss of every gated seed of `variant` on chunks of `length` bytes (Series by seed)."""
        rows = self._rows(variant, kinds, length).drop_duplicates("train.seed")
        return rows.set_index("train.seed")["loss"]

    def sliding(self, variant, length):
        """The sliding-window loss (stride 64) at `length` bytes, per gated seed."""
        return self.loss(variant, length, kinds=("length_sliding", "main_sliding"))

    def passkey(self, variant, length):
        """Greedy exact match at `length` bytes, averaged over the depths, per gated seed."""
        rows = self._rows(variant, ("passkey",), length)
        return rows.groupby("train.seed")["passkey_greedy_exact_match"].mean()

    def position_loss(self, variant, length, first, end):
        """Mean loss of positions first .. end-1 of `variant`'s chunks of `length` bytes, per
        gated seed (empty without loss by position)."""
        bp = self.by_position
        if bp is None:
            return pd.Series(dtype=float)
        rows = bp[(bp["variant"] == variant) & (bp["kind"] == "length")
                  & (bp["seq_len"] == length) & bp["run"].isin(self.kept)
                  & (bp["position"] >= first) & (bp["position"] < end)]
        return rows.groupby("train.seed")["loss"].mean()

    def passkey_fraction(self, variant):
        """The share of `variant`'s training rows that were passkey instances (study.toml; the
        variant's own value, else the base's), or None if the study has no study.toml."""
        path = os.path.join(self.dir, "study.toml")
        if not os.path.exists(path):
            return None
        info = study_files.variant_table(self.dir)
        return float(info.loc[variant, "passkey_fraction"]) if variant in info.index else None

    def skill(self, arm, start=None):
        """The skill rule's reasons (rules.no_skill, rules.no_signal) for a retrieval row that
        judges `arm`: a zero-shot read (start None) is read at L itself; a fine-tune names
        `start`, the zero-shot read with its positions it starts from (PI's fine-tunes start
        from zs_linear_s4), and must have been fine-tuned on passkey rows."""
        if start is None:
            return [no_skill(arm, self.passkey(arm, TRAIN_LEN))]
        return [no_skill(f"{start} (where {arm} starts)", self.passkey(start, TRAIN_LEN)),
                no_signal(arm, self.passkey_fraction(arm))]

    @staticmethod
    def proportion(series):
        """fmt of a proportion's interval over seeds, bounded to [0, 1]
        (seeds.proportion_interval)."""
        return fmt(*seeds.proportion_interval(series.tolist()))

    row = staticmethod(context_extension.Study.row)
    reference = staticmethod(context_extension.Study.reference)

    @staticmethod
    def passkey_row(claim, source, paper, measured, a, b, record, extra="", reasons=()):
        """A claims row on passkey: A - B per seed, inconclusive when both sides sit at the
        floor (0) or the ceiling (1) of the metric, or when an arm lacks the skill (`reasons`,
        the skill rule); the interval bounded to [-1, 1]; counted in `record`."""
        interval, v = compare(a, b, ABOVE_ZERO, floor=0.0, ceiling=1.0)
        interval = seeds.clipped(interval, -1.0, 1.0)
        v = unless(reasons, v)
        tally(record, source, [v])
        return f"| {claim} ({source}) | {paper} | {measured}: {fmt(*interval)}{extra} | " \
               f"interval above 0 | {v} |"


def gate_line(study):
    """How many runs, which the gate dropped and why; a dropped rope64 whose stage-2 runs are
    not in the summary is said to have none run (protocol, amendment 1: they would be dropped)."""
    s = study.summary
    n = s["run"].nunique()
    dropped = study.dropped
    parents = set(s["parent"].dropna().astype(str)) if "parent" in s else set()
    childless = [run for run in study.why if run.startswith("rope64,") and run not in parents]
    return (f"{n} runs, gate dropped {len(dropped)}"
            + (f" ({'; '.join(dropped)})" if dropped else "")
            + (f"; the stage-2 runs of {', '.join(childless)} were not run (they would be dropped; "
               "protocol, amendment 1)" if childless else ""))


def table(study_dir, papers, record=None):
    """The claims table: the gate line, then the papers' rows
    (paper.context_extension_retrieval(study, record) -> lines)."""
    study = Study(study_dir)
    intro = (f"{gate_line(study)}. Loss in nats per byte on the test split, passkey as greedy "
             "exact match averaged over 5 depths (the papers: perplexity of LLaMA models on long "
             "documents, passkey accuracy); L = 64 bytes; every difference paired over seeds.")
    lines = table_head(intro)
    own = Tally()  # this table's verdicts, for its Holm line; then the caller's count
    for paper in papers:
        lines += paper.context_extension_retrieval(study, own)
    own.pass_to(record)
    lines.append(own.holm_line())
    return "\n".join(lines)

