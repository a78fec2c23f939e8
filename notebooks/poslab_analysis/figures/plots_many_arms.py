"""Copy distance and the streaming cache for a two-stage study with many arms (the second
context-extension study has 19): the curves in the study's own styles (plots_extension's
variant_style: one colour per method, the same in every figure of the study), faceted so that
no panel holds more than MAX_SERIES models and every legend fits beside its row.

    build/poslab plot results/context_extension_methods

  loss_by_copy_distance    rows: the method families (from scratch, rescaled frequencies,
                           Self-Extend and log-n, ReRoPE, fine-tuned; a family of more than
                           MAX_SERIES arms split in two), columns: the read lengths L, 4L and the
                           longest; the loss of bytes that continue a string seen d bytes
                           earlier against d, and, thin and dotted in the same colour, the same
                           model's loss on bytes with no earlier match
  loss_by_stream_position  top: a panel per model, the loss along the stream for each cache, in
                           the table's own buckets (L bytes) up to 16 L, then coarser (log axis:
                           what happens at byte L, where eviction starts, is visible); bottom: the
                           claim itself, window minus sinks per seed, mean and 95% t interval

A study without a study file's variants (one stage) keeps plots.py's figures of these kinds.
"""
import os

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from poslab_analysis.figures import plots
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.figures.plots_extension import POSITION_MAPS, variant_style
from poslab_analysis.reading.study_files import variant_table
from poslab_analysis.statistics import seeds as poslab_stats

MAX_SERIES = 5  # models per panel: with their no-match lines, about 10 lines at most


def families(info, variants):
    """[(title, [variants])] in the study's order, each at most MAX_SERIES long: the method
    families of a two-stage study."""
    log_n = info["log_n"] if "log_n" in info else pd.Series("off", index=info.index)

    def family(v):
        if not info.loc[v, "parent"]:
            return "trained from scratch"
        if info.loc[v, "steps"] > 0:
            return "fine-tuned"
        scaling = info.loc[v, "scaling"]
        if scaling == "self_extend" or (scaling == "none" and log_n[v] != "off"):
            return "zero-shot: Self-Extend, log-n"
        if scaling in POSITION_MAPS:
            return "zero-shot: ReRoPE, leaky ReRoPE"
        return "zero-shot: rescaled frequencies"

    order = ["trained from scratch", "zero-shot: rescaled frequencies",
             "zero-shot: Self-Extend, log-n", "zero-shot: ReRoPE, leaky ReRoPE", "fine-tuned"]
    out = []
    for title in order:
        members = [v for v in info.index if v in set(variants) and family(v) == title]
        parts = -(-len(members) // MAX_SERIES)  # split a family of more than MAX_SERIES evenly
        for k in range(parts):
            part = members[k::parts]
            out.append((title + (f" ({k + 1} of {parts})" if parts > 1 else ""), part))
    return out


def read_lengths(lengths):
    """The columns: L, 4L and the longest read (all of them when there are three or fewer)."""
    lengths = sorted(int(n) for n in lengths)
    if len(lengths) <= 3:
        return lengths
    return sorted({lengths[0], 4 * lengths[0] if 4 * lengths[0] in lengths else lengths[1],
                   lengths[-1]})


def copy_distance_faceted(copies, info, out_dir, name="loss_by_copy_distance"):
    """The copy-distance figure of a two-stage study: a row per family, a column per read
    length (kind "length": every arm read at the same lengths)."""
    rows = copies.dropna(subset=["loss"])
    rows = rows[rows["kind"] == "length"]
    variants = [v for v in info.index if (rows["variant"] == v).any()]
    groups = families(info, variants)
    lengths = read_lengths(rows["seq_len"].unique())
    if not groups or not lengths:
        return []
    k = int(rows["min_match"].iloc[0])
    fig, grid = plt.subplots(len(groups), len(lengths), figsize=(3.3 * len(lengths) + 2.6,
                                                                   2.5 * len(groups)),
                             squeeze=False, sharey=True)
    for r, (title, members) in enumerate(groups):
        for c, length in enumerate(lengths):
            ax = grid[r][c]
            here = rows[rows["seq_len"] == length]
            copy = here[here["class"] == "copy"].assign(x=lambda f: f["distance_low"])
            xs = sorted(copy["x"].unique())
            for v in members:
                style = variant_style(info, v)
                line = plots.mean_band(ax, copy[copy["variant"] == v], "x", "loss", v,
                                       markersize=3, **style)
                level = here[(here["class"] == "no_match") & (here["variant"] == v)]
                if line is not None and len(level) and xs:
                    mean = plots.gated(level)["loss"].mean()
                    ax.plot([xs[0], xs[-1]], [mean, mean], color=style["color"], lw=0.9,
                            ls=(0, (1, 2)), alpha=0.7, label="_no match")
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(int(x)) for x in xs])
            ax.minorticks_off()
            ax.tick_params(axis="x", labelsize=7)
            if r == 0:
                ax.set_title(f"read at {length} bytes", fontsize=9)
            if r == len(groups) - 1:
                ax.set_xlabel("copy distance d (bytes)")
            if c == 0:
                ax.set_ylabel(f"{title}\nloss (nats/byte)", fontsize=8)
        grid[r][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                           fontsize=7)
    # One y scale for every panel, set by the means (a band of 2 or 3 seeds can reach 20 nats
    # at a distance with few bytes and would squash every curve; it runs off the panel instead).
    means = [np.nanmax(line.get_ydata()) for ax in grid.flat for line in ax.get_lines()
             if not str(line.get_label()).startswith("_") and len(line.get_ydata())]
    grid[0][0].set_ylim(-0.2, 1.1 * max(means))
    fig.suptitle(f"loss of bytes that continue a string of at least {k} bytes seen d bytes "
                 f"earlier (bucket [d, 2d)); thin dotted: the same model on bytes with no "
                 f"earlier match\n"
                 f"({(poslab_style.seeds_title(list(grid.flat)) or '').replace(chr(10), ' ')})",
                 fontsize=9)
    fig.tight_layout()
    return plots.save(fig, out_dir, name)


# The caches of a stream, in the order and colours of every stream figure.
CACHE_COLOURS = {"stream_sinks": "#2ca02c", "stream_window": "#1f77b4",
                 "stream_recompute": "#17becf", "stream_memory": "#ff7f0e",
                 "stream_dense": "#d62728"}


def stream_model(streams):
    """{variant: model}: a variant that only reads its parent's model with another cache (its
    `parent` set) is that parent's model."""
    model = {}
    for variant, parent in streams[["variant", "parent"]].drop_duplicates().itertuples(
            index=False):
        model[str(variant)] = parent.split(",")[0] if isinstance(parent, str) and parent \
            else str(variant)
    return model


def cache_label(kind, sinks, recent, positions):
    mode = kind[len("stream_"):]
    cache = ("everything in view" if mode == "dense"
             else f"windows of {int(recent) + 1}" if mode == "recompute"
             else f"memory of {int(recent)}" if mode == "memory"
             else f"{int(sinks)} + {int(recent)}")
    return f"{mode}: {cache}, {positions} positions"


def stream_bins(rows):
    """Bin edges: the table's own buckets (one per L bytes) up to 16 of them, then doubling, so
    that the start of the stream, where eviction begins, keeps its resolution."""
    width = int((rows["position_high"] - rows["position_low"]).max())
    end = int(rows["position_high"].max())
    edges = list(range(0, min(end, 16 * width) + 1, width))
    while edges[-1] < end:
        edges.append(min(end, 2 * edges[-1]))
    return np.array(edges), width


def binned(rows, edges):
    """Token-weighted mean loss per (run, cache, bin); x = the bin's centre."""
    where = np.searchsorted(edges, rows["position_low"].to_numpy(), side="right") - 1
    rows = rows.assign(bin=where, weighted=rows["loss"] * rows["tokens"])
    keys = ["run", "train.seed", "model", "kind", "stream_sinks", "stream_recent",
            "stream_positions", "bin"]
    out = rows.groupby(keys, as_index=False)[["weighted", "tokens"]].sum()
    return out.assign(loss=out["weighted"] / out["tokens"],
                      x=(edges[out["bin"]] + edges[out["bin"] + 1]) / 2)


def window_minus_sinks(part):
    """The window's and the sinks' loss of each run paired, per bin: rows with x, the run and
    diff = window - sinks (the cache with the most sinks when there are several)."""
    sinks = part[part["kind"] == "stream_sinks"]
    if sinks.empty:
        return pd.DataFrame()
    sinks = sinks[sinks["stream_sinks"] == sinks["stream_sinks"].max()]
    window = part[part["kind"] == "stream_window"]
    paired = window.merge(sinks, on=["run", "train.seed", "x"], suffixes=("_window", "_sinks"))
    return paired.assign(diff=paired["loss_window"] - paired["loss_sinks"],
                         sinks=int(sinks["stream_sinks"].iloc[0]))


def two_stage_info(study_dir):
    """The study file's variants (reading/study_files.variant_table) when the study is a
    two-stage one (a variant with a parent), else None."""
    if not study_dir or not os.path.exists(os.path.join(study_dir, "study.toml")):
        return None
    info = variant_table(study_dir)
    return info if len(info) and (info["parent"] != "").any() else None


def copy_distance_figure(copies, study_dir, out_dir):
    """The copy-distance figure: faceted in the study's styles for a two-stage study, else
    plots.py's one panel per setting."""
    info = two_stage_info(study_dir)
    if info is None:
        return plots.loss_by_copy_distance(copies, out_dir)
    return copy_distance_faceted(copies, info, out_dir)


def stream_figure(streams, study_dir, out_dir):
    """The streaming figure: per model, with the window-minus-sinks panel, for a two-stage
    study (its variants name the models), else plots.py's one panel per cache."""
    info = two_stage_info(study_dir)
    if info is None or "parent" not in streams:
        return plots.loss_by_stream_position(streams, out_dir)
    return stream_faceted(streams, info, out_dir)


def stream_faceted(streams, info, out_dir, name="loss_by_stream_position"):
    rows = plots.gated(streams.dropna(subset=["loss"]))
    if rows.empty:
        return []
    model = stream_model(rows)
    rows = rows.assign(model=rows["variant"].astype(str).map(model))
    edges, width = stream_bins(rows)
    data = binned(rows, edges)
    models = [m for m in info.index if (data["model"] == m).any()] or sorted(data["model"].unique())
    fig, grid = plt.subplots(2, len(models), figsize=(5.0 * len(models) + 2.4, 7.4),
                             squeeze=False, gridspec_kw={"height_ratios": [3, 2]})
    settings = data[["kind", "stream_sinks", "stream_recent", "stream_positions"]]
    settings = sorted(settings.drop_duplicates().itertuples(index=False, name=None),
                      key=lambda s: (list(CACHE_COLOURS).index(s[0]) if s[0] in CACHE_COLOURS
                                     else 9, -s[1], s[2], str(s[3])))
    # The first token is evicted once the cache holds S + R + 1 keys (the caches compared share
    # that size; L when R is left to its default, less when the study sets a smaller cache).
    evict = max(int(sinks) + int(recent) + 1 for _, sinks, recent, _ in settings)
    for c, m in enumerate(models):
        top, bottom = grid[0][c], grid[1][c]
        part = data[data["model"] == m]
        for k, (kind, sinks, recent, positions) in enumerate(settings):
            cache = part[(part["kind"] == kind) & (part["stream_sinks"] == sinks)
                         & (part["stream_recent"] == recent)
                         & (part["stream_positions"] == positions)]
            same = [s for s in settings if s[0] == kind]
            style = {"color": CACHE_COLOURS.get(kind, "#7f7f7f"),
                     "ls": ("-", "--", ":")[same.index((kind, sinks, recent, positions)) % 3]}
            plots.mean_band(top, cache, "x", "loss", cache_label(kind, sinks, recent, positions),
                            markersize=2.5, **style)
        diff = window_minus_sinks(part)
        if len(diff):
            stats = poslab_stats.mean_points(diff.rename(columns={"diff": "d"}), "x", "d")
            bottom.plot(stats["x"], stats["mean"], color="#1f77b4", marker="o", markersize=2.5,
                        lw=1.4, label=f"window minus {int(diff['sinks'].iloc[0])} sinks")
            bottom.fill_between(stats["x"], stats["low"], stats["high"], color="#1f77b4",
                                alpha=0.15, lw=0)
            bottom.axhline(0, **poslab_style.REFERENCE_STYLE)
            n = f"{int(stats['n'].min())}" + (f" to {int(stats['n'].max())}"
                                               if stats["n"].max() != stats["n"].min() else "")
            bottom.set_title(f"{m}: window minus sinks, per seed (n = {n}), 95% t interval",
                             fontsize=9)
            bottom.set_ylabel("difference (nats/byte)")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xlim(edges[1] / 2, edges[-1] * 1.1)
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            poslab_style.reference_line(ax, evict, f"{evict} keys: eviction starts", axis="x")
            ax.set_xlabel("position in the stream (bytes, centre of a bin)")
        top.set_title(f"{m}: loss along the stream, by cache", fontsize=9)
        top.set_ylabel("loss (nats per byte)")
    for row in grid:  # one scale per row, so that the models compare
        low = min(ax.get_ylim()[0] for ax in row)
        high = max(ax.get_ylim()[1] for ax in row)
        for ax in row:
            ax.set_ylim(low, high)
    grid[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=7,
                       title=poslab_style.seeds_title(list(grid[0])), title_fontsize="small",
                       alignment="left")
    fig.suptitle(f"a stream read token by token: bins of {width} bytes up to {16 * width}, "
                 f"then doubling", fontsize=9)
    fig.tight_layout()
    return plots.save(fig, out_dir, name)
