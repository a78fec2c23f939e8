"""The figures of a two-stage context-extension study (notebooks/plots_extension.py) as
interactive Vega-Lite panels, for `poslab report` (notebooks/report.py).

Each panel shows the same curves as its PNG twin: plots_extension computes which rows go into
which curve, with which colour and line style (length_curves, budget_curves, scale_panel_curves,
position_curves), and both the PNG and this page draw from that one selection. Here every point
carries its mean, 95% t interval and number of seeds for the hover, a click on a legend entry
shows one curve alone, and dragging or the wheel pans and zooms (charts.curve_panel).

    extension_loss_vs_length    loss against the evaluation length in bytes; from scratch,
                                zero-shot, fine-tuned
    extension_budget            loss at the fine-tuning length against fine-tuning steps
    extension_scale             zero-shot loss at s x L and at L against the factor s
    extension_loss_by_position  zero-shot loss by position at the longest length read
"""
from poslab_analysis.figures import charts, plots_extension
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.statistics import seeds as poslab_stats

GREY = "#7f7f7f"


def curves_panel(curves, x, title, x_title, y_title, x_scale, references=(), subtitle="",
                 x_format=None):
    """One panel of the curves [(label, rows, style)] that plots_extension draws: the mean of
    the loss over seeds at each x, with its interval, in the curve's colour and dash. A curve
    without a point (the parent, never read at the panel's length) has no legend entry, as in
    the PNG (plots.mean_band draws nothing for it)."""
    rows, colours, dashes = [], {}, {}
    for label, frame, style in curves:
        shown = poslab_style.label(label)
        points = charts.mean_rows(frame.assign(curve=label), x, "loss", "curve")
        if not points:
            continue
        rows += points
        colours[shown] = style.get("color") or poslab_style.colour(label) or GREY
        dashes[shown] = charts.DASHES.get(style.get("ls", "-"),
                                                  charts.DASHES["-"])
    return charts.curve_panel(rows, title, x_title, y_title, x_scale, list(colours),
                                      references, x_format=x_format, subtitle=subtitle,
                                      colours=colours, dashes=dashes)


def loss_vs_length_figure(summary, info):
    groups, parent = plots_extension.length_panels(summary, info)
    if not groups:
        return None
    panels = []
    for title, members, from_scratch in groups:
        trained = sorted(set(info.loc[members, "seq_len"]))
        panels.append(curves_panel(
            plots_extension.length_curves(summary, info, members, parent, from_scratch),
            "seq_len", title, "evaluation length (bytes)", "loss (nats per byte)",
            {"type": "log", "base": 2}, [(t, f"trained {t}", "x") for t in trained],
            charts.dropped_text(summary[summary["variant"].isin(members)]), "d"))
    return {"name": "extension_loss_vs_length", "title": "loss against the evaluation length",
            "panels": charts.share_y(panels)}  # one scale: the panels compare


def budget_figure(summary, info):
    setup = plots_extension.budget_setup(summary, info)
    if setup is None:
        return None
    at_len, parent, points = setup
    references = []
    for bound, kept in plots_extension.budget_bounds(summary, info, parent, at_len):
        mean, low, high, n = poslab_stats.t_interval(kept["loss"])
        interval = f", 95% interval [{low:.3f}, {high:.3f}]" if n > 1 else ""
        references.append((mean, f"{bound}: trained at {at_len} from scratch{interval}", "y"))
    steps = [s for s in points["steps"].unique() if s > 0]
    panel = curves_panel(plots_extension.budget_curves(points), "steps",
                         f"from {parent}: how many steps each scaling needs",
                         f"fine-tuning steps at {at_len} (0: zero-shot, same scaling)",
                         f"test loss at {at_len} bytes (nats/byte)",
                         {"type": "symlog", "constant": int(max(1, min(steps)))}, references,
                         charts.dropped_text(points), "d")
    return {"name": "extension_budget", "title": "loss against the fine-tuning budget",
            "panels": [panel]}


def scale_figure(summary, info):
    setup = plots_extension.scale_setup(info)
    if setup is None:
        return None
    zero, parent, train_len = setup
    dropped = charts.dropped_text(summary[summary["variant"].isin(set(zero.index))])
    panels = [curves_panel(
        plots_extension.scale_panel_curves(summary, zero, parent, train_len, where), "s",
        plots_extension.scale_title(where, train_len), "scaling factor s",
        "test loss (nats/byte)", {"type": "log", "base": 2}, subtitle=dropped, x_format="~g")
        for where in ("target", "original")]
    return {"name": "extension_scale", "title": "zero-shot loss against the scaling factor",
            "panels": panels}


def position_figure(summary, positions, info):
    setup = plots_extension.position_setup(summary, positions, info)
    if setup is None:
        return None
    train_len, longest, width = setup["train_len"], setup["longest"], setup["width"]
    panels = []
    for factor, members in setup["groups"]:
        references = [(train_len, f"L = {train_len}", "x")]
        if plots_extension.factor_line(factor, train_len, longest) is not None:
            references.append((factor * train_len, f"{factor:g} L", "x"))
        panels.append(curves_panel(
            plots_extension.position_curves(setup, info, members), "position",
            plots_extension.position_title(setup, factor, members, info),
            f"position inside a {longest}-byte chunk (bins of {width})", "test loss (nats/byte)",
            {"type": "linear"}, references, "gated runs only"))
    return {"name": "extension_loss_by_position",
            "title": f"zero-shot from {setup['parent']}, read at {longest} bytes: where each "
                     "scaling breaks", "panels": panels}
