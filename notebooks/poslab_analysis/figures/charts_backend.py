"""The interactive backend: every figure of figure_sets.figure_set as Vega-Lite panels, for the
report (notebooks/report.py), by the same description as the PNGs (plots_backend.py)."""
from poslab_analysis.figures import charts, charts_extension
from poslab_analysis.figures.figure_sets import figure_set
from poslab_analysis.reading.study_files import variant_table


def extension_charts(study_dir, summary, positions):
    """Every figure of a two-stage study, as plots_extension.extension_figures draws them."""
    info = variant_table(study_dir)
    figures = [charts_extension.loss_vs_length_figure(summary, info),
               charts_extension.budget_figure(summary, info),
               charts_extension.scale_figure(summary, info),
               charts_extension.position_figure(summary, positions, info)]
    return [f for f in figures if f]


# kind -> how to draw it: arguments of figure_set -> a list of figures (None: nothing to draw)
DRAW = {
    "passkey": lambda a: charts.passkey_figures(a["summary"]),
    "pilot_gate": lambda a: [charts.pilot_gate_figure(a["summary"])],
    "pilot_budget": lambda a: [charts.pilot_budget_figure(a["summary"])],
    "pilot_conditions": lambda a: [charts.pilot_conditions_figure(a["summary"])],
    "memory": lambda a: [charts.memory_figure(a["summary"], a["name"])],
    "position": lambda a: [charts.position_figure(a["positions"], a["kind"], a["name"])],
    "length": lambda a: [charts.length_figure(a["summary"], a["metric"], a["name"])],
    "randomized": lambda a: [charts.randomized_figure(a["plain"], a["randomized"])],
    "shaw_clip": lambda a: [charts.shaw_clip_figure(a["summary"])],
    "xl_terms": lambda a: [charts.xl_terms_figure(a["summary"])],
    "copy_distance": lambda a: [charts.copy_distance_figure(a["copies"])],
    "stream": lambda a: [charts.stream_figure(a["streams"])],
    "extension": lambda a: extension_charts(a["study_dir"], a["summary"], a["positions"]),
}


def standard_figures(study_dir):
    """The study's figures as Vega-Lite panels. Returns (figures, not_interactive): the second
    lists the PNG figures with no twin here (none today)."""
    _, _, group, figures = figure_set(study_dir)
    drawn = [f for kind, arguments in figures for f in DRAW[kind](arguments)]
    if group in ("passkey", "pilot"):
        return [f for f in drawn if f], []
    return [f for f in drawn if f and f["panels"]], []
