"""The static figures of poslab's studies (matplotlib, PNG and SVG): the drawing helpers every
static figure shares (a mean with its band, the gate's note, panels, save) and one function per
figure kind of figure_sets.py (plots_extension.py: a two-stage study's; plots_passkey.py: the
passkey heatmaps; plots_bench.py: `poslab bench` and docs/11's wavelengths).

Every figure is saved as PNG and SVG, in the one style of style.py (a fixed colour per encoding
in every figure). Curves show the mean over seeds with its 95% t interval as a band
(statistics/seeds.py), over the runs that pass the in-distribution gate; a panel says how many
runs the gate dropped. Uses Debian's python3-pandas and python3-matplotlib (the `python3` on PATH
may be another interpreter: call /usr/bin/python3).

Why over 500 lines (about 610): it holds the helpers every static figure shares and the one-stage
figure kinds drawn with them, each kind a function of 15 to 55 lines. A family of kinds moves to
its own module when it grows (plots_extension, plots_passkey, plots_bench); copy distance and the
streaming cache of a two-stage study with many arms are drawn by plots_many_arms (faceted, in the
study's styles); their one-stage forms, here, are the next to move.
"""
import os

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from poslab_analysis.figures import style as poslab_style  # noqa: E402
from poslab_analysis.figures.figure_sets import budget_points  # noqa: E402
from poslab_analysis.figures.style import ordered  # noqa: E402
from poslab_analysis.statistics import seeds as poslab_stats  # noqa: E402


def series_column(frame):
    """What distinguishes the curves: the encoding, or else the study's variant."""
    if "encoding.type" in frame and frame["encoding.type"].nunique() > 1:
        return "encoding.type"
    if "variant" in frame:
        return "variant"
    return "encoding.type"


def gated(frame):
    """The rows of runs that pass the in-distribution gate (poslab_stats.gate_passed)."""
    return frame[poslab_stats.gate_passed(frame)]


def mean_band(ax, frame, x, y, label, **style):
    """Mean of y over seeds at each x, with its 95% t interval as a band (gated runs only;
    the points are poslab_stats.mean_points, as in the report's charts)."""
    stats = poslab_stats.mean_points(gated(frame), x, y)
    if not len(stats):
        return None
    name = str(label)
    style.setdefault("color", poslab_style.colour(name))
    from_cycle = style["color"] is None  # no encoding colour: matplotlib's next one
    style.setdefault("marker", "o")
    style.setdefault("markersize", 3.5)
    given_ls = "ls" in style or "linestyle" in style
    line, = ax.plot(stats[x], stats["mean"], lw=1.4, label=poslab_style.label(name), **style)
    if from_cycle:
        distinct_colour(ax, line)
    if not given_ls:
        distinct_line_style(ax, line)
    line.poslab_n = (int(stats["n"].min()), int(stats["n"].max()))  # seeds: the legend says n
    if (stats["n"] > 1).any():
        ax.fill_between(stats[x], stats["low"], stats["high"], alpha=0.12, lw=0,
                        color=line.get_color())
    return line


def distinct_colour(ax, line):
    """A curve coloured from matplotlib's cycle may land on a colour an encoding's curve in the
    same panel already has (a variant 'vanilla_m0' on Shaw's blue): then it takes the first
    colour of the cycle that no other curve there uses. Panels without such a clash keep their
    colours."""
    others = {matplotlib.colors.to_hex(other.get_color()) for other in ax.get_lines()
              if other is not line and not str(other.get_label()).startswith("_")}
    if matplotlib.colors.to_hex(line.get_color()) not in others:
        return
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", [])
    free = [c for c in cycle if matplotlib.colors.to_hex(c) not in others]
    if free:
        line.set_color(free[0])


# Line styles and markers a curve takes, in this order, when another curve of its panel already
# looks like it (same colour, line style and marker): two variants of one encoding, rope64 and
# rope64_logn, share the encoding's colour.
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


def distinct_line_style(ax, line):
    """A curve that would look exactly like another curve of its panel (same colour, line style
    and marker) takes the first line style, and marker if it has one, that no curve of that
    colour there uses. Panels without such a clash keep their styles."""
    def look(other):
        return (matplotlib.colors.to_hex(other.get_color()), other.get_linestyle(),
                str(other.get_marker()))
    others = [other for other in ax.get_lines()
              if other is not line and not str(other.get_label()).startswith("_")]
    if look(line) not in {look(other) for other in others}:
        return
    colour = matplotlib.colors.to_hex(line.get_color())
    same_colour = [other for other in others
                   if matplotlib.colors.to_hex(other.get_color()) == colour]
    k = len(same_colour)
    line.set_linestyle(LINE_STYLES[k % len(LINE_STYLES)])
    if str(line.get_marker()) not in ("None", "none", ""):
        line.set_marker(MARKERS[k % len(MARKERS)])


def dropped_text(frame):
    """'gate dropped k of n runs' when the gate dropped any of the frame's runs, else ""."""
    runs = frame.drop_duplicates("run") if "run" in frame else frame
    kept = poslab_stats.gate_passed(runs)
    return f"gate dropped {int((~kept).sum())} of {len(runs)} runs" if (~kept).any() else ""


def dropped_note(ax, frame):
    """'gate dropped k of n runs' in the corner of a panel, when it dropped any."""
    text = dropped_text(frame)
    if text:
        ax.text(0.01, 0.01, text, transform=ax.transAxes, fontsize=7, color="0.35",
                va="bottom")


def save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        path = os.path.join(out_dir, f"{name}.{ext}")
        metadata = {"Date": None} if ext == "svg" else {}
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


def panels(keys, width=3.6, height=3.0, columns=3):
    """A grid of panels, at most `columns` wide, so that each stays readable in the README."""
    n = len(keys)
    cols = min(columns, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def panel_column(frame):
    """What separates the panels: the task, the corpus (data.path), or the study's variant, the
    first of them that varies and does not already separate the curves."""
    series = series_column(frame)
    for column in ("task.name", "data.path", "variant"):
        if column in frame and column != series and frame[column].nunique() > 1:
            return column
    return "task.name" if "task.name" in frame else None


def panel_title(column, value):
    if column == "data.path":
        return os.path.basename(str(value).rstrip("/")) or str(value)
    return str(value)


def length_generalization(summary, out_dir, metric="accuracy", name=None):
    """A metric vs evaluation length, one panel per task (or corpus), one curve per encoding."""
    every_row = summary[summary["kind"] == "length"]
    rows = every_row.dropna(subset=[metric])
    if rows.empty:
        return []
    # Settings a model cannot run (a learned table shorter than the input) have no value: say so
    # in the panel rather than let the curve silently stop.
    missing = every_row[every_row[metric].isna()]
    col = panel_column(rows)
    groups = ordered(rows[col]) if col else [None]
    # x: the factor of the training length, or the length itself when the runs were trained at
    # different lengths (ALiBi at L beside sinusoidal at 2L: "1x" would be two lengths).
    trained = poslab_stats.trained_lengths(rows)
    in_lengths = poslab_stats.trained_at_several_lengths(rows)
    x = "seq_len" if in_lengths else "factor"
    fig, axes = panels(groups)
    for ax, group in zip(axes, groups):
        sub = rows if group is None else rows[rows[col] == group]
        series = series_column(sub)
        for curve in ordered(sub[series]):
            mean_band(ax, sub[sub[series] == curve], x, metric, curve)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sub[x].unique()))
        ax.get_xaxis().set_major_formatter(
            matplotlib.ticker.FormatStrFormatter("%d" if in_lengths else "%gx"))
        ax.get_xaxis().set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("evaluation length" if in_lengths else "evaluation length / training length")
        ax.set_ylabel("loss (nats per scored token)" if metric == "loss" else metric.replace("_", " "))
        ax.set_title(panel_title(col, group) if group is not None else "")
        for length in (sorted(set(trained[sub.index].astype(int))) if in_lengths else [1.0]):
            poslab_style.reference_line(ax, length, f"trained {length}" if in_lengths
                                        else "trained", axis="x")
        if metric in ("accuracy", "exact_match"):
            ax.set_ylim(-0.03, 1.03)
        if group == "parity" and metric == "accuracy":
            poslab_style.reference_line(ax, 0.5, "chance")
        dropped_note(ax, sub)
        gone = missing if group is None else missing[missing[col] == group]
        if not gone.empty and "encoding.type" in gone:
            notes = [f"{poslab_style.label(e)}: no value from "
                     f"{gone[gone['encoding.type'] == e]['factor'].min():g}x on (cannot represent "
                     f"those positions)" for e in ordered(gone["encoding.type"])]
            ax.text(0.01, 0.99, "\n".join(notes), transform=ax.transAxes, fontsize=7,
                    color="0.35", va="top")
    if metric == "loss" and "unigram_loss" in rows and rows["unigram_loss"].notna().any():
        for ax, group in zip(axes, groups):
            sub = rows if group is None else rows[rows[col] == group]
            poslab_style.reference_line(ax, float(sub["unigram_loss"].mean()), "unigram")
    poslab_style.legend_outside(fig, axes)
    fig.tight_layout()
    return save(fig, out_dir, name or f"length_generalization_{metric}")


def randomized_cells(randomized):
    """The panels of randomized_vs_plain: (task, encoding), tasks in the study's order."""
    return [(task, encoding) for task in dict.fromkeys(randomized["variant"])
            for encoding in ordered(randomized["encoding.type"])]


def randomized_curves(plain, randomized, task, encoding, metric):
    """The three curves of one randomized_vs_plain panel: (name, rows, line style)."""
    curves = (("plain", plain, "length", dict(ls="-", marker="o")),
              ("randomized, sampled positions", randomized, "length_sampled",
               dict(ls="--", marker="s")),
              ("randomized, contiguous positions", randomized, "length",
               dict(ls=":", marker="^")))
    return [(name, frame[(frame["variant"] == task) & (frame["encoding.type"] == encoding)
                         & (frame["kind"] == kind)].dropna(subset=[metric]), style)
            for name, frame, kind, style in curves]


def randomized_vs_plain(plain, randomized, out_dir, metric="exact_match"):
    """Ruoss et al.'s comparison: one panel per (task, encoding) of the randomized study, exact
    match against evaluation length for the plain model and for the randomized one, evaluated
    with positions sampled as in training and with contiguous positions."""
    cells = randomized_cells(randomized)
    columns = len(set(e for _, e in cells))
    fig, axes = panels(cells, width=2.6, height=2.4, columns=columns)
    for ax, (task, encoding) in zip(axes, cells):
        for name, rows, style in randomized_curves(plain, randomized, task, encoding, metric):
            line = mean_band(ax, rows, "factor", metric, encoding, **style)  # encoding's colour
            if line is not None:
                line.set_label(name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(randomized["factor"].dropna().unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{task}, {poslab_style.label(encoding)}", fontsize=9)
        ax.set_xlabel("evaluation length / training length", fontsize=8)
        ax.set_ylabel(metric.replace("_", " "), fontsize=8)
        poslab_style.reference_line(ax, 1.0, "trained", axis="x")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:  # the first panel may miss a curve its gate dropped
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    title = poslab_style.seeds_title(axes)
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, -0.02),
               title=title.replace(",\n", ", ").replace("\n", " ") if title else None,
               title_fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save(fig, out_dir, f"randomized_vs_plain_{metric}")


def memory_curves(summary, out_dir, figure_name="loss_vs_memory"):
    """Loss vs evaluation memory length, one panel per (task or corpus, trained memory), one
    curve per encoding; a dotted line marks the memory the models were trained with."""
    rows = summary[summary["kind"] == "memory"].dropna(subset=["loss"])
    if rows.empty:
        return []
    col = panel_column(rows)
    groups = [(t, m) for t in (ordered(rows[col]) if col else [None])
              for m in (sorted(rows["memory.mem_len"].unique()) if "memory.mem_len" in rows
                        else [None])]
    # One panel alone gets more width: its symlog axis carries ticks 0, 2^3 .. 2^8, and the
    # legend sits beside it.
    fig, axes = panels(groups, width=5.4 if len(groups) == 1 else 3.6)
    for ax, (group, trained_mem) in zip(axes, groups):
        sub = rows
        if group is not None:
            sub = sub[sub[col] == group]
        if trained_mem is not None:
            sub = sub[sub["memory.mem_len"] == trained_mem]
        series = series_column(sub)
        for name in ordered(sub[series]):
            mean_band(ax, sub[sub[series] == name], "mem_len", "loss", name)
        ax.set_xscale("symlog", base=2, linthresh=8)
        ax.set_xlabel("evaluation memory length")
        ax.set_ylabel("loss (nats per scored token)")
        parts = [panel_title(col, group)] if group is not None else []
        if trained_mem is not None:
            parts.append(f"trained with memory {trained_mem}")
            if trained_mem > 0:
                poslab_style.reference_line(ax, trained_mem, "trained", axis="x")
        ax.set_title(", ".join(parts))
        if "unigram_loss" in sub and sub["unigram_loss"].notna().any():
            poslab_style.reference_line(ax, float(sub["unigram_loss"].mean()), "unigram")
        dropped_note(ax, sub)
    poslab_style.legend_outside(fig, axes)
    fig.tight_layout()
    return save(fig, out_dir, figure_name)


def loss_by_position(positions, out_dir, kind="memory", figure_name="loss_by_position"):
    """Loss at each position inside a segment: one panel per task (or corpus) and evaluation
    setting (kind "memory": no memory and the largest; kind "length": the longest segment), one
    curve per encoding (or variant)."""
    rows = positions[positions["kind"] == kind]
    if rows.empty:
        return []
    trained_note = ""
    if kind == "memory" and "memory.mem_len" in rows:  # the models trained with memory
        rows = rows[rows["memory.mem_len"] == rows["memory.mem_len"].max()]
        trained_note = f"models trained with memory {int(rows['memory.mem_len'].max())}"
    col = panel_column(rows)
    groups = ordered(rows[col]) if col else [None]
    if kind == "memory":
        settings = sorted({rows["mem_len"].min(), rows["mem_len"].max()})
        setting_column, setting_text = "mem_len", "evaluation memory {}"
    else:
        settings = [rows["seq_len"].max()]
        setting_column, setting_text = "seq_len", "segment {}"
    keys = [(g, v) for g in groups for v in settings]
    fig, axes = panels(keys, width=4.8 if kind == "length" else 3.6)
    for ax, (group, value) in zip(axes, keys):
        sub = rows[rows[setting_column] == value]
        if group is not None:
            sub = sub[sub[col] == group]
        series = series_column(sub)
        if kind == "length":
            # A long segment: average each run's loss over bins of positions (16 bins per
            # trained length) so that the curve is readable, and mark the trained length.
            trained = int(rows["seq_len"].min())
            width = max(1, trained // 16)
            sub = sub.assign(position=(sub["position"] // width) * width + (width - 1) / 2)
            keys = [c for c in ("run", series, "position") if c in sub]
            sub = sub.groupby(keys, as_index=False)["loss"].mean()
            poslab_style.reference_line(ax, trained, "trained length", axis="x")
        for name in ordered(sub[series]):
            mean_band(ax, sub[sub[series] == name], "position", "loss", name, marker=None)
        ax.set_xlabel("position inside the segment")
        ax.set_ylabel("loss")
        prefix = panel_title(col, group) + ", " if group is not None else ""
        ax.set_title(prefix + setting_text.format(value))
    # One y range for every panel: the gap between two panels is what they are compared for.
    bottom = min(ax.get_ylim()[0] for ax in axes)
    top = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(bottom, top)
    poslab_style.legend_outside(fig, axes)
    if trained_note:
        fig.suptitle(trained_note, fontsize="medium")
    fig.tight_layout()
    return save(fig, out_dir, figure_name)


def shaw_clip(summary, out_dir):
    """Loss vs Shaw's clipping distance k, one curve per table choice."""
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"])
    fig, axes = panels([None])
    ax = axes[0]
    for variant in ordered(rows["variant"]) if "variant" in rows else [None]:
        part = rows if variant is None else rows[rows["variant"] == variant]
        mean_band(ax, part, "encoding.clip_k", "loss", variant or "")
    ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xlabel("clip distance k")
    ax.set_ylabel("validation loss (nats per byte)")
    ax.legend(fontsize=8, title=poslab_style.seeds_title([ax]), title_fontsize=8,
              alignment="left")
    return save(fig, out_dir, "shaw_clip")


def xl_terms(summary, out_dir):
    """Transformer-XL term ablation: loss of each variant (one row each) with and without long
    memory, as points with their 95% t interval over seeds. Points, not bars: the losses differ
    in the second decimal, and a bar cut off below its base would exaggerate that."""
    rows = summary.dropna(subset=["loss"])
    fig, axes = panels([None], width=4.4, height=0.45 * rows["variant"].nunique() + 1.4)
    ax = axes[0]
    variants = list(dict.fromkeys(rows["variant"]))
    settings = [("main", None, "trained memory")]
    mem_rows = rows[rows["kind"] == "memory"]
    if not mem_rows.empty:
        settings = [("memory", mem_rows["mem_len"].min(), None),
                    ("memory", mem_rows["mem_len"].max(), None)]
    offset = 0.3 / max(1, len(settings) - 1)
    seeds = set()  # n of every point
    for s, (kind, mem, label) in enumerate(settings):
        sub = rows[rows["kind"] == kind]
        if mem is not None:
            sub = sub[sub["mem_len"] == mem]
            label = f"evaluation memory {mem}"
        ys, means, errs = [], [], []
        for i, variant in enumerate(variants):
            mean, low, high, n = poslab_stats.t_interval(sub[sub["variant"] == variant]["loss"])
            seeds.add(int(n))
            ys.append(i + (s - (len(settings) - 1) / 2) * offset)
            means.append(mean)
            errs.append([mean - low if low == low else 0, high - mean if high == high else 0])
        ax.errorbar(means, ys, xerr=list(zip(*errs)), fmt="o", capsize=3, label=label,
                    color=f"C{s}")
    ax.set_yticks(range(len(variants)), variants)
    ax.invert_yaxis()  # the first variant on top
    n = f"{min(seeds)}" if len(seeds) == 1 else f"{min(seeds)} to {max(seeds)}"
    ax.set_xlabel(f"validation loss (nats per byte)\nmean and 95% t interval over n = {n} seeds")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(settings),
              frameon=False)
    fig.tight_layout()
    return save(fig, out_dir, "xl_terms")


def pilot_budget(summary, out_dir, name):
    """A pilot of training budgets: validation loss at the training length against steps, one
    line per condition (its variant name without the step count, e.g. xl_m32_6000 -> xl_m32),
    with the bigram baseline of the validation split for scale."""
    rows = budget_points(summary)
    fig, axes = panels([None], width=5.2, height=3.6)
    ax = axes[0]
    for condition in sorted(rows["condition"].dropna().unique()):
        part = rows[rows["condition"] == condition].sort_values("steps")
        ax.plot(part["steps"], part["loss"], marker="o", markersize=3.5, label=condition)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(rows["steps"].dropna().unique()))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    ax.set_xlabel("training steps")
    ax.set_ylabel("validation loss at the training length (nats/byte)")
    if "bigram_loss" in rows and rows["bigram_loss"].notna().any():
        poslab_style.reference_line(ax, float(rows["bigram_loss"].dropna().iloc[0]), "bigram")
    poslab_style.legend_outside(fig, [ax])
    fig.tight_layout()
    return save(fig, out_dir, name)


def pilot_conditions(summary, out_dir, name):
    """A pilot of conditions (sizes, lengths), one budget each: validation loss at each run's
    own training length, one bar per variant, with the bigram baseline for scale."""
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"])
    fig, axes = panels([None], width=1.0 * len(rows) + 2.5, height=3.4)
    ax = axes[0]
    labels = [f"{v}\n(segment {int(L)})" for v, L in zip(rows["variant"], rows["seq_len"])]
    ax.bar(range(len(rows)), rows["loss"], width=0.6, color=poslab_style.colour("rope"))
    for i, loss in enumerate(rows["loss"]):
        ax.annotate(f"{loss:.3f}", (i, loss), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(rows)))
    # A bar has an inch of room: "(segment 256)", 13 characters, fits; longer variant names
    # would run into their neighbours' (pilots of many variants): the names stand upright then.
    upright = max(len(str(v)) for v in rows["variant"]) > 13
    ax.set_xticklabels(labels, rotation=90 if upright else 0)
    ax.set_ylabel("validation loss at its\ntraining length (nats/byte)")
    if "bigram_loss" in rows and rows["bigram_loss"].notna().any():
        poslab_style.reference_line(ax, float(rows["bigram_loss"].dropna().iloc[0]), "bigram")
    fig.tight_layout()
    return save(fig, out_dir, name)


def pilot_gate(summary, out_dir, name):
    """A pilot of task settings: exact match on the largest training sizes (the gate set), one
    group of bars per task (variant), one bar per encoding, with the 95% gate threshold."""
    rows = summary[summary["kind"] == "gate"].dropna(subset=["exact_match"]).copy()
    if "variant" not in rows:  # no variants: one group, named by the task if the study has one
        rows["variant"] = rows["task.name"] if "task.name" in rows else "(one task)"
    elif "task.name" in rows:  # tasks as an axis: one group per (variant, task)
        rows["variant"] = rows["variant"].astype(str) + "\n" + rows["task.name"].astype(str)
    variants = list(dict.fromkeys(rows["variant"]))
    encodings = ordered(rows["encoding.type"])
    fig, axes = panels([None], width=1.2 * len(variants) + 2.5, height=3.4)
    ax = axes[0]
    width = 0.8 / max(1, len(encodings))
    for e, encoding in enumerate(encodings):
        means = [rows[(rows["variant"] == v) & (rows["encoding.type"] == encoding)]["exact_match"].mean()
                 for v in variants]
        xs = [i + (e - (len(encodings) - 1) / 2) * width for i in range(len(variants))]
        ax.bar(xs, means, width, color=poslab_style.colour(encoding),
               label=poslab_style.label(encoding))
        for x, m in zip(xs, means):  # the value on every bar: a bar of 0 is otherwise invisible
            if m == m:  # not NaN (no such run)
                ax.annotate(f"{m:.2f}", (x, m), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6.5)
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("exact match, largest training sizes")
    if "study" in rows:
        ax.set_title(str(rows["study"].iloc[0]), fontsize=9)
    poslab_style.reference_line(ax, 0.95, "gate 0.95")
    poslab_style.legend_outside(fig, [ax])
    fig.tight_layout()
    return save(fig, out_dir, name)


def copy_distance_panels(copies):
    """What the loss-by-copy-distance figure shows (eval.copy_distance,
    STUDY/loss_by_copy_distance.csv): one panel per evaluation setting (kind, segment, memory),
    as [(title, series column, curves, references)]. curves: the copy bytes' rows, x = the
    bucket's first distance (bucket [x, 2x)); references: per series, the mean loss of bytes
    with no match, drawn as a dashed line at every x of the panel. Empty buckets are left out."""
    rows = copies.dropna(subset=["loss"])
    out = []
    settings = rows[["kind", "seq_len", "mem_len"]].drop_duplicates()
    order = {"main": 0, "length": 1, "memory": 2}
    settings = sorted(settings.itertuples(index=False, name=None),
                      key=lambda s: (order.get(s[0], 3), s[1], s[2]))
    for kind, seq_len, mem_len in settings:
        sub = rows[(rows["kind"] == kind) & (rows["seq_len"] == seq_len)
                   & (rows["mem_len"] == mem_len)]
        series = series_column(sub)
        curves = sub[sub["class"] == "copy"].assign(x=lambda f: f["distance_low"])
        xs = sorted(curves["x"].unique())
        reference = sub[sub["class"] == "no_match"]
        references = pd.concat([reference.assign(x=x) for x in xs]) if xs else reference.iloc[0:0]
        k = int(sub["min_match"].iloc[0])
        title = f"{kind}, segment {int(seq_len)}" + (f", memory {int(mem_len)}" if mem_len else "") \
            + f", k = {k}"
        out.append((title, series, curves, references))
    return out


def loss_by_copy_distance(copies, out_dir, figure_name="loss_by_copy_distance"):
    """Loss of bytes that continue a string seen d bytes earlier, against d (log 2 axis), one
    curve per encoding (or variant); dashed, in the same colour: the loss of bytes with no
    match, the level a model that ignores the repeat would sit at."""
    keys = copy_distance_panels(copies)
    if not keys:
        return []
    fig, axes = panels(keys, width=4.2)
    for ax, (title, series, curves, references) in zip(axes, keys):
        for name in ordered(curves[series]):
            line = mean_band(ax, curves[curves[series] == name], "x", "loss", name)
            colour = line.get_color() if line is not None else None
            mean_band(ax, references[references[series] == name], "x", "loss",
                      f"{poslab_style.label(str(name))}, no match", color=colour,
                      linestyle="--", marker=None)
        ax.set_xscale("log", base=2)
        xs = sorted(curves["x"].unique())
        ax.set_xticks(xs, [str(int(x)) for x in xs])  # the buckets' first distances
        ax.minorticks_off()
        ax.set_xlabel("copy distance d (bytes; bucket [d, 2d))")
        ax.set_ylabel("loss (nats per byte)")
        ax.set_title(title, fontsize=9)
    poslab_style.legend_outside(fig, axes)
    fig.suptitle("loss of bytes that continue a string seen d bytes earlier", fontsize="medium")
    fig.tight_layout()
    return save(fig, out_dir, figure_name)


STREAM_MODES = ("stream_sinks", "stream_window", "stream_recompute", "stream_memory",
                "stream_dense")


def stream_panels(streams):
    """What the loss-along-the-stream figure shows (eval.stream_length,
    STUDY/loss_by_stream_position.csv): one panel per streaming mode and cache (kind, sinks,
    recent, positions), as [(title, series column, curves)]; x = the first stream position of
    each bucket of bytes. The table's buckets (train.seq_len bytes each) are merged into at
    most about 25 per stream, each the token-weighted mean of the buckets it holds, so that a
    curve shows the trend rather than the text of each 64 bytes."""
    rows = streams.dropna(subset=["loss"])
    if rows.empty:
        return []
    width = int((rows["position_high"] - rows["position_low"]).max())
    width *= max(1, round(int(rows["position_high"].max()) / width / 25))
    rows = rows.assign(x=(rows["position_low"] // width) * width,
                       weighted=rows["loss"] * rows["tokens"])
    keys = [c for c in rows.columns
            if c not in ("position_low", "position_high", "tokens", "loss", "weighted")]
    rows = rows.groupby(keys, as_index=False, dropna=False)[["weighted", "tokens"]].sum()
    rows = rows.assign(loss=rows["weighted"] / rows["tokens"])
    columns = ["kind", "stream_sinks", "stream_recent", "stream_positions"]
    order = {kind: i for i, kind in enumerate(STREAM_MODES)}
    settings = sorted(rows[columns].drop_duplicates().itertuples(index=False, name=None),
                      key=lambda s: (order.get(s[0], len(order)), s[1], s[2], str(s[3])))
    out = []
    for kind, sinks, recent, positions in settings:
        sub = rows[(rows["kind"] == kind) & (rows["stream_sinks"] == sinks)
                   & (rows["stream_recent"] == recent) & (rows["stream_positions"] == positions)]
        mode = kind[len("stream_"):] if kind.startswith("stream_") else kind
        cache = ("everything in view" if mode == "dense"
                 else f"windows of {int(recent) + 1}" if mode == "recompute"
                 else f"memory of {int(recent)}" if mode == "memory"
                 else f"{int(sinks)} sinks + {int(recent)} recent")
        out.append((f"{mode}: {cache}, {positions} positions", series_column(sub), sub))
    return out


def stream_colours(streams, keys):
    """{curve name: colour}, one per MODEL in every panel: a run that only reads its parent's
    model with another cache (a stage-2 variant, `parent` set) takes its parent's colour; a
    model takes its encoding's colour, else (or when another model has it already: rope64 and
    rope64_sink are both RoPE) the next free colour of matplotlib's cycle."""
    names = ordered(pd.concat([curves[series].astype(str) for _, series, curves in keys]))
    model = {name: name for name in names}
    if "parent" in streams and "variant" in streams:
        for variant, parent in streams[["variant", "parent"]].drop_duplicates().itertuples(
                index=False):
            if str(variant) in model and isinstance(parent, str) and parent:
                model[str(variant)] = parent.split(",")[0]
    models = list(dict.fromkeys([model[n] for n in names if model[n] == n]
                                + [model[n] for n in names]))
    taken = {poslab_style.colour(m) for m in models} - {None}
    free = [c for c in matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", [])
            if c not in taken]
    of_model, used = {}, set()
    for m in models:
        own = poslab_style.colour(m)
        of_model[m] = own if own is not None and own not in used else (free.pop(0) if free
                                                                       else None)
        used.add(of_model[m])
    return {name: of_model[model[name]] for name in names}


def loss_by_stream_position(streams, out_dir, figure_name="loss_by_stream_position"):
    """The loss along a long stream read token by token (StreamingLLM's figure 3 in miniature),
    a panel per cache, one curve per encoding (or variant): bounded caches stay flat where dense
    attention past the trained length does not."""
    keys = stream_panels(streams)
    if not keys:
        return []
    colours = stream_colours(streams, keys)
    fig, axes = panels(keys, width=4.2)
    for ax, (title, series, curves) in zip(axes, keys):
        for name in ordered(curves[series]):
            mean_band(ax, curves[curves[series] == name], "x", "loss", name, markersize=2,
                      color=colours.get(str(name)))
        ax.set_xlabel("position in the stream (bytes, start of a bucket)")
        ax.set_ylabel("loss (nats per byte)")
        ax.set_title(title, fontsize=9)
    low = min(ax.get_ylim()[0] for ax in axes[:len(keys)])
    high = max(ax.get_ylim()[1] for ax in axes[:len(keys)])
    for ax in axes[:len(keys)]:  # one scale, so that the caches compare
        ax.set_ylim(low, high)
    poslab_style.legend_outside(fig, axes)
    fig.suptitle("loss along the stream, by cache", fontsize="medium")
    fig.tight_layout()
    return save(fig, out_dir, figure_name)
