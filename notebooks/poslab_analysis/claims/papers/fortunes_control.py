"""poslab's fortunes control (comparison 7 of the state-reuse study), not a paper's claim:
comparison 2 of Dai et al. (training with recurrence helps) again on a second corpus at 12,000
steps, to tell whether the early 400-step study's null result was the budget or the corpus."""
from poslab_analysis.claims.rules import BELOW_ZERO
from poslab_analysis.claims.studies.state_reuse import M, at_memory
from poslab_analysis.reading.names import label
from poslab_analysis.statistics.seeds import paired

NAME = "poslab's fortunes control"


def state_reuse(study, record=None):
    fortunes, m = study.fortunes, M
    if fortunes is None:
        return ["| 7. fortunes: training with recurrence helps at 12,000 steps | | the "
                "fortunes control, experiments/state_reuse_fortunes.toml, has not run yet | "
                "| not measured |"]
    # Comparison 2 again, on fortunes at 12,000 steps: as trained, and both at memory 32
    # (the setting of the early 400-step study's null result).
    rule = ("interval below 0: the early null result was the budget; above 0: the corpus; "
            "including 0: inconclusive")
    lines = []
    for enc in ("transformer_xl", "shaw"):
        with_m, without = study.lm(fortunes, enc, m), study.lm(fortunes, enc, 0)
        lines.append(study.row(f"7. fortunes: training with recurrence helps "
                               f"({label(enc)}) at 12,000 steps",
                               "poslab's control (comparison 2 on a second corpus), not the "
                               "paper's",
                               f"fortunes, trained with memory {m} (evaluated at {m}) minus "
                               "trained without (evaluated at 0)",
                               paired(at_memory(with_m, m), at_memory(without, 0)), rule,
                               BELOW_ZERO, NAME, record))
        lines.append(study.row(f"7. (the same, both evaluated at memory {m}, as in the early "
                               "study)", "poslab's control",
                               f"fortunes, {label(enc)}: trained with memory {m} minus "
                               "trained without",
                               paired(at_memory(with_m, m), at_memory(without, m)), rule,
                               BELOW_ZERO, NAME, record))
    return lines
