"""Gates of a study's protocol, in place of the runner's.

The runner writes `in_distribution_ok` into summary.csv: false when a run's loss at its own
training length is not below the test split's bigram baseline. A protocol may gate otherwise: a
retrieval study compares extension methods only on models that *retrieve* at their training
length, so its gate also asks for passkey retrieval there (experiments/
context_extension_retrieval.protocol.md, "Gate"). Such a gate is registered here under the
study's name, and `apply` turns it into the same column, so that every reader of summary.csv
(the figures, summary_ci.csv, the report, the claims tables) drops the same runs:

    summary, dropped = apply(summary)   # in_distribution_ok: the protocol's gate;
                                        # dropped: ["RUN (why)", ...], the protocol's list

`study_files.read_summary` and `study_files.load` call it, so code that reads a study through
them never sees an ungated summary by accident.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalGate:
    """A stage-1 run counts if the runner's loss gate passes and its passkey greedy exact match
    at `length` bytes, averaged over the depths, is at least `threshold`; a stage-2 run (one with
    a parent) counts if its parent counts. The protocol's gate replaces the runner's for stage-2
    runs: whether the model learned its task in distribution is its parent's property, and a
    zero-shot read that spoils the loss at L (PI squeezes every pair) is a result, not an
    undertrained model (the first study's settling run 6 learnt this)."""
    stage1: tuple      # the variants trained from scratch that the gate reads
    length: int        # their training length, bytes
    threshold: float   # passkey greedy exact match at `length`, mean over depths

    def dropped(self, summary):
        """{run: why} of every run this gate drops (the runner's loss gate included)."""
        main = summary[summary["kind"] == "main"].drop_duplicates("run")
        loss_ok = {run: str(ok).lower() != "false"
                   for run, ok in zip(main["run"], main["in_distribution_ok"])}
        passkey = summary[(summary["kind"] == "passkey") & (summary["seq_len"] == self.length)]
        at_length = passkey.groupby("run")["passkey_greedy_exact_match"].mean()
        why = {}
        for run in main[main["variant"].isin(self.stage1)]["run"]:
            value = at_length.get(run, float("nan"))
            if not loss_ok[run]:
                why[run] = "loss at L not below the bigram baseline"
            elif not value >= self.threshold:
                why[run] = f"passkey at L {value:.2f} < {self.threshold}"
        for _, row in main[~main["variant"].isin(self.stage1)].iterrows():
            if row["parent"] in why:
                why[row["run"]] = f"its parent {row['parent']} was dropped"
        return why


# study name (summary.csv's "study" column) -> its protocol's gate
PROTOCOL_GATES = {
    "context_extension_retrieval": RetrievalGate(stage1=("rope64", "alibi64", "xpos64"),
                                                 length=64, threshold=0.9),
}


def gate_of(summary):
    """The protocol gate registered for the summary's study, or None."""
    if not len(summary) or "study" not in summary:
        return None
    return PROTOCOL_GATES.get(str(summary["study"].iloc[0]))


def apply(summary):
    """(summary whose in_distribution_ok is the protocol's gate: false exactly for the runs it
    drops, ["RUN (why)"]). A study without a registered gate comes back unchanged, with the
    runner's drops listed."""
    gate = gate_of(summary)
    if gate is None:
        if "in_distribution_ok" not in summary:
            return summary, []
        failed = summary[summary["in_distribution_ok"].astype(str).str.lower() == "false"]
        return summary, [f"{run} (loss gate)" for run in dict.fromkeys(failed["run"])]
    why = gate.dropped(summary)
    summary = summary.copy()
    summary["in_distribution_ok"] = ~summary["run"].isin(why)  # the protocol's gate, whole
    return summary, [f"{run} ({reason})" for run, reason in why.items()]
