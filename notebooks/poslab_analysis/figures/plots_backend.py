"""The static backend: every figure of figure_sets.figure_set drawn with matplotlib, as PNG and
SVG in STUDY/figures/, and STUDY/summary_ci.csv (the table behind the curves).

    build/poslab plot results/state_reuse    # notebooks/poslab_plots.py calls standard_figures
"""
import os

from poslab_analysis.figures import plots, plots_extension, plots_many_arms, plots_passkey
from poslab_analysis.figures.figure_sets import figure_set
from poslab_analysis.statistics import seeds

# kind -> how to draw it: (arguments of figure_set, out_dir) -> written paths
DRAW = {
    "passkey": lambda a, out: plots_passkey.passkey_figures(a["summary"], out),
    "pilot_gate": lambda a, out: plots.pilot_gate(a["summary"], out, a["name"]),
    "pilot_budget": lambda a, out: plots.pilot_budget(a["summary"], out, a["name"]),
    "pilot_conditions": lambda a, out: plots.pilot_conditions(a["summary"], out, a["name"]),
    "memory": lambda a, out: plots.memory_curves(a["summary"], out, a["name"]),
    "position": lambda a, out: plots.loss_by_position(a["positions"], out, a["kind"], a["name"]),
    "length": lambda a, out: plots.length_generalization(a["summary"], out, a["metric"],
                                                          a["name"]),
    "randomized": lambda a, out: plots.randomized_vs_plain(a["plain"], a["randomized"], out),
    "shaw_clip": lambda a, out: plots.shaw_clip(a["summary"], out),
    "xl_terms": lambda a, out: plots.xl_terms(a["summary"], out),
    "copy_distance": lambda a, out: plots_many_arms.copy_distance_figure(
        a["copies"], a.get("study_dir"), out),
    "stream": lambda a, out: plots_many_arms.stream_figure(a["streams"], a.get("study_dir"),
                                                           out),
    "extension": lambda a, out: plots_extension.extension_figures(a["study_dir"], a["summary"],
                                                                  a["positions"], out),
}


def standard_figures(study_dir, out_dir=None):
    """Every figure that fits the study, and summary_ci.csv; returns the written paths."""
    _, _, _, figures = figure_set(study_dir)
    out_dir = out_dir or os.path.join(study_dir, "figures")
    written = []
    for kind, arguments in figures:
        written += DRAW[kind](arguments, out_dir)
    written.append(seeds.write_summary_ci(study_dir))
    return written
