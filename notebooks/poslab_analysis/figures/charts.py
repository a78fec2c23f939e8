"""The standard figures of notebooks/plots.py as interactive Vega-Lite charts, for
`poslab report` (notebooks/report.py).

Each figure is the same selection of rows as its PNG twin (the same panels, curves and gate), but
the numbers go to the browser instead of to matplotlib: every point carries its mean, its 95% t
interval and n, so hovering shows them; a click on a legend entry shows one curve alone (shift
for several); dragging pans and the wheel zooms. A figure is a list of panels, one Vega-Lite spec
each, so that each panel zooms on its own.

Every curve is computed twice, over the runs that pass the in-distribution gate (what the PNGs
show) and over every run; the page switches between them with one check box (the signal
`include_dropped`), which matters for smoke studies whose tiny runs never pass the gate.

Why over 500 lines (about 510): it is plots.py's twin, one chart function per figure kind beside
the shared helpers (mean rows, panels, colour scale), and moves with it.
"""
import pandas as pd

from poslab_analysis.figures import plots, plots_passkey
from poslab_analysis.statistics import seeds as poslab_stats
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.figures.style import ordered

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
# matplotlib's line styles as Vega-Lite stroke dashes (on, off pixels).
DASHES = {"-": [1, 0], "--": [6, 3], ":": [1, 3], "-.": [6, 3, 1, 3]}
DEFAULT_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
                   "#ff9da6", "#9d755d", "#bab0ac"]


def finite(x):
    """A float for JSON: NaN and infinities become None (null)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None


def colour_scale(series_names):
    """Vega-Lite's colour scale for these series: each encoding its poslab_style colour."""
    domain, colours = [], []
    spare = iter(DEFAULT_COLOURS * 4)
    for name in series_names:
        domain.append(poslab_style.label(name))
        colours.append(poslab_style.colour(name) or next(spare))
    return {"domain": domain, "range": colours}


def mean_rows(frame, x, y, series, extra=None):
    """Mean and 95% t interval of y at each x, per series, over the gated runs (set "gated") and
    over every run (set "all"): the rows of one panel's data (the points are
    poslab_stats.mean_points, as in the PNG's plots.mean_band)."""
    rows = []
    for subset, part in (("gated", plots.gated(frame)), ("all", frame)):
        for name in ordered(part[series]) if series in part else [None]:
            curve = part if name is None else part[part[series] == name]
            for point in poslab_stats.mean_points(curve, x, y).itertuples(index=False):
                value, mean, low, high, n = point
                if n == 0:
                    continue
                row = {"set": subset, "series": poslab_style.label(name) if name is not None
                       else "", "x": finite(value), "mean": finite(mean), "low": finite(low),
                       "high": finite(high), "n": int(n)}
                rows.append({**row, **(extra or {})})
    return rows


def dropped_text(frame):
    runs = frame.drop_duplicates("run") if "run" in frame else frame
    kept = poslab_stats.gate_passed(runs)
    return f"gate dropped {int((~kept).sum())} of {len(runs)} runs" if (~kept).any() else ""


def set_filter(rows):
    """Which set of rows a chart shows: the gated ones unless the page's check box asks for every
    run, or unless the gate dropped every run (a smoke study): then every run, said in the
    panel's subtitle (all_dropped_note), rather than an empty panel."""
    if not any(row["set"] == "gated" for row in rows):
        return {"filter": "datum.set == 'all'"}
    return {"filter": "datum.set == (include_dropped ? 'all' : 'gated')"}


def all_dropped_note(rows, subtitle):
    if rows and not any(row["set"] == "gated" for row in rows):
        return (subtitle + "; " if subtitle else "") + "showing every run"
    return subtitle


def curve_panel(rows, title, x_title, y_title, x_scale, series_names, references=(),
                x_format=None, subtitle="", colours=None, dashes=None):
    """One panel: a line with points per series and its interval as a band; hover, legend
    selection, zoom and pan. Colours are the encodings' (poslab_style), or `colours`
    ({series: colour}); `dashes` ({series: [on, off, ...]}) dashes some lines. On a log x axis
    the ticks are the x values themselves (1, 2, 4, ...), not Vega's 1, 1.5, 2, 2.5, ..."""
    scale = colour_scale(series_names) if colours is None else \
        {"domain": list(colours), "range": list(colours.values())}
    colour = {"field": "series", "type": "nominal", "title": None, "scale": scale,
              "legend": {"symbolOpacity": 1, "labelLimit": 320}}
    x = {"field": "x", "type": "quantitative", "title": x_title, "scale": dict(x_scale),
         "axis": {}}
    if x_format:
        x["axis"]["format"] = x_format
    if x_scale.get("type") in ("log", "symlog"):
        x["axis"]["values"] = sorted({row["x"] for row in rows if row["x"] is not None})
    y_scale = {"zero": False}
    tooltip = [{"field": "series", "title": "curve"},
               {"field": "x", "title": x_title, "format": ".4~g"},
               {"field": "mean", "title": y_title + " (mean)", "format": ".4f"},
               {"field": "low", "title": "95% interval, low", "format": ".4f"},
               {"field": "high", "title": "95% interval, high", "format": ".4f"},
               {"field": "n", "title": "runs (seeds)"}]
    picked = {"condition": {"param": "pick", "empty": True, "value": 1}, "value": 0.12}
    layers = [
        {"mark": {"type": "area", "opacity": 0.15, "interpolate": "linear"},
         "transform": [set_filter(rows)],
         "encoding": {"x": x, "y": {"field": "low", "type": "quantitative", "scale": y_scale,
                                    "title": y_title},
                      "y2": {"field": "high"}, "color": colour,
                      "opacity": {"condition": {"param": "pick", "empty": True, "value": 0.15},
                                  "value": 0.02}}},
        {"mark": {"type": "line", "strokeWidth": 1.6,  # small points where there are many
                  "point": {"size": 28 if len({r["x"] for r in rows}) <= 40 else 4}},
         "transform": [set_filter(rows)],
         "params": [{"name": "pick", "select": {"type": "point", "fields": ["series"]},
                     "bind": "legend"},
                    {"name": "zoom", "select": "interval", "bind": "scales"}],
         "encoding": {"x": x, "y": {"field": "mean", "type": "quantitative", "scale": y_scale,
                                    "title": y_title},
                      "color": colour, "opacity": picked, "tooltip": tooltip}},
    ]
    if dashes:
        layers[1]["encoding"]["strokeDash"] = {
            "field": "series", "type": "nominal", "title": None,  # one legend with the colour
            "scale": {"domain": list(dashes), "range": list(dashes.values())}}
    for value, text, axis in references:
        layers.append({"data": {"values": [{"v": finite(value), "text": text}]},
                       "mark": {"type": "rule", "strokeDash": [3, 3], "color": "#777"},
                       "encoding": {axis: {"field": "v", "type": "quantitative"},
                                    "tooltip": [{"field": "text", "title": "reference"},
                                                {"field": "v", "title": "at"}]}})
    subtitle = all_dropped_note(rows, subtitle)
    spec = {"$schema": SCHEMA, "width": 300, "height": 210,
            "title": {"text": title, "subtitle": subtitle} if subtitle else title,
            "params": [{"name": "include_dropped", "value": False}],
            "data": {"values": rows}, "layer": layers}
    return spec


def share_y(panels):
    """Puts curve panels that compare on one y scale: from the lowest interval end to the highest
    over every panel, gated runs or all (so the check box keeps every band inside)."""
    ends = [value for panel in panels for row in panel["data"]["values"]
            for value in (row["low"], row["high"]) if value is not None]
    if not ends:
        return panels
    for panel in panels:
        for layer in panel["layer"][:2]:  # the band and the line (the rules follow the scale)
            layer["encoding"]["y"]["scale"] = {"zero": False, "domain": [min(ends), max(ends)]}
    return panels


def length_figure(summary, metric, name):
    every_row = summary[summary["kind"] == "length"]
    rows = every_row.dropna(subset=[metric])
    if rows.empty:
        return None
    col = plots.panel_column(rows)
    panels = []
    for group in (ordered(rows[col]) if col else [None]):
        sub = rows if group is None else rows[rows[col] == group]
        series = plots.series_column(sub)
        refs = [(1.0, "trained length", "x")]
        if metric == "loss" and "unigram_loss" in sub and sub["unigram_loss"].notna().any():
            refs.append((float(sub["unigram_loss"].mean()), "unigram", "y"))
        if group == "parity" and metric == "accuracy":
            refs.append((0.5, "chance", "y"))
        panels.append(curve_panel(
            mean_rows(sub, "factor", metric, series),
            plots.panel_title(col, group) if group is not None else metric,
            "evaluation length / training length",
            "loss (nats per scored token)" if metric == "loss" else metric.replace("_", " "),
            {"type": "log", "base": 2}, ordered(sub[series]), refs, x_format="~g",
            subtitle=dropped_text(sub)))
    return {"name": name, "title": f"{metric.replace('_', ' ')} against evaluation length",
            "panels": panels}


def memory_figure(summary, name="loss_vs_memory"):
    rows = summary[summary["kind"] == "memory"].dropna(subset=["loss"])
    if rows.empty:
        return None
    col = plots.panel_column(rows)
    groups = [(t, m) for t in (ordered(rows[col]) if col else [None])
              for m in (sorted(rows["memory.mem_len"].unique()) if "memory.mem_len" in rows
                        else [None])]
    panels = []
    for group, trained in groups:
        sub = rows if group is None else rows[rows[col] == group]
        if trained is not None:
            sub = sub[sub["memory.mem_len"] == trained]
        if sub.empty:
            continue
        series = plots.series_column(sub)
        parts = [plots.panel_title(col, group)] if group is not None else []
        refs = []
        if trained is not None:
            parts.append(f"trained with memory {trained:g}")
            if trained > 0:
                refs.append((trained, "trained memory", "x"))
        if "unigram_loss" in sub and sub["unigram_loss"].notna().any():
            refs.append((float(sub["unigram_loss"].mean()), "unigram", "y"))
        panels.append(curve_panel(mean_rows(sub, "mem_len", "loss", series),
                                  ", ".join(parts) or "loss", "evaluation memory length",
                                  "loss (nats per scored token)",
                                  {"type": "symlog", "constant": 8}, ordered(sub[series]), refs,
                                  subtitle=dropped_text(sub)))
    return {"name": name, "title": "loss against evaluation memory", "panels": panels}


def position_figure(positions, kind, name):
    rows = positions[positions["kind"] == kind]
    if rows.empty:
        return None
    note = ""
    if kind == "memory" and "memory.mem_len" in rows:
        rows = rows[rows["memory.mem_len"] == rows["memory.mem_len"].max()]
        note = f"models trained with memory {int(rows['memory.mem_len'].max())}"
    col = plots.panel_column(rows)
    if kind == "memory":
        settings, column, text = sorted({rows["mem_len"].min(), rows["mem_len"].max()}), \
            "mem_len", "evaluation memory {:g}"
    else:
        settings, column, text = [rows["seq_len"].max()], "seq_len", "segment {:g}"
    panels = []
    for group in (ordered(rows[col]) if col else [None]):
        for value in settings:
            sub = rows[rows[column] == value]
            if group is not None:
                sub = sub[sub[col] == group]
            series = plots.series_column(sub)
            refs = []
            if kind == "length":  # bins of positions, as plots.loss_by_position
                trained = int(rows["seq_len"].min())
                width = max(1, trained // 16)
                sub = sub.assign(position=(sub["position"] // width) * width + (width - 1) / 2)
                keys = [c for c in ("run", series, "position", "in_distribution_ok") if c in sub]
                sub = sub.groupby(keys, as_index=False)["loss"].mean()
                refs.append((trained, "trained length", "x"))
            prefix = plots.panel_title(col, group) + ", " if group is not None else ""
            panels.append(curve_panel(mean_rows(sub, "position", "loss", series),
                                      prefix + text.format(value), "position inside the segment",
                                      "loss", {"type": "linear"}, ordered(sub[series]), refs,
                                      subtitle=note))
    return {"name": name, "title": "loss at each position inside a segment", "panels": panels}


def copy_distance_figure(copies, name="loss_by_copy_distance"):
    """plots.loss_by_copy_distance as charts: per setting, the copy bytes' loss against the
    distance, and dashed in the same colour the loss of bytes with no match."""
    panels = []
    for title, series, curves, references in plots.copy_distance_panels(copies):
        names = ordered(curves[series])
        colours = colour_scale(names)
        colour_of = dict(zip(colours["domain"], colours["range"]))
        rows = mean_rows(curves, "x", "loss", series)
        all_colours, dashes = dict(colour_of), {}
        for curve in names:  # (not `name`: that is the figure's)
            label = poslab_style.label(curve) + ", no match"
            reference = references[references[series] == curve]
            rows += [dict(r, series=label) for r in mean_rows(reference, "x", "loss", series)]
            all_colours[label] = colour_of[poslab_style.label(curve)]
            dashes[label] = [4, 3]
        for label in colour_of:
            dashes[label] = [1, 0]
        panels.append(curve_panel(rows, title, "copy distance d (bytes; bucket [d, 2d))",
                                  "loss (nats per byte)", {"type": "log", "base": 2}, names,
                                  colours=all_colours, dashes=dashes))
    return {"name": name, "title": "loss of bytes that continue a string seen d bytes earlier",
            "panels": panels}


def stream_figure(streams, name="loss_by_stream_position"):
    """plots.loss_by_stream_position as charts: per cache, the loss along the stream."""
    panels = []
    for title, series, curves in plots.stream_panels(streams):
        panels.append(curve_panel(mean_rows(curves, "x", "loss", series), title,
                                  "position in the stream (bytes, start of a bucket)",
                                  "loss (nats per byte)", {"type": "linear"},
                                  ordered(curves[series])))
    return {"name": name, "title": "loss along the stream, by cache", "panels": panels}


def shaw_clip_figure(summary):
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"])
    panel = curve_panel(mean_rows(rows, "encoding.clip_k", "loss", "variant"), "Shaw's clip k",
                        "clip distance k", "validation loss (nats per byte)",
                        {"type": "symlog", "constant": 1}, ordered(rows["variant"]))
    return {"name": "shaw_clip", "title": "loss against Shaw's clipping distance",
            "panels": [panel]}


def xl_terms_figure(summary):
    """Points with their 95% interval, one row per variant, one colour per evaluation setting."""
    rows = summary.dropna(subset=["loss"])
    settings = [("main", None, "trained memory")]
    mem_rows = rows[rows["kind"] == "memory"]
    if not mem_rows.empty:
        settings = [("memory", mem_rows["mem_len"].min(), None),
                    ("memory", mem_rows["mem_len"].max(), None)]
    data = []
    for kind, mem, label in settings:
        sub = rows[rows["kind"] == kind]
        if mem is not None:
            sub = sub[sub["mem_len"] == mem]
            label = f"evaluation memory {mem:g}"
        sub = sub.assign(setting=label)
        data += mean_rows(sub, "setting", "loss", "variant", {"setting": label})
    for row in data:  # the variant is the row here, not a curve
        row["variant"], row["series"] = row["series"], row["setting"]
    variants = list(dict.fromkeys(rows["variant"]))
    y = {"field": "variant", "type": "nominal", "sort": variants, "title": None}
    x = {"field": "mean", "type": "quantitative", "scale": {"zero": False},
         "title": "validation loss (nats per byte), mean and 95% interval over seeds"}
    colour = {"field": "series", "type": "nominal", "title": None}
    picked = {"condition": {"param": "pick", "empty": True, "value": 1}, "value": 0.12}
    tooltip = [{"field": "variant"}, {"field": "series", "title": "setting"},
               {"field": "mean", "format": ".4f"}, {"field": "low", "format": ".4f"},
               {"field": "high", "format": ".4f"}, {"field": "n", "title": "runs (seeds)"}]
    spec = {"$schema": SCHEMA, "width": 420, "height": {"step": 26},
            "title": {"text": "Transformer-XL terms",
                      "subtitle": all_dropped_note(data, dropped_text(rows))},
            "params": [{"name": "include_dropped", "value": False}],
            "data": {"values": data}, "transform": [set_filter(data)],
            "encoding": {"y": y, "yOffset": {"field": "series"}, "color": colour,
                         "opacity": picked},
            "layer": [
                {"mark": "rule", "encoding": {"x": {**x, "field": "low"}, "x2": {"field": "high"}}},
                {"mark": {"type": "point", "filled": True, "size": 50},
                 "params": [{"name": "pick", "select": {"type": "point", "fields": ["series"]},
                             "bind": "legend"},
                            {"name": "zoom", "select": {"type": "interval", "encodings": ["x"]},
                             "bind": "scales"}],
                 "encoding": {"x": x, "tooltip": tooltip}}]}
    return {"name": "xl_terms", "title": "loss of each variant", "panels": [spec]}


def pilot_gate_figure(summary):
    rows = summary[summary["kind"] == "gate"].dropna(subset=["exact_match"]).copy()
    if "variant" not in rows:
        rows["variant"] = rows["task.name"] if "task.name" in rows else "(one task)"
    elif "task.name" in rows:
        rows["variant"] = rows["variant"].astype(str) + " / " + rows["task.name"].astype(str)
    data = mean_rows(rows.assign(group=rows["variant"]), "group", "exact_match",
                     "encoding.type")
    for row in data:
        row["group"] = row.pop("x")
    encodings = ordered(rows["encoding.type"])
    spec = {"$schema": SCHEMA, "width": {"step": 18}, "height": 240,
            "title": "exact match on the largest training sizes (the gate set)",
            "params": [{"name": "include_dropped", "value": True}],
            "data": {"values": data}, "transform": [set_filter(data)],
            "layer": [{"mark": "bar",
                       "params": [{"name": "pick", "select": {"type": "point",
                                                              "fields": ["series"]},
                                   "bind": "legend"}],
                       "encoding": {
                           "x": {"field": "group", "type": "nominal", "title": None,
                                 "sort": list(dict.fromkeys(rows["variant"]))},
                           "xOffset": {"field": "series"},
                           "y": {"field": "mean", "type": "quantitative",
                                 "scale": {"domain": [0, 1.05]}, "title": "exact match"},
                           "color": {"field": "series", "type": "nominal", "title": None,
                                     "scale": colour_scale(encodings)},
                           "opacity": {"condition": {"param": "pick", "empty": True,
                                                     "value": 1}, "value": 0.15},
                           "tooltip": [{"field": "group", "title": "task"},
                                       {"field": "series", "title": "encoding"},
                                       {"field": "mean", "format": ".3f"},
                                       {"field": "n", "title": "runs"}]}},
                      {"data": {"values": [{"v": 0.95}]},
                       "mark": {"type": "rule", "strokeDash": [3, 3], "color": "#777"},
                       "encoding": {"y": {"field": "v", "type": "quantitative"}}}]}
    return {"name": "pilot_gate", "title": "pilot: the gate per task and encoding",
            "panels": [spec]}


def pilot_budget_figure(summary):
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"]).copy()
    parsed = rows["variant"].astype(str).str.extract(r"^(.*?)_(\d+)(_.*)?$")
    rows["condition"] = parsed[0] + parsed[2].fillna("")
    rows["steps"] = pd.to_numeric(parsed[1])
    rows = rows.dropna(subset=["condition", "steps"])
    refs = []
    if "bigram_loss" in rows and rows["bigram_loss"].notna().any():
        refs.append((float(rows["bigram_loss"].dropna().iloc[0]), "bigram", "y"))
    panel = curve_panel(mean_rows(rows, "steps", "loss", "condition"), "training budget",
                        "training steps", "validation loss (nats/byte)",
                        {"type": "log", "base": 2}, sorted(rows["condition"].unique()), refs)
    return {"name": "pilot_budget", "title": "pilot: loss against training steps",
            "panels": [panel]}


def randomized_figure(plain, randomized, metric="exact_match"):
    """Ruoss et al.'s comparison (plots.randomized_vs_plain): a panel per (task,
    encoding), the plain model and the randomized one read with sampled and with contiguous
    positions; the encoding's colour, one dash per curve."""
    panels = []
    for task, encoding in plots.randomized_cells(randomized):
        rows, dashes = [], {}
        for name, frame, style in plots.randomized_curves(plain, randomized, task,
                                                                 encoding, metric):
            rows += mean_rows(frame.assign(curve=name), "factor", metric, "curve")
            dashes[name] = DASHES[style["ls"]]
        colour = poslab_style.colour(encoding) or DEFAULT_COLOURS[0]
        panels.append(curve_panel(
            rows, f"{task}, {poslab_style.label(encoding)}", "evaluation length / training length",
            metric.replace("_", " "), {"type": "log", "base": 2}, list(dashes),
            [(1.0, "trained", "x")], x_format="~g", colours={n: colour for n in dashes},
            dashes=dashes))
    return {"name": f"randomized_vs_plain_{metric}",
            "title": "randomized positions against the plain models", "panels": panels}


def wrapped(text, width=18):
    """A title as lines of at most about `width` characters (Vega-Lite draws a list as lines):
    a colour bar's title is cut at the bar's width otherwise ("passkey exact match (teac...")."""
    lines = []
    for word in str(text).split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines if len(lines) > 1 else str(text)


def passkey_figure(summary, metric, name):
    """A passkey heatmap (plots_passkey.passkey_heatmaps) per condition: the mean of `metric`
    over seeds in every (length, depth) cell, over the gated runs or every run."""
    layout = plots_passkey.passkey_layout(summary, metric)
    if layout is None:
        return None
    x_column, in_bytes = layout["x_column"], layout["in_bytes"]
    x_labels = [f"{f:g}" if in_bytes else f"{f:g}x" for f in layout["factors"]]
    panels = []
    for key in layout["keys"]:
        part = plots_passkey.passkey_panel_rows(layout, key)
        cells = []
        for subset, frame in (("gated", plots.gated(part)), ("all", part)):
            for (depth, x), group in frame.groupby(["passkey_depth", x_column]):
                n = group[poslab_stats.SEED_COLUMN].nunique() \
                    if poslab_stats.SEED_COLUMN in group else len(group)
                cells.append({"set": subset, "depth": f"{depth:g}",
                              "x": f"{x:g}" if in_bytes else f"{x:g}x",
                              "mean": finite(group[metric].mean()), "n": int(n)})
        text_colour = {"condition": {"test": "datum.mean > 0.6", "value": "black"},
                       "value": "white"}
        # At least 240 x 132 pixels: a grid of 2 lengths by 3 depths is narrower than its axis
        # titles, which Vega centres on the axis and the page then cut at the left edge
        # ("epth", "valuation"; issue 51).
        panels.append({
            "$schema": SCHEMA, "width": max(44 * len(x_labels), 240),
            "height": max(22 * len(layout["depths"]), 132),
            "title": {"text": plots_passkey.passkey_panel_title(layout, key) or metric,
                      "subtitle": all_dropped_note(cells, dropped_text(part))},
            "params": [{"name": "include_dropped", "value": False}],
            "data": {"values": cells}, "transform": [set_filter(cells)],
            "encoding": {
                "x": {"field": "x", "type": "ordinal", "sort": x_labels,
                      "title": "evaluation length (bytes)" if in_bytes
                      else "evaluation length / training length"},
                "y": {"field": "depth", "type": "ordinal",
                      "sort": [f"{d:g}" for d in layout["depths"]],
                      "title": "depth of the key line"}},
            "layer": [
                {"mark": "rect",
                 "encoding": {"color": {"field": "mean", "type": "quantitative",
                                        "scale": {"scheme": "viridis", "domain": [0, 1]},
                                        "title": wrapped(plots_passkey.PASSKEY_METRICS.get(
                                            metric, metric)),
                                        "legend": {"titleLimit": 400}},
                              "tooltip": [{"field": "x", "title": "length"},
                                          {"field": "depth", "title": "depth"},
                                          {"field": "mean", "format": ".3f"},
                                          {"field": "n", "title": "runs (seeds)"}]}},
                {"mark": {"type": "text", "fontSize": 9},
                 "encoding": {"text": {"field": "mean", "format": ".2f"},
                              "color": text_colour}}]})
    return {"name": name, "title": plots_passkey.PASSKEY_METRICS.get(metric, metric),
            "panels": panels}


def passkey_figures(summary):
    """The three passkey heatmaps of plots_passkey.passkey_figures, when there are passkey rows."""
    if "passkey" not in set(summary["kind"]):
        return []
    return [passkey_figure(summary, "exact_match", "passkey_exact_match"),
            passkey_figure(summary, "passkey_greedy_exact_match", "passkey_greedy_exact_match"),
            passkey_figure(summary, "accuracy", "passkey_digit_accuracy")]


def pilot_conditions_figure(summary):
    """A bar per condition (plots.pilot_conditions): validation loss at each run's own
    training length, with the bigram baseline."""
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"])
    data = [{"condition": f"{v} (segment {int(L)})", "loss": finite(loss)}
            for v, L, loss in zip(rows["variant"], rows["seq_len"], rows["loss"])]
    layers = [{"mark": {"type": "bar", "color": poslab_style.colour("rope")},
               "encoding": {"x": {"field": "condition", "type": "nominal", "sort": None,
                                  "title": None},
                            "y": {"field": "loss", "type": "quantitative",
                                  "title": "validation loss at its training length (nats/byte)"},
                            "tooltip": [{"field": "condition"},
                                        {"field": "loss", "format": ".3f"}]}},
              {"mark": {"type": "text", "dy": -6},
               "encoding": {"x": {"field": "condition", "type": "nominal", "sort": None},
                            "y": {"field": "loss", "type": "quantitative"},
                            "text": {"field": "loss", "format": ".3f"}}}]
    if "bigram_loss" in rows and rows["bigram_loss"].notna().any():
        layers.append({"data": {"values": [{"v": finite(rows["bigram_loss"].dropna().iloc[0])}]},
                       "mark": {"type": "rule", "strokeDash": [3, 3], "color": "#777"},
                       "encoding": {"y": {"field": "v", "type": "quantitative"},
                                    "tooltip": [{"field": "v", "title": "bigram"}]}})
    spec = {"$schema": SCHEMA, "width": {"step": 70}, "height": 220,
            "title": "pilot: one budget per condition", "data": {"values": data},
            "layer": layers}
    return {"name": "pilot_conditions", "title": "pilot: loss per condition", "panels": [spec]}
