"""Which figures a study gets: the one description both backends draw, the static one
(figures/plots_backend.py: PNG and SVG with matplotlib, `poslab plot`) and the interactive one
(figures/charts_backend.py: Vega-Lite in the report, `poslab report`).

figure_set(study_dir) reads the study and returns its figures as (kind, arguments) in the
order they are drawn; each backend has one drawing function per kind. A figure kind's curves
are chosen by functions both backends share (plots_extension.py's *_setup and *_curves for a
two-stage study, plots.py's randomized_curves, passkey_layout and budget_points), so the PNG and
the chart of a figure hold the same curves. tests/figures/check_plot_sets.py checks that every
PNG of every committed study has its chart, with the same curves.
"""
import os
import tomllib

import pandas as pd

from poslab_analysis.reading.names import ordered
from poslab_analysis.reading.study_files import (load, read_loss_by_copy_distance,
                                                 read_loss_by_stream_position)

# The kinds of figure, and what each shows (the arguments figure_set gives them):
#   passkey            passkey heatmaps, length x depth, one per metric       summary
#   pilot_gate         a gate pilot: the gate metric per condition            summary, name
#   pilot_budget       a budget pilot: loss against steps per condition       summary, name
#   pilot_conditions   one budget per condition: a bar per condition         summary, name
#   memory             loss against evaluation memory, a curve per encoding  summary, name
#   position           loss by position in the segment                      positions, kind, name
#   length             a metric against input length, a panel per task       summary, metric, name
#   randomized         randomized positions beside plain ones                plain, randomized
#   shaw_clip          Shaw's clip k against the metric                      summary
#   xl_terms           Transformer-XL's terms switched off one by one        summary
#   extension          a two-stage (context-extension) study's four figures  study_dir, summary,
#                                                                             positions
#   copy_distance      loss by copy distance (eval.copy_distance)           copies
#   stream             loss along a stream by cache (eval.stream_length)     streams
KINDS = ("passkey", "pilot_gate", "pilot_budget", "pilot_conditions", "memory", "position",
         "length", "randomized", "shaw_clip", "xl_terms", "extension", "copy_distance", "stream")


def language_model_rows(summary):
    """True for the rows of language-model runs, False for the rows of task runs.

    Decided from what every run records, never from a metric's value (a language model's
    exact_match is 0, not missing): a study that sweeps the task has a task.name column; in any
    other summary, unigram_loss is filled exactly for the runs of task "lm" (`poslab train`
    computes the corpus' unigram and bigram baselines only for a language model,
    src/cli/commands.cpp), and empty for every task run."""
    if "task.name" in summary:
        return summary["task.name"].astype(str) == "lm"
    if "unigram_loss" in summary:
        return summary["unigram_loss"].notna()
    return pd.Series(False, index=summary.index)


def plain_beside(study_dir, summary):
    """The plain study beside a randomized one (results/X beside results/X_randomized), or no
    rows when it is not there: the randomized curves are then drawn alone."""
    plain_dir = study_dir.rstrip("/")
    plain_dir = plain_dir[:-len("_randomized")] if plain_dir.endswith("_randomized") else ""
    if plain_dir and os.path.exists(os.path.join(plain_dir, "summary.csv")):
        return load(plain_dir)[0]
    return summary.iloc[0:0]


def varies_xl_terms(study_dir):
    """Does the study's file (results/STUDY/study.toml) switch Transformer-XL's terms (a)-(d) or
    its u, v in its variants? Only then is the xl_terms figure the right one."""
    path = os.path.join(study_dir, "study.toml")
    if not os.path.exists(path):
        return False
    with open(path, "rb") as f:
        variants = tomllib.load(f).get("variant", [])
    return any(key.startswith(("encoding.term_", "encoding.untie_uv"))
               for variant in variants for key in variant.get("set", {}))


def budget_points(summary):
    """The main-evaluation rows of a budget pilot, with the condition and the step count read
    from the variant name (xl_m32_6000 -> xl_m32, 6000; a name without a number: no steps)."""
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"]).copy()
    parsed = rows["variant"].astype(str).str.extract(r"^(.*?)_(\d+)(_.*)?$")
    rows["condition"] = parsed[0] + parsed[2].fillna("")
    rows["steps"] = pd.to_numeric(parsed[1])
    return rows


def is_budget_pilot(summary):
    """A pilot whose variants try one condition at two or more step counts."""
    rows = budget_points(summary)
    return bool((rows.dropna(subset=["steps"]).groupby("condition")["steps"].nunique() >= 2).any())


def is_two_stage(summary):
    """A study whose runs start from another variant's runs (the summary's parent column)."""
    return "parent" in summary and summary["parent"].fillna("").astype(str).str.len().gt(0).any()


def figure_set(study_dir):
    """(summary, positions, group, figures): the study's tables, and its figures as a list of
    (kind, {argument: value}) in drawing order. group: "passkey" (a passkey study: its heatmaps
    only), "pilot" (pilots choose settings: their own figures) or "study"."""
    summary, positions = load(study_dir)
    kinds = set(summary["kind"])
    study = str(summary["study"].iloc[0]) if len(summary) else ""
    figures = []

    def add(figure_kind, /, **arguments):
        figures.append((figure_kind, arguments))

    if kinds <= {"main", "passkey"} and "passkey" in kinds:
        add("passkey", summary=summary)
        return summary, positions, "passkey", figures
    if study.startswith("pilot_"):
        if "gate" in kinds:
            add("pilot_gate", summary=summary, name="pilot_gate")
        elif "memory" in kinds:  # a pilot of memory conditions: one curve per condition
            lm = summary[~summary["variant"].astype(str).str.startswith("long_range")]
            add("memory", summary=lm, name="pilot_memory")
        elif is_budget_pilot(summary):
            add("pilot_budget", summary=summary, name="pilot_budget")
        else:  # one budget per condition: a bar per condition
            add("pilot_conditions", summary=summary, name="pilot_conditions")
        add("passkey", summary=summary)
        return summary, positions, "pilot", figures
    # A language model scores tokens (its loss against the input length), a task scores answers
    # (accuracy, loss and exact match against the instance length); a study may hold both.
    language_model = language_model_rows(summary)
    lm_runs, task_runs = summary[language_model], summary[~language_model]
    # Models trained on randomized positions are drawn only beside the plain study's runs
    # (below): the standard panels would read them with contiguous positions alone.
    randomized = "length_sampled" in kinds and "variant" in summary
    two_stage = is_two_stage(summary) and "length" in kinds
    if two_stage:  # a context-extension study: lengths in bytes, stages side by side
        add("extension", study_dir=study_dir, summary=summary, positions=positions)
    elif (lm_runs["kind"] == "length").any():  # LM extrapolation: loss against input length
        add("length", summary=lm_runs, metric="loss", name="loss_vs_length")
    if (task_runs["kind"] == "length").any() and not randomized:
        for metric in ("accuracy", "loss", "exact_match"):
            if metric in task_runs:
                add("length", summary=task_runs, metric=metric,
                    name=f"length_generalization_{metric}")
    # Beside the plain study's runs, if it is there. A two-stage study's randomized runs
    # (RandPos, PoSE's baseline: experiments/pose.toml) are among its extension curves instead.
    if randomized and not two_stage:
        add("randomized", plain=plain_beside(study_dir, summary), randomized=summary)
    if "variant" in summary and "encoding.clip_k" in summary:
        add("shaw_clip", summary=summary)
    elif "variant" in summary and summary["variant"].nunique() >= 2 and "length" not in kinds \
            and varies_xl_terms(study_dir):
        # Transformer-XL's terms switched off one by one, side by side
        add("xl_terms", summary=summary)
    if "memory" in kinds:
        add("memory", summary=summary, name="loss_vs_memory")
        if "task.name" in summary and summary["task.name"].nunique() > 1:
            for task in ordered(summary["task.name"]):  # one figure per task as well
                add("memory", summary=summary[summary["task.name"] == task],
                    name=f"loss_vs_memory_{task}")
        if positions is not None:
            add("position", positions=positions, kind="memory", name="loss_by_position")
    if (lm_runs["kind"] == "length").any() and positions is not None and not two_stage:
        lm_positions = positions[positions["run"].isin(set(lm_runs["run"]))]
        if (lm_positions["kind"] == "length").any():
            add("position", positions=lm_positions, kind="length",
                name="loss_by_position_length")
    copies = read_loss_by_copy_distance(study_dir)
    if copies is not None and copies["loss"].notna().any():
        add("copy_distance", copies=copies, study_dir=study_dir)
    streams = read_loss_by_stream_position(study_dir)
    if streams is not None and streams["loss"].notna().any():
        add("stream", streams=streams, study_dir=study_dir)
    add("passkey", summary=summary)
    return summary, positions, "study", figures
