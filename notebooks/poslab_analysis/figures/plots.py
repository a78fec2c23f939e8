"""Standard figures of poslab's studies, from the tidy CSVs `poslab run` writes.

    /usr/bin/python3 notebooks/poslab_plots.py results/state_reuse        # -> results/state_reuse/figures/
    build/poslab plot results/state_reuse                                 # the same

Every figure is saved as PNG and SVG, in the one style of poslab_style.py (a fixed colour per
encoding in every figure). Curves show the mean over seeds with its 95% t interval as a band
(poslab_stats.py), over the runs that pass the in-distribution gate; a panel says how many runs
the gate dropped. Also writes summary_ci.csv (the table behind the curves). Uses Debian's
python3-pandas and python3-matplotlib (the `python3` on PATH may be another interpreter: call
/usr/bin/python3).
"""
import os
import sys

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from poslab_analysis.statistics import seeds as poslab_stats  # noqa: E402
from poslab_analysis.figures import style as poslab_style  # noqa: E402
from poslab_analysis.figures.style import ENCODING_ORDER, ordered  # noqa: E402,F401

def load(study_dir):
    """summary.csv (one row per run and evaluation setting) and loss_by_position.csv, if any."""
    summary = pd.read_csv(os.path.join(study_dir, "summary.csv"))
    positions = None
    for name in ("loss_by_position.csv", "loss_by_position.csv.gz"):  # large ones are committed gzipped
        path = os.path.join(study_dir, name)
        if os.path.exists(path):
            positions = pd.read_csv(path)
            break
    return summary, positions


def series_column(frame):
    """What distinguishes the curves: the encoding, or else the study's variant."""
    if "encoding.type" in frame and frame["encoding.type"].nunique() > 1:
        return "encoding.type"
    if "variant" in frame:
        return "variant"
    return "encoding.type"


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


def gated(frame):
    """The rows of runs that pass the in-distribution gate (poslab_stats.gate_passed)."""
    return frame[poslab_stats.gate_passed(frame)]


def mean_band(ax, frame, x, y, label, **style):
    """Mean of y over seeds at each x, with its 95% t interval as a band (gated runs only)."""
    frame = gated(frame)
    stats = []
    for value, group in frame.groupby(x):
        mean, low, high, n = poslab_stats.t_interval(group[y])
        stats.append((value, mean, low, high, n))
    if not stats:
        return None
    stats = pd.DataFrame(stats, columns=[x, "mean", "low", "high", "n"]).sort_values(x)
    name = str(label)
    style.setdefault("color", poslab_style.colour(name))
    from_cycle = style["color"] is None  # no encoding colour: matplotlib's next one
    style.setdefault("marker", "o")
    style.setdefault("markersize", 3.5)
    line, = ax.plot(stats[x], stats["mean"], lw=1.4, label=poslab_style.label(name), **style)
    if from_cycle:
        distinct_colour(ax, line)
    line.poslab_n = (int(stats["n"].min()), int(stats["n"].max()))  # seeds: the legend says n
    if (stats["n"] > 1).any():
        low, high = stats["low"].fillna(stats["mean"]), stats["high"].fillna(stats["mean"])
        if y in ("accuracy", "exact_match"):  # a t interval can leave [0, 1]; the score cannot
            low, high = low.clip(0, 1), high.clip(0, 1)
        elif y == "loss":  # nor can a loss go below 0
            low = low.clip(lower=0)
        ax.fill_between(stats[x], low, high, alpha=0.12, lw=0, color=line.get_color())
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


def dropped_note(ax, frame):
    """'gate dropped k of n runs' in the corner of a panel, when it dropped any."""
    runs = frame.drop_duplicates("run") if "run" in frame else frame
    kept = poslab_stats.gate_passed(runs)
    if (~kept).any():
        ax.text(0.01, 0.01, f"gate dropped {int((~kept).sum())} of {len(runs)} runs",
                transform=ax.transAxes, fontsize=7, color="0.35", va="bottom")


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


def plain_beside(study_dir, summary):
    """The plain study beside a randomized one (results/X beside results/X_randomized), or no
    rows when it is not there: the randomized curves are then drawn alone."""
    plain_dir = study_dir.rstrip("/")
    plain_dir = plain_dir[:-len("_randomized")] if plain_dir.endswith("_randomized") else ""
    if plain_dir and os.path.exists(os.path.join(plain_dir, "summary.csv")):
        return load(plain_dir)[0]
    return summary.iloc[0:0]


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


def varies_xl_terms(study_dir):
    """Does the study's file (results/STUDY/study.toml) switch Transformer-XL's terms (a)-(d) or
    its u, v in its variants? Only then is the xl_terms figure the right one."""
    path = os.path.join(study_dir, "study.toml")
    if not os.path.exists(path):
        return False
    import tomllib
    with open(path, "rb") as f:
        variants = tomllib.load(f).get("variant", [])
    return any(key.startswith(("encoding.term_", "encoding.untie_uv"))
               for variant in variants for key in variant.get("set", {}))


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
    ax.set_xticklabels(labels)
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


def reuse_speed(bench_dir, out_dir=None):
    """`poslab bench --reuse`: evaluation tokens/s against attention length for the vanilla
    sliding window, its per-segment variant and state reuse (log scales), with the speedup of
    reuse over the vanilla model written at each point (Dai et al. 2019, Table 9)."""
    table = pd.read_csv(os.path.join(bench_dir, "reuse_speed.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = panels([None], width=5.0, height=3.8)
    ax = axes[0]
    for column, label, colour in [
            ("reuse_tokens_per_second", "state reuse (segment + memory)", "#17becf"),
            ("per_segment_tokens_per_second", "sliding window, moves by a segment", "#7f7f7f"),
            ("vanilla_tokens_per_second", "sliding window, one pass per token (vanilla)", "#d62728")]:
        ax.plot(table["attn_len"], table[column], marker="o", markersize=3.5, color=colour,
                label=label)
    for _, row in table.iterrows():
        ax.annotate(f"{row['speedup_vs_vanilla']:.0f}x", (row["attn_len"], row["reuse_tokens_per_second"]),
                    xytext=(0, 5), textcoords="offset points", ha="center", fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(table["attn_len"])
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    ax.set_xlabel("attention length A (tokens of context)")
    ax.set_ylabel("evaluation tokens per second")
    ax.set_title("speedup of state reuse over the vanilla model", fontsize=9)
    ax.legend(loc="lower left", frameon=False, fontsize=7)
    fig.tight_layout()
    return save(fig, out_dir, "reuse_speed")


def eval_memory(bench_dir, out_dir=None):
    """`poslab bench --eval-memory` (bench/eval_memory.sh): peak resident memory of evaluating
    one row against the context length, for the training forward (every layer's weights kept),
    the evaluation-only forward at the default score budget (256 MiB) and at a 32 MiB budget
    (scores made one row and as many heads as fit at a time), with the heads per chunk written
    where the chunk holds fewer than all heads."""
    table = pd.read_csv(os.path.join(bench_dir, "eval_memory.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = panels([None], width=5.0, height=3.8)
    ax = axes[0]
    table["score_budget_mb"] = table["score_budget_mb"].fillna(0)
    series = [("training", 0, "training forward (keeps every layer's weights)", "#d62728", "o"),
              ("inference", 256, "evaluation-only, score budget 256 MiB (default)", "#7f7f7f", "s"),
              ("inference", 32, "evaluation-only, score budget 32 MiB", "#17becf", "^")]
    for path, budget, label, colour, marker in series:
        rows = table[(table["path"] == path) & (table["score_budget_mb"] == budget)]
        if rows.empty:
            continue
        rows = rows.sort_values("context")
        ax.plot(rows["context"], rows["peak_rss_mb"], marker=marker, markersize=3.5,
                color=colour, label=label)
        if path == "inference":
            for _, row in rows.iterrows():
                if row["score_chunk_heads"] < row["n_heads"]:
                    # Left above the point (the lines rise to its right); the last one below.
                    last = row["context"] == rows["context"].max()
                    ax.annotate(f"{int(row['score_chunk_heads'])} of {int(row['n_heads'])} heads",
                                (row["context"], row["peak_rss_mb"]),
                                xytext=(0, -6) if last else (-4, 5), textcoords="offset points",
                                ha="center" if last else "right", va="top" if last else "bottom",
                                fontsize=7, color=colour)
    ax.set_xscale("log", base=2)
    contexts = sorted(table["context"].unique())
    ax.set_xticks(contexts)
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    ax.set_xlabel("context (segment 512 + memory), tokens")
    ax.set_ylabel("peak resident memory, MB")
    first = table.iloc[0]
    ax.set_title(f"evaluation memory, {first['encoding']} d_model {first['d_model']}, "
                 f"{first['n_layers']} layers, {first['n_heads']} heads, batch 1", fontsize=9)
    ax.legend(loc="upper left", frameon=False, fontsize=7)
    fig.tight_layout()
    return save(fig, out_dir, "eval_memory")


def scaling(bench_dir, out_dir=None):
    """`poslab bench --scaling`: training tokens/s of every encoding against the segment length
    (batch x segment fixed, memory = segment), and its GFLOP/s (FLOPs counted in its sgemm
    calls, its own products included) relative to 'none' at the same segment, with the 0.9
    target of issue 15 as a reference line. Naive reference paths are dashed."""
    table = pd.read_csv(os.path.join(bench_dir, "scaling.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = panels([0, 1], width=4.4, height=3.6, columns=2)
    for encoding in ordered(table["encoding"]):
        for path, style in (("fast", "-"), ("naive", "--")):
            rows = table[(table["encoding"] == encoding) & (table["path"] == path)]
            if rows.empty:
                continue
            name = poslab_style.label(encoding) + (" (naive)" if path == "naive" else "")
            common = dict(color=poslab_style.colour(encoding), ls=style, marker="o",
                          markersize=3, lw=1.1)
            axes[0].plot(rows["segment"], rows["tokens_per_second"], label=name, **common)
            if path == "fast":
                axes[1].plot(rows["segment"], rows["gflops_vs_none"], **common)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(table["segment"].unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
        ax.set_xlabel("segment length (memory = segment)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("training tokens per second")
    axes[0].set_title("speed", fontsize=9)
    axes[1].set_ylabel("GFLOP/s relative to 'none'")
    axes[1].set_title("GFLOP/s (own products counted) / none's", fontsize=9)
    poslab_style.reference_line(axes[1], 0.9, "target 0.9")
    poslab_style.reference_line(axes[1], 1.0, "none")
    tokens = int((table["segment"] * table["batch"]).iloc[0])
    fig.suptitle(f"training at length: batch x segment = {tokens} tokens, median of 5 repetitions",
                 fontsize=9)
    poslab_style.legend_outside(fig, axes)
    return save(fig, out_dir, "scaling")


PASSKEY_METRICS = {
    "exact_match": "passkey exact match (teacher-forced, all 5 digits)",
    "passkey_greedy_exact_match": "passkey exact match (greedy decoding)",
    "accuracy": "passkey digit accuracy (teacher-forced)",
}


def passkey_layout(summary, metric):
    """What a passkey heatmap of `metric` shows, or None: the passkey rows, the condition columns
    (whatever varies besides the seed; the encoding first) and their values per panel, the x
    column (the factor of the training length, or the length in bytes when the runs were trained
    at different lengths: a fine-tune at 4L beside its parent at L has one factor, two lengths),
    the x values and the depths."""
    rows = summary[summary["kind"] == "passkey"].dropna(subset=[metric])
    if rows.empty or "passkey_depth" not in rows:
        return None
    conditions = [c for c in poslab_stats.condition_columns(rows)
                  if c != "study" and rows[c].nunique(dropna=False) > 1]
    if "encoding.type" in conditions:  # encodings in their fixed order, first
        conditions.remove("encoding.type")
        conditions.insert(0, "encoding.type")
    if conditions:
        keys = list(dict.fromkeys(rows[conditions].itertuples(index=False, name=None)))
        if conditions[0] == "encoding.type":
            order = {e: i for i, e in enumerate(ordered(rows["encoding.type"]))}
            keys.sort(key=lambda k: order.get(k[0], len(order)))
    else:
        keys = [()]
    in_bytes = poslab_stats.trained_at_several_lengths(rows)
    x_column = "seq_len" if in_bytes else "factor"
    return {"rows": rows, "conditions": conditions, "keys": keys, "in_bytes": in_bytes,
            "x_column": x_column, "factors": sorted(rows[x_column].unique()),
            "depths": sorted(rows["passkey_depth"].unique())}


def passkey_panel_rows(layout, key):
    """The rows of one heatmap panel (its condition values `key`)."""
    part = layout["rows"]
    for column, value in zip(layout["conditions"], key):
        part = part[part[column] == value]
    return part


def passkey_panel_title(layout, key):
    return ", ".join(poslab_style.label(str(v)) if c == "encoding.type" else f"{v}"
                     for c, v in zip(layout["conditions"], key))


def passkey_heatmaps(summary, out_dir, metric="exact_match", name="passkey_exact_match"):
    """Passkey retrieval (kind "passkey" rows): a heatmap of `metric` over evaluation length
    (x, as a factor of the training length) and depth of the key line (y, 0 = at the start of
    the filler), one panel per condition (encoding, variant, ...: whatever varies besides the
    seed), the mean over the seeds that pass the gate written in every cell."""
    layout = passkey_layout(summary, metric)
    if layout is None:
        return []
    keys, in_bytes, x_column = layout["keys"], layout["in_bytes"], layout["x_column"]
    factors, depths = layout["factors"], layout["depths"]
    # At least 3.4 inches a panel: the x label must not run into the next panel's.
    fig, axes = panels(keys, width=max(3.4, 0.62 * len(factors) + 2.0),
                       height=0.42 * len(depths) + 1.6)
    image = None
    for ax, key in zip(axes, keys):
        part = passkey_panel_rows(layout, key)
        kept = gated(part)  # a cell whose runs all fail the gate stays empty
        means = kept.groupby(["passkey_depth", x_column])[metric].mean()
        grid = [[means.get((d, f), float("nan")) for f in factors] for d in depths]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if value == value:
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6.5,
                            color="black" if value > 0.6 else "white")
        ax.set_xticks(range(len(factors)), [f"{f:g}" if in_bytes else f"{f:g}x" for f in factors])
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
        ax.grid(False)
        ax.set_xlabel("evaluation length (bytes)" if in_bytes
                      else "evaluation length / training length")
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel("depth of the key line")
        seeds = kept[poslab_stats.SEED_COLUMN].nunique() if poslab_stats.SEED_COLUMN in kept else 1
        ax.set_title(passkey_panel_title(layout, key) + (f" ({seeds} seeds)" if seeds > 1 else ""),
                     fontsize=8)
        runs = part.drop_duplicates("run") if "run" in part else part
        dropped = int((~poslab_stats.gate_passed(runs)).sum())
        if dropped:
            ax.set_title(ax.get_title() + f"\ngate dropped {dropped} of {len(runs)} runs",
                         fontsize=8)
    fig.subplots_adjust(wspace=0.3, hspace=0.55)
    fig.colorbar(image, ax=axes, shrink=0.8, label=PASSKEY_METRICS.get(metric, metric))
    return save(fig, out_dir, name)


def passkey_figures(summary, out_dir):
    """The passkey heatmaps, when the summary has passkey rows (eval.passkey_length_factors)."""
    if "passkey" not in set(summary["kind"]):
        return []
    return (passkey_heatmaps(summary, out_dir, "exact_match", "passkey_exact_match")
            + passkey_heatmaps(summary, out_dir, "passkey_greedy_exact_match",
                               "passkey_greedy_exact_match")
            + passkey_heatmaps(summary, out_dir, "accuracy", "passkey_digit_accuracy"))


def rope_wavelengths(panels_tables, original_len, factor, out_dir, name="rope_wavelengths"):
    """Each rotation pair's wavelength against the trained length, one curve per RoPE scaling
    (docs/11-extending-context.md). panels_tables: [(panel title, [(label, frame)])], each frame
    what `poslab encodings --describe rope --csv` prints (columns pair, wavelength, ...), all for
    one head size; original_len L and factor s as in those commands. Draws
    lambda'_i = 2 pi / theta'_i (log scale) against the pair index i, with the trained length L
    and the extended length s L as reference lines. A pair whose wavelength lies below L turned
    at least once over the trained length: every phase of it was seen in training."""
    fig, axes = panels([t for t, _ in panels_tables], width=4.2, height=3.6, columns=2)
    styles = ["-", "--", "-.", ":", (0, (5, 1)), (0, (1, 1))]
    markers = ["o", "s", "^", "D", "v", "P"]
    colours = ["#000000", "#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#8c6d31"]
    for ax, (title, tables) in zip(axes, panels_tables):
        for n, (label, frame) in enumerate(tables):
            ax.plot(frame["pair"], frame["wavelength"], ls=styles[n % len(styles)],
                    marker=markers[n % len(markers)], markersize=6 - n % 3, lw=1.3,
                    mfc="none" if n % 2 else colours[n % len(colours)],
                    color=colours[n % len(colours)], label=label)
        poslab_style.reference_line(ax, original_len, f"trained length L = {original_len}")
        poslab_style.reference_line(ax, factor * original_len,
                                    f"extended length sL = {factor * original_len:g}")
        ax.set_yscale("log")
        ax.set_xticks(sorted(tables[0][1]["pair"]))
        ax.set_xlabel("rotation pair i (fast to slow)")
        ax.set_ylabel("wavelength 2\u03c0/\u03b8', tokens")
        ax.set_title(title, fontsize=9)
        ax.legend(loc="upper left", frameon=False, fontsize=7)
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:  # one scale, so that the panels compare
        ax.set_ylim(low, high)
    d = 2 * len(panels_tables[0][1][0][1])
    fig.suptitle(f"RoPE's wavelengths per pair: rotated d = {d}, trained at L = {original_len}, "
                 f"factor s = {factor:g}", fontsize=9)
    fig.tight_layout()
    return save(fig, out_dir, name)


def standard_figures(study_dir, out_dir=None):
    """Every figure that fits the study's columns; returns the written paths."""
    summary, positions = load(study_dir)
    out_dir = out_dir or os.path.join(study_dir, "figures")
    written = []
    kinds = set(summary["kind"])
    study = str(summary["study"].iloc[0]) if len(summary) else ""
    if kinds <= {"main", "passkey"} and "passkey" in kinds:  # a passkey study: its heatmaps only
        written += passkey_figures(summary, out_dir)
        written.append(poslab_stats.write_summary_ci(study_dir))
        return written
    if study.startswith("pilot_"):  # pilots choose settings: their own figures
        if "gate" in kinds:
            written += pilot_gate(summary, out_dir, "pilot_gate")
        elif "memory" in kinds:  # a pilot of memory conditions: one curve per condition
            lm = summary[~summary["variant"].astype(str).str.startswith("long_range")]
            written += memory_curves(lm, out_dir, "pilot_memory")
        elif is_budget_pilot(summary):
            written += pilot_budget(summary, out_dir, "pilot_budget")
        else:  # one budget per condition: a bar per condition
            written += pilot_conditions(summary, out_dir, "pilot_conditions")
        written += passkey_figures(summary, out_dir)
        written.append(poslab_stats.write_summary_ci(study_dir))
        return written
    # A language model scores tokens (its loss against the input length), a task scores answers
    # (accuracy, loss and exact match against the instance length); a study may hold both.
    language_model = language_model_rows(summary)
    lm_runs, task_runs = summary[language_model], summary[~language_model]
    # Models trained on randomized positions are drawn only beside the plain study's runs
    # (below): the standard panels would read them with contiguous positions alone.
    randomized = "length_sampled" in kinds and "variant" in summary
    import extension_figures  # here: it imports this module
    two_stage = extension_figures.is_two_stage(summary) and "length" in kinds
    if two_stage:  # a context-extension study: lengths in bytes, stages side by side
        written += extension_figures.extension_figures(study_dir, summary, positions, out_dir)
    elif (lm_runs["kind"] == "length").any():  # LM extrapolation: loss against input length
        written += length_generalization(lm_runs, out_dir, "loss", "loss_vs_length")
    if (task_runs["kind"] == "length").any() and not randomized:
        written += length_generalization(task_runs, out_dir, "accuracy")
        written += length_generalization(task_runs, out_dir, "loss")
        if "exact_match" in task_runs:
            written += length_generalization(task_runs, out_dir, "exact_match")
    if randomized:  # beside the plain study's runs, if it is there
        written += randomized_vs_plain(plain_beside(study_dir, summary), summary, out_dir)
    if "variant" in summary and "encoding.clip_k" in summary:
        written += shaw_clip(summary, out_dir)
    elif "variant" in summary and summary["variant"].nunique() >= 2 and "length" not in kinds \
            and varies_xl_terms(study_dir):
        # Transformer-XL's terms switched off one by one, side by side
        written += xl_terms(summary, out_dir)
    if "memory" in kinds:
        written += memory_curves(summary, out_dir)
        if "task.name" in summary and summary["task.name"].nunique() > 1:
            for task in ordered(summary["task.name"]):  # one figure per task as well
                written += memory_curves(summary[summary["task.name"] == task], out_dir,
                                         f"loss_vs_memory_{task}")
        if positions is not None:
            written += loss_by_position(positions, out_dir)
    if (lm_runs["kind"] == "length").any() and positions is not None and not two_stage:
        lm_positions = positions[positions["run"].isin(set(lm_runs["run"]))]
        if (lm_positions["kind"] == "length").any():
            written += loss_by_position(lm_positions, out_dir, "length", "loss_by_position_length")
    written += passkey_figures(summary, out_dir)
    written.append(poslab_stats.write_summary_ci(study_dir))
    return written


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    for study_dir in argv[1:]:
        if any(os.path.exists(os.path.join(study_dir, name))  # poslab bench
               for name in ("reuse_speed.csv", "scaling.csv", "eval_memory.csv")):
            if os.path.exists(os.path.join(study_dir, "reuse_speed.csv")):  # --reuse
                for path in reuse_speed(study_dir):
                    print(path)
            if os.path.exists(os.path.join(study_dir, "scaling.csv")):  # --scaling
                for path in scaling(study_dir):
                    print(path)
            if os.path.exists(os.path.join(study_dir, "eval_memory.csv")):  # --eval-memory
                for path in eval_memory(study_dir):
                    print(path)
            continue
        if not os.path.exists(os.path.join(study_dir, "summary.csv")):
            print(f"poslab plot: error: {study_dir}/summary.csv not found "
                  f"(run the study first: build/poslab run experiments/NAME.toml)",
                  file=sys.stderr)
            return 1
        for path in standard_figures(study_dir):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
