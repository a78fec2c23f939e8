"""Gates of a study's protocol, in place of the runner's.

The runner writes `in_distribution_ok` into summary.csv: false when a run's loss at its own
training length is not below the test split's bigram baseline. A protocol may gate otherwise: a
retrieval study compares extension methods only on models that *retrieve* at their training
length, so its gate also asks for passkey retrieval there (experiments/
context_extension_retrieval.protocol.md, "Gate"). Such a gate is registered here under the
study's name, and `apply` turns it into the same column, so that every reader of summary.csv
(the figures, summary_ci.csv, the report, the claims tables) drops the same runs:

    summary, why = apply(summary, study_dir)   # in_distribution_ok: the protocol's gate;
                                               # why: {run: reason} of every run it drops

(A gate that reads the retrieval curves gathered during training, PasskeyCurveGate, finds them
in STUDY/passkey_curve.csv: hence the study folder.)

`study_files.read_summary` and `study_files.load` call it, so code that reads a study through
them never sees an ungated summary by accident.
"""
import os
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class RetrievalGate:
    """A stage-1 run (one without a parent) counts if (a) its loss at its training length is
    below the test split's bigram baseline and (b) its passkey greedy exact match at `length`
    bytes, averaged over the `depths` depths, is at least `threshold`; a stage-2 run (one with a
    parent) counts if its parent counts. The protocol's gate replaces the runner's for stage-2
    runs: whether the model learned its task in distribution is its parent's property, and a
    zero-shot read that spoils the loss at L (PI squeezes every pair) is a result, not an
    undertrained model (the first study's settling run 6 learnt this).

    Not implemented: the protocol keeps the loss rows of an arm whose *every* seed fails (b)
    (its passkey rows marked "no skill at L"); here such runs are dropped whole. No arm of the
    committed study did (tests/notebooks/test_claims_retrieval.py would need a case first)."""
    length: int        # the stage-1 training length, bytes
    threshold: float   # passkey greedy exact match at `length`, mean over the depths
    depths: int        # how many depths the mean must cover
    # Rows whose kind starts with this prefix need only (a), the loss, and their run's parent
    # to pass (a): their question is the loss, not retrieval (the streaming rows of
    # experiments/context_extension_methods.protocol.md, "Gate"). "" = no such rows.
    loss_only_kinds: str = ""

    def dropped(self, summary, retrieval=True):
        """{run: why} of every run this gate drops; retrieval=False: by (a) alone."""
        main = summary[summary["kind"] == "main"].drop_duplicates("run")
        passkey = summary[(summary["kind"] == "passkey") & (summary["seq_len"] == self.length)]
        at_length = passkey.groupby("run")["passkey_greedy_exact_match"].agg(["mean", "count"])
        stage1 = main["parent"].isna() | (main["parent"].astype(str) == "")
        why = {}
        for _, row in main[stage1].iterrows():
            run = row["run"]
            value, depths = (at_length.loc[run] if run in at_length.index else (float("nan"), 0))
            if not row["loss"] < row["bigram_loss"]:  # (a); NaN fails
                why[run] = "loss at L not below the bigram baseline"
            elif not retrieval:
                continue
            elif depths < self.depths:
                why[run] = f"passkey at L read at {int(depths)} of {self.depths} depths"
            elif not value >= self.threshold:  # (b)
                why[run] = f"passkey at L {value:.2f} < {self.threshold}"
        for _, row in main[~stage1].iterrows():
            if row["parent"] in why:
                why[row["run"]] = f"its parent {row['parent']} was dropped"
        return why


@dataclass(frozen=True)
class LossGate:
    """A run without a parent counts if its loss on its `main` row (the chunked read at its
    training length) is below the test split's bigram baseline; a run with a parent (a stage
    that only reads its parent's weights again, train.steps = 0) counts if its parent counts,
    whatever its own read gives (experiments/sink_token.protocol.md, "Gate": "a seed whose run
    fails is reported and dropped with its *_s1 child"). The runner's own gate judges the child
    by its own main row, here 4 batches instead of the whole split."""
    loss_only_kinds: str = ""  # every row of a run follows the run (see RetrievalGate)

    def dropped(self, summary, retrieval=True):
        """{run: why} of every run this gate drops (`retrieval` is RetrievalGate's; unused)."""
        main = summary[summary["kind"] == "main"].drop_duplicates("run")
        stage1 = main["parent"].isna() | (main["parent"].astype(str) == "")
        why = {}
        for _, row in main[stage1].iterrows():
            if not row["loss"] < row["bigram_loss"]:  # NaN fails
                why[row["run"]] = (f"loss at L {row['loss']:.3f} not below the bigram baseline "
                                   f"{row['bigram_loss']:.3f}")
        for _, row in main[~stage1].iterrows():
            if row["parent"] in why:
                why[row["run"]] = f"its parent {row['parent']} was dropped"
        return why


@dataclass(frozen=True)
class SeedLossGate:
    """A seed counts if every run of that seed passes the runner's loss gate (in_distribution_ok
    on its `main` row: the test loss at its training length below the bigram baseline); a seed
    where any run fails is dropped whole, every run of it (experiments/logn_trained.protocol.md,
    "Gate": "a seed whose either arm fails is dropped from the paired statistics and
    reported"), so that the figures and summary_ci.csv average over the seeds the paired rows
    use. A run not in summary.csv yet drops nothing."""
    loss_only_kinds: str = ""  # every row of a run follows the run (see RetrievalGate)

    def dropped(self, summary, retrieval=True):
        """{run: why} of every run this gate drops (`retrieval` is RetrievalGate's; unused)."""
        main = summary[summary["kind"] == "main"].drop_duplicates("run")
        ok = main["in_distribution_ok"].astype(str).str.strip().str.lower() == "true"
        why = {row["run"]: (f"test loss at {int(row['seq_len'])} {row['loss']:.3f}, bigram "
                            f"baseline {row['bigram_loss']:.3f}, in_distribution_ok "
                            f"{str(row['in_distribution_ok']).lower()}")
               for _, row in main[~ok].iterrows()}
        failed_seeds = set(main.loc[~ok, "train.seed"])
        for _, row in main[ok & main["train.seed"].isin(failed_seeds)].iterrows():
            why[row["run"]] = f"another run of seed {row['train.seed']} failed the loss gate"
        return why


def last_read_fails(rows, length, threshold, depths):
    """The fine-tuning budget protocol's test of one base's passkey curve (rows of
    STUDY/passkey_curve.csv of that run at `length` bytes, at least one): "a base passes when
    the last read of its curve is >= 0.9 greedy exact match at L at every depth". Returns (step
    of the last read, why it fails or None). claims/studies/finetune_budget.py's table says the
    same words."""
    step = int(rows["step"].max())
    last = rows[rows["step"] == step]  # the LAST read: one row per depth
    if last["depth"].nunique() < depths:
        return step, f"its last read (step {step:,}) covers {last['depth'].nunique()} of " \
                     f"{depths} depths"
    worst = last.loc[last["greedy_exact_match"].fillna(-1.0).idxmin()]  # NaN counts as worst
    if not worst["greedy_exact_match"] >= threshold:  # NaN fails
        return step, (f"its last read (step {step:,}) is {worst['greedy_exact_match']:.2f} at "
                      f"depth {worst['depth']:g} < {threshold}")
    return step, None


@dataclass(frozen=True)
class PasskeyCurveGate:
    """The fine-tuning budget studies' gate (experiments/finetune_budget.protocol.md, "Gate";
    rounds 2 and 3 keep it): a base (a run without a parent) counts if the last read of its
    validation passkey curve (STUDY/passkey_curve.csv, read during training) at `length` bytes
    is >= `threshold` greedy exact match at every one of its `depths` depths; a fine-tune counts
    if its parent counts. It only adds drops to the runner's loss gate, which stays as it is:
    the zero-shot reads at 4L (a base read with no scaling or PI's at 256 bytes) fail that one
    and were left out of the figures before this gate was registered, as they are now."""
    length: int        # the bases' training length, bytes
    threshold: float   # greedy exact match at every depth of the last read
    depths: int        # how many depths the last read must cover
    loss_only_kinds: str = ""  # every row of a run follows the run (see RetrievalGate)
    reads_curve = True  # apply() hands it STUDY/passkey_curve.csv (not a dataclass field)

    def dropped(self, summary, retrieval=True, curve=None):
        """{run: why} of every run this gate drops (`retrieval` is RetrievalGate's; unused)."""
        main = summary[summary["kind"] == "main"].drop_duplicates("run")
        ok = main["in_distribution_ok"].astype(str).str.strip().str.lower() == "true"
        why = {row["run"]: (f"the runner's loss gate: test loss at {int(row['seq_len'])} "
                            f"{row['loss']:.3f} not below the bigram baseline "
                            f"{row['bigram_loss']:.3f}") for _, row in main[~ok].iterrows()}
        stage1 = main["parent"].isna() | (main["parent"].astype(str) == "")
        at_length = (curve[curve["seq_len"] == self.length] if curve is not None and len(curve)
                     else pd.DataFrame(columns=["run", "step", "depth", "greedy_exact_match"]))
        for run in main.loc[stage1, "run"]:
            rows = at_length[at_length["run"] == run]
            fails = (f"no passkey curve read at {self.length}" if rows.empty else
                     last_read_fails(rows, self.length, self.threshold, self.depths)[1])
            if fails:
                why[run] = f"passkey gate: {fails}"
        for _, row in main[~stage1].iterrows():
            if row["parent"] in why and row["run"] not in why:
                why[row["run"]] = f"its parent {row['parent']} was dropped"
        return why


# study name (summary.csv's "study" column) -> its protocol's gate
PROTOCOL_GATES = {
    "context_extension_retrieval": RetrievalGate(length=64, threshold=0.9, depths=5),
    "context_extension_methods": RetrievalGate(length=64, threshold=0.9, depths=5,
                                               loss_only_kinds="stream_"),
    "sink_token": LossGate(),
    "logn_trained": SeedLossGate(),
    # The three rounds of the fine-tuning budget study (issue 48): bases gated on their curve.
    "finetune_budget": PasskeyCurveGate(length=64, threshold=0.9, depths=5),
    "finetune_budget2": PasskeyCurveGate(length=64, threshold=0.9, depths=5),
    "finetune_budget3": PasskeyCurveGate(length=64, threshold=0.9, depths=5),
}


def gate_of(summary):
    """The protocol gate registered for the summary's study, or None."""
    if not len(summary) or "study" not in summary:
        return None
    return PROTOCOL_GATES.get(str(summary["study"].iloc[0]))


def passkey_curve(study_dir):
    """STUDY/passkey_curve.csv (what a PasskeyCurveGate reads), or None without one (then no
    base passes that gate)."""
    path = os.path.join(study_dir, "passkey_curve.csv")
    return pd.read_csv(path) if os.path.exists(path) else None


def _dropped(gate, summary, study_dir, retrieval=True):
    """gate.dropped, with STUDY/passkey_curve.csv for a gate that reads it."""
    if not getattr(gate, "reads_curve", False):
        return gate.dropped(summary, retrieval)
    if study_dir is None:
        raise ValueError(f"the protocol gate of study {summary['study'].iloc[0]!r} reads "
                         "STUDY/passkey_curve.csv: pass the study folder (apply(summary, "
                         "study_dir))")
    return gate.dropped(summary, retrieval, curve=passkey_curve(study_dir))


def apply(summary, study_dir=None):
    """(summary whose in_distribution_ok is the protocol's gate, {run: why} of the runs it
    drops). A study without a registered gate comes back unchanged, with no drops named (the
    runner's loss gate is in its in_distribution_ok already). study_dir: the study's folder,
    needed by a gate that reads its passkey curves."""
    gate = gate_of(summary)
    if gate is None:
        return summary, {}
    why = _dropped(gate, summary, study_dir)
    summary = summary.copy()
    summary["in_distribution_ok"] = ~summary["run"].isin(why)  # the protocol's gate, whole
    if gate.loss_only_kinds:  # these rows: the loss gate (a) alone
        loss_only = summary["kind"].astype(str).str.startswith(gate.loss_only_kinds)
        why_loss = _dropped(gate, summary, study_dir, retrieval=False)
        summary.loc[loss_only, "in_distribution_ok"] = ~summary.loc[loss_only, "run"].isin(why_loss)
        streaming = set(summary.loc[loss_only, "run"])
        why = {run: (f"{reason}; its {gate.loss_only_kinds}* rows kept: they need only the loss "
                     "gate" if run in streaming and run not in why_loss else reason)
               for run, reason in why.items()}
    return summary, why


def stream_dropped(summary, study_dir=None):
    """The runs whose streaming rows (and loss along the stream) the protocol's gate drops: by
    the loss gate alone where the gate says streaming rows need only the loss, else every run it
    drops."""
    gate = gate_of(summary)
    if gate is None:
        return set()
    return set(_dropped(gate, summary, study_dir,
                        retrieval=not gate.loss_only_kinds.startswith("stream")))
