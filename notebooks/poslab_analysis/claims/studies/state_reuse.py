"""The state-reuse study (experiments/state_reuse.protocol.md, comparisons 1 to 7): the main study
(axes encoding.type, memory.mem_len = the trained memory), and the studies beside it when their
summaries exist: state_reuse_conditions (deep4_xl, half_loss_sinusoidal, long_range_*) and
state_reuse_fortunes. Loss in nats per byte on the test split; every difference paired over
seeds. Its table: one line of runs and gates, then the papers' rows."""
import pandas as pd

from poslab_analysis.claims.rules import fmt, outside_setting, sensitivity, tally, verdict
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds

M = 32  # the trained memory (= the segment)


def memory_losses(summary, **condition):
    """Gated test loss of one condition at every evaluation memory: Series over (seed, mem_len).
    `condition` gives column=value pairs (encoding.type, memory.mem_len, variant, ...)."""
    rows = summary[summary["kind"] == "memory"]
    rows = rows[seeds.gate_passed(rows)]
    for column, value in condition.items():
        rows = rows[rows[column] == value]
    return rows.set_index(["train.seed", "mem_len"])


def at_memory(series_rows, mem, metric="loss"):
    """The metric of every seed at evaluation memory `mem`: Series over seeds."""
    if not len(series_rows) or mem not in series_rows.index.get_level_values("mem_len"):
        return pd.Series(dtype=float)  # not evaluated there (a smoke study): "no runs"
    return series_rows.xs(mem, level="mem_len")[metric].dropna()


def dropped_line(summary, label):
    runs = summary.drop_duplicates("run")
    dropped = runs[~seeds.gate_passed(runs)]
    return (f"{label}: {len(runs)} runs, gate dropped {len(dropped)}"
            f"{' (' + ', '.join(dropped['run']) + ')' if len(dropped) else ''}")


class Study:
    """What the papers' rows read: the main study and its two siblings (None if not run), the
    bootstrap intervals per comparison, and the table's row format."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.main = study_files.read_summary(study_dir)
        self.conditions = study_files.read_sibling(study_dir, "state_reuse_conditions")
        self.fortunes = study_files.read_sibling(study_dir, "state_reuse_fortunes")
        # The paired bootstrap over slices of the test text (notebooks/bootstrap.py), per seed.
        self.boot = study_files.read_bootstrap(study_dir)

    @staticmethod
    def lm(summary, encoding, trained):
        """One language model of `summary` (its encoding and trained memory) at every memory."""
        return memory_losses(summary, **{"encoding.type": encoding, "memory.mem_len": trained})

    def row(self, claim, paper, measured, interval, rule, judged, source, record,
            bootstrap_label=None, outside=None):
        """A row of `source` (a paper's name): the verdict by `judged` = (agrees, disagrees) on
        `interval`, counted in `record`; judged None: a reference row, not counted. With a
        bootstrap_label of bootstrap.csv, its per-seed intervals are shown beside. With
        `outside` (why the runs are not in the paper's setting), the verdict is inconclusive for
        that reason (rules.outside_setting) and what `judged` gives on this study's evaluation
        is shown as a sensitivity, not counted."""
        verdict_text = verdict(interval, *judged) if judged else "(reference)"
        extra = ""
        if outside is not None:
            extra = "; " + sensitivity("the rule on this study's evaluation", None,
                                       verdict_text)
            verdict_text = outside_setting(outside)
        if judged:
            tally(record, source, [verdict_text])
        if bootstrap_label in self.boot:
            extra += ("; bootstrap over text slices, per seed: "
                      f"{', '.join(self.boot[bootstrap_label])}")
        return (f"| {claim} | {paper} | {measured}: {fmt(*interval)}{extra} | {rule} | "
                f"{verdict_text} |")


def table(study_dir, papers, record=None):
    """The claims table: the runs and gates of the three studies, then the papers' rows
    (paper.state_reuse(study, record) -> lines)."""
    study = Study(study_dir)
    main, conditions, fortunes = study.main, study.conditions, study.fortunes
    lines = [f"\n{dropped_line(main, 'Main study')}"
             + (f"; {dropped_line(conditions[conditions['variant'].str.startswith('long_range') == False], 'conditions (language models)')}"  # noqa: E501,E712
                if conditions is not None else "")
             + (f"; {dropped_line(fortunes, 'fortunes')}" if fortunes is not None else "")
             + ". Loss in nats per byte on the test split; every difference paired over seeds.\n",
             f"| published claim ({papers[0].NAME}) | what the paper measured; what the verdict "
             "uses | measured | rule | verdict |",
             "|---|---|---|---|---|"]
    for paper in papers:
        lines += paper.state_reuse(study, record)
    return "\n".join(lines)
