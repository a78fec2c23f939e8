"""Which claims table a study gets, and which papers' rows it holds: the registry.

A study directory is matched to a kind of study by its name (results/state_reuse,
results/state_reuse-smoke, ...); the kind's module in claims/studies/ reads the study and writes
the frame of the table, and each registered paper (claims/papers/NAME.py) adds its rows through
a function named for the kind of study. To test a new paper's claim on an existing study, write
claims/papers/NAME.py with NAME = "Author et al. YEAR" and a function named for the study, and
add NAME to the study's line of PAPERS below (docs/analysis-code.md shows it)."""
import importlib
import os

from poslab_analysis.claims.rules import Tally
from poslab_analysis.claims.studies import context_extension, context_extension_methods, \
    context_extension_retrieval, finetune_budget, length_generalization, lm_extrapolation, \
    logn_trained, pose, sink_token, state_reuse

# The kinds of study that have a claims table, and the module that reads each.
STUDIES = {"lm_extrapolation": lm_extrapolation, "length_generalization": length_generalization,
           "state_reuse": state_reuse, "context_extension": context_extension, "pose": pose,
           "context_extension_retrieval": context_extension_retrieval,
           "context_extension_methods": context_extension_methods,
           "sink_token": sink_token, "finetune_budget": finetune_budget,
           "logn_trained": logn_trained}
# The registry: the papers (claims/papers/NAME.py) whose rows each study's table holds, in
# order, one line per study (a study without a line has a table with no rows yet).
PAPERS = {
    "lm_extrapolation": "press2022",
    "length_generalization": "kazemnejad2023 ruoss2023",
    "state_reuse": "dai2019 fortunes_control",
    "context_extension": "chen2023 bloc97_2023 peng2023 press2022 sun2023",
    "pose": "zhu2023",
    "context_extension_retrieval": "chen2023 bloc97_2023 peng2023 press2022 sun2023",
    "context_extension_methods": "ding2024 jin2024 su2023 chiang2022 xiao2023 zhu2023",
    "sink_token": "xiao2023",
    "finetune_budget": "chen2023 peng2023 zhu2023",
    "logn_trained": "chiang2022",
}
# Later rounds of a study: a study file that amends an earlier one's protocol (a new recipe,
# fresh seeds; the claims, arms and rules unchanged) gets the first round's table, read from its
# own results. results/finetune_budget2 and 3 are finetune_budget's second and third rounds
# (issue 48; the third judges its control by another rule: finetune_budget.CONTROL_RULES).
ROUNDS = {"finetune_budget2": "finetune_budget", "finetune_budget3": "finetune_budget"}
# The order of the studies in the count per paper (summary_table). The PoSE study is not counted:
# it has one seed, so its verdicts are inconclusive by rule until it has more.
COUNTED = ("lm_extrapolation", "length_generalization", "state_reuse", "context_extension")
VERDICTS = ("agree", "disagree", "inconclusive", "not measured")


def papers_of(kind):
    return [importlib.import_module(f"poslab_analysis.claims.papers.{name}")
            for name in PAPERS.get(kind, "").split()]


def kind_of(study_dir):
    """The kind of study of a directory by its name, or None: lm_extrapolation* (any suffix), a
    later round's name (ROUNDS) and its smoke run, or KIND and KIND-SUFFIX (a smoke run) for the
    others. A pilot (results/pilots/NAME) has none,
    even when it bears a study's name (results/pilots/sink_token): it is not a study result."""
    name = os.path.basename(study_dir.rstrip("/"))
    if os.path.basename(os.path.dirname(os.path.abspath(study_dir.rstrip("/")))) == "pilots":
        return None
    if name.startswith("lm_extrapolation"):
        return "lm_extrapolation"
    for later, kind in ROUNDS.items():
        if name == later or name.startswith(later + "-"):
            return kind
    for kind in STUDIES:
        if name == kind or name.startswith(kind + "-"):
            return kind
    return None


def claims_table(study_dir, record=None, kind=None):
    """The claims table of a study, as Markdown; verdicts counted in `record` (a Tally)."""
    kind = kind or kind_of(study_dir)
    return STUDIES[kind].table(study_dir, papers_of(kind), record)


def summary_table(results_dir):
    """Per paper: how many comparisons of the claims tables agree, disagree, are inconclusive or
    not measured (a row judged against several encodings counts each one)."""
    record = Tally()
    for kind in COUNTED:
        if os.path.exists(os.path.join(results_dir, kind, "summary.csv")):
            claims_table(os.path.join(results_dir, kind), record, kind)
    papers = list(dict.fromkeys(p for p, _ in record.rows))
    lines = ["| paper | claims rows | comparisons | " + " | ".join(VERDICTS) + " |",
             "|---|---|---|" + "---|" * len(VERDICTS)]
    for paper in papers:
        parts = [v for p, vs in record.rows if p == paper for v in vs]
        counts = [sum(1 for v in parts if v == verdict_name.split(" ")[0]) for verdict_name in
                  VERDICTS]
        rows = sum(1 for p, _ in record.rows if p == paper)
        lines.append(f"| {paper} | {rows} | {len(parts)} | "
                     + " | ".join(str(c) for c in counts) + " |")
    return "\n".join(lines)
