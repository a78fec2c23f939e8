"""The figures of a two-stage context-extension study (experiments/context_extension.toml): models
trained from scratch at L, then each RoPE parent read zero-shot with a scaling (train.steps = 0)
or fine-tuned at a longer length, and read at several lengths. `poslab plot` draws them instead
of the one-stage figures, whose x axis (evaluation length / the run's own training length) would
put a run fine-tuned at 4L and its parent trained at L on different scales.

    build/poslab plot results/context_extension

What each variant is comes from the committed study file (results/STUDY/study.toml): its
parent (`from`), its steps, its training length and its scaling. Figures:
  extension_loss_vs_length  loss against the evaluation length in bytes; panels: trained from
                            scratch, zero-shot from the parent, fine-tuned (the largest budget)
  extension_budget          loss at the fine-tuning length against fine-tuning steps, per scaling
                            and factor s (0 steps: the same scaling and s zero-shot), the
                            from-scratch upper bound
  extension_scale           zero-shot at s = 2..16: loss at s x L and at L against s
  extension_loss_by_position  zero-shot loss by position at the longest length (where it breaks)
"""
import matplotlib.ticker
import pandas as pd

from poslab_analysis.figures import plots
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.reading.study_files import variant_table
from poslab_analysis.statistics import seeds as poslab_stats

# One colour per scaling, the same in every figure.
SCALING_COLOURS = {"none": "#222222", "linear": "#1f77b4", "ntk": "#ff7f0e", "yarn": "#2ca02c",
                   "dynamic_ntk": "#9467bd", "llama3": "#8c564b", "longrope": "#e377c2",
                   "self_extend": "#17becf", "rerope": "#d62728", "leaky_rerope": "#bcbd22"}
# The methods that change which positions far pairs read (two score passes), not the
# frequencies: a panel of their own in extension_loss_vs_length.
POSITION_MAPS = ("self_extend", "rerope", "leaky_rerope")
# A method's second, third ... variant in the study: another line style and marker.
LINE_STYLES, MARKERS = plots.LINE_STYLES, plots.MARKERS  # one sequence for every figure



def lengths_axis(ax, lengths):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(lengths))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    ax.get_xaxis().set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("evaluation length (bytes)")


def length_rows(summary, variant):
    rows = summary[(summary["variant"] == variant) & (summary["kind"] == "length")]
    return rows


def scaling_label(info, name):
    """'yarn, s = 4 (zs_yarn_s4)' for a stage-2 variant, its name for a from-scratch one."""
    if not info.loc[name, "parent"]:
        return name
    log_n = info.loc[name, "log_n"] if "log_n" in info else "off"
    with_log_n = "" if log_n == "off" else ", log-n"
    scaling = info.loc[name, "scaling"]
    if scaling == "none":
        return f"no scaling{with_log_n} ({name})"
    if scaling in POSITION_MAPS:  # no factor: the window (and group) say what they do
        return f"{scaling}{with_log_n} ({name})"
    return f"{scaling}, s = {info.loc[name, 'factor']:g}{with_log_n} ({name})"


def family_colour(info, name):
    """A variant's colour: its method's (SCALING_COLOURS) for a read or fine-tune of a parent,
    its encoding's for a model trained from scratch."""
    if not info.loc[name, "parent"]:
        return poslab_style.colour(info.loc[name, "encoding"]) or "#7f7f7f"
    return SCALING_COLOURS.get(info.loc[name, "scaling"], "#7f7f7f")


def variant_style(info, name):
    """One style per variant, the same in every figure of the study: the colour of its method
    (family_colour); the k-th variant of the study with that colour (a second factor, another
    window, log-n, another fine-tune with the same scaling, a second model of one encoding) gets
    the k-th line style and marker, so no two variants of a study look alike (up to 12 per
    colour)."""
    colour = family_colour(info, name)
    same = [v for v in info.index if family_colour(info, v) == colour]
    k = same.index(name)
    return {"color": colour, "ls": LINE_STYLES[k % len(LINE_STYLES)],
            "marker": MARKERS[k % len(MARKERS)]}


def scaling_style(info, name, members=None):
    """The style of a variant in every figure (variant_style); `members`, the panel's other
    curves, no longer changes it: a curve looks the same in every panel and figure."""
    return variant_style(info, name)


def upper_bounds(info, parent):
    """From-scratch variants of the parent's encoding trained at a longer length."""
    if not parent:
        return []
    return [v for v in info.index if not info.loc[v, "parent"]
            and info.loc[v, "encoding"] == info.loc[parent, "encoding"]
            and info.loc[v, "seq_len"] > info.loc[parent, "seq_len"]]


def seeds_note(fig, axes, title):
    """The figure title, with how many seeds stand behind the curves and what the band is."""
    note = poslab_style.seeds_title(axes)
    fig.suptitle(title + (f" ({note.replace(chr(10), ' ')})" if note else ""), fontsize=9)


def moved_reads(info, variants):
    """The reads among `variants` that change positions (Self-Extend, ReRoPE, leaky ReRoPE) or
    only add log-n: they have no factor s, and a panel of their own where a study has them."""
    log_n = info["log_n"] if "log_n" in info else pd.Series("off", index=info.index)
    return [v for v in variants if info.loc[v, "scaling"] in POSITION_MAPS
            or (info.loc[v, "scaling"] == "none" and log_n[v] != "off")]


def moved_title(info, members):
    """The title of the panel of `members` (moved_reads): "changed positions" when a member
    changes positions, "log-n" when a member has log-n on; not "log-n" for a study without a
    log-n arm (issue 51)."""
    log_n = info["log_n"] if "log_n" in info else pd.Series("off", index=info.index)
    parts = []
    if any(info.loc[v, "scaling"] in POSITION_MAPS for v in members):
        parts.append("changed positions")
    if any(log_n[v] != "off" for v in members):
        parts.append("log-n")
    return ", ".join(parts)


def length_panels(summary, info):
    """The panels of extension_loss_vs_length: [(title, members, from scratch?)], and the parent
    variant."""
    curves = summary[summary["kind"] == "length"]
    several = curves.groupby("variant")["seq_len"].nunique()
    several = set(several[several >= 3].index)
    stage1 = [v for v in info.index if not info.loc[v, "parent"] and v in several]
    zero = [v for v in info.index if info.loc[v, "parent"] and info.loc[v, "steps"] == 0
            and v in several]
    tuned = [v for v in info.index if info.loc[v, "parent"] and info.loc[v, "steps"] > 0
             and v in several]
    parents = list(dict.fromkeys(info.loc[zero + tuned, "parent"]))
    parent = parents[0] if parents else ""
    # Zero-shot reads that change positions (or only add log-n) get a panel of their own when
    # there are any: beside the rescaled frequencies, a dozen curves would not read.
    moved = moved_reads(info, zero)
    rescaled = [v for v in zero if v not in moved]
    log_n = info["log_n"] if "log_n" in info else pd.Series("off", index=info.index)
    with_log_n = [v for v in moved if log_n[v] != "off"]
    groups = [("trained from scratch", stage1, True)]
    if moved and with_log_n and len(moved) > 6:
        # More than 6 reads (and the parent) would not read in one panel: log-n (alone and with
        # a position map) gets its own.
        groups += [(f"zero-shot from {parent}: rescaled frequencies", rescaled, False),
                   (f"zero-shot from {parent}: changed positions",
                    [v for v in moved if v not in with_log_n], False),
                   (f"zero-shot from {parent}: log-n, alone and with them", with_log_n, False)]
    elif moved:
        groups += [(f"zero-shot from {parent}: rescaled frequencies", rescaled, False),
                   (f"zero-shot from {parent}: {moved_title(info, moved)}", moved, False)]
    else:
        groups.append((f"zero-shot from {parent}", zero, False))
    if tuned:
        steps = sorted(set(info.loc[tuned, "steps"]))
        lengths = sorted(set(int(n) for n in info.loc[tuned, "seq_len"]))
        groups.append((f"fine-tuned from {parent} at {', '.join(str(n) for n in lengths)} "
                       f"({', '.join(str(s) for s in steps)} steps)", tuned, False))
    return [group for group in groups if group[1]], parent


def length_curves(summary, info, members, parent, from_scratch):
    """The curves of one extension_loss_vs_length panel: (label, length rows, style). A stage-2
    panel also shows the parent without scaling and the from-scratch upper bounds, in grey."""
    curves = []
    for v in members:
        if info.loc[v, "parent"]:
            curves.append((scaling_label(info, v), length_rows(summary, v),
                           scaling_style(info, v, members)))
        else:
            curves.append((v, length_rows(summary, v), variant_style(info, v)))
    if not from_scratch and parent:
        curves.append((f"{parent} (no scaling)", length_rows(summary, parent),
                       {"color": "#999999", "ls": ":"}))
        for bound in upper_bounds(info, parent):
            curves.append((f"{bound} (from scratch)", length_rows(summary, bound),
                           {"color": "#999999", "ls": "--", "marker": "s"}))
    return curves


def loss_vs_length(summary, info, out_dir, name="extension_loss_vs_length"):
    """Loss against the evaluation length in bytes, three panels on one y scale."""
    curves = summary[summary["kind"] == "length"]
    groups, parent = length_panels(summary, info)
    fig, axes = plots.panels([t for t, _, _ in groups], width=4.4, height=4.6)
    for ax, (title, members, from_scratch) in zip(axes, groups):
        for label, rows, style in length_curves(summary, info, members, parent, from_scratch):
            plots.mean_band(ax, rows, "seq_len", "loss", label, **style)
        lengths_axis(ax, curves["seq_len"].unique())
        for trained in sorted(set(info.loc[members, "seq_len"])):
            poslab_style.reference_line(ax, trained, f"trained {trained}", axis="x")
        # The gate's note goes under the title, where no curve runs (in the corner it sat on
        # the curves that start low).
        dropped = plots.dropped_text(summary[summary["variant"].isin(members)])
        ax.set_title(title + (f"\n({dropped})" if dropped else ""), fontsize=9)
        ax.set_ylabel("loss (nats per byte)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False, fontsize=7)
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:  # one scale, so that the panels compare
        ax.set_ylim(low, high)
    seeds_note(fig, axes, "loss against the evaluation length")
    fig.tight_layout()
    return plots.save(fig, out_dir, name)


def budget_points(summary, info, at_len):
    """Per (scaling, factor, steps): the gated loss at `at_len` of every seed; 0 steps: the
    zero-shot variant with the same scaling and factor (the parent itself for scaling none).
    Two factors of one scaling (YaRN at s = 4 and s = 8) are two curves, never one mean."""
    tuned = [v for v in info.index if info.loc[v, "parent"] and info.loc[v, "steps"] > 0
             and info.loc[v, "seq_len"] == at_len]
    points = []
    for v in tuned:
        scaling, factor, parent = info.loc[v, ["scaling", "factor", "parent"]]
        points.append((scaling, factor, int(info.loc[v, "steps"]), v))
        if scaling == "none":
            start = parent
        else:
            start = next((z for z in info.index if info.loc[z, "parent"] == parent
                          and info.loc[z, "steps"] == 0 and info.loc[z, "scaling"] == scaling
                          and info.loc[z, "factor"] == factor), None)
        if start is not None:
            points.append((scaling, factor, 0, start))
    frames = []
    for scaling, factor, steps, v in dict.fromkeys(points):
        rows = summary[(summary["variant"] == v) & summary["kind"].isin(["length", "main"])
                       & (summary["seq_len"] == at_len)].drop_duplicates("run")
        frames.append(rows.assign(scaling=scaling, scaling_factor=factor, steps=steps))
    return pd.concat(frames) if frames else pd.DataFrame()


def budget_setup(summary, info):
    """(fine-tuning length, parent, budget_points) of a study whose fine-tunes have run, or
    None."""
    tuned = info[(info["parent"] != "") & (info["steps"] > 0)]
    if tuned.empty:
        return None
    at_len = int(tuned["seq_len"].iloc[0])
    points = budget_points(summary, info, at_len)
    if points.empty or not (points["steps"] > 0).any():  # no fine-tune has run yet
        return None
    return at_len, tuned["parent"].iloc[0], points


def budget_curves(points):
    """The budget figure's curves: (label, rows, style), one per (scaling, factor s). The label
    names s when the figure has two factors of that scaling ("yarn, s = 8"); the second factor
    of a scaling is dashed, in the scaling's colour."""
    curves = []
    keys = list(dict.fromkeys(zip(points["scaling"], points["scaling_factor"])))
    for scaling, factor in keys:
        factors = [f for s, f in keys if s == scaling]
        label = "no scaling" if scaling == "none" else scaling
        if len(factors) > 1:
            label += f", s = {factor:g}"
        curves.append((label, points[(points["scaling"] == scaling)
                                     & (points["scaling_factor"] == factor)],
                       {"color": SCALING_COLOURS.get(scaling, "#7f7f7f"),
                        **({"ls": "--"} if factors.index(factor) > 0 else {})}))
    return curves


def budget_bounds(summary, info, parent, at_len):
    """The from-scratch upper bounds at the fine-tuning length: (variant, gated rows)."""
    bounds = []
    for bound in upper_bounds(info, parent):
        rows = summary[(summary["variant"] == bound) & (summary["kind"] == "length")
                       & (summary["seq_len"] == at_len)]
        kept = plots.gated(rows)
        if len(kept):
            bounds.append((bound, kept))
    return bounds


def budget_curve(summary, info, out_dir, name="extension_budget"):
    setup = budget_setup(summary, info)
    if setup is None:
        return []
    at_len, parent, points = setup
    fig, axes = plots.panels([None], width=5.4, height=3.6)
    ax = axes[0]
    for label, rows, style in budget_curves(points):
        plots.mean_band(ax, rows, "steps", "loss", label, **style)
    for bound, kept in budget_bounds(summary, info, parent, at_len):
        mean, low, high, n = poslab_stats.t_interval(kept["loss"])
        poslab_style.reference_line(ax, mean, f"{bound}: trained at {at_len} from scratch")
        if n > 1:
            ax.axhspan(low, high, color="#999999", alpha=0.15, lw=0)
    plots.dropped_note(ax, points)  # a zero-shot point the gate dropped (PI, say)
    steps = sorted(points["steps"].unique())
    ax.set_xscale("symlog", linthresh=max(1, min(s for s in steps if s > 0)))
    ax.set_xticks(steps)
    ax.set_xlim(-0.1 * steps[1] if len(steps) > 1 else -1, 1.1 * steps[-1])
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    ax.get_xaxis().set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel(f"fine-tuning steps at {at_len} (0: zero-shot, same scaling)")
    ax.set_ylabel(f"test loss at {at_len} bytes (nats/byte)")
    ax.set_title(f"from {parent}: how many steps each scaling needs", fontsize=9)
    poslab_style.legend_outside(fig, [ax])
    fig.tight_layout()
    return plots.save(fig, out_dir, name)


def scale_setup(info):
    """(zero-shot static variants, parent, training length) when they span two or more factors
    s, or None."""
    zero = info[(info["parent"] != "") & (info["steps"] == 0)
                & info["scaling"].isin(["linear", "ntk", "yarn"])]
    if zero["factor"].nunique() < 2:
        return None
    parent = zero["parent"].iloc[0]
    return zero, parent, int(info.loc[parent, "seq_len"])


def scale_panel_curves(summary, zero, parent, train_len, where):
    """The curves of one extension_scale panel (where: "target" reads each variant at s x L,
    "original" at L): (label, rows with a column s, style)."""
    curves = []
    for scaling in dict.fromkeys(zero["scaling"]):
        frames = []
        for v in zero[zero["scaling"] == scaling].index:
            factor = zero.loc[v, "factor"]
            length = int(round(factor * train_len)) if where == "target" else train_len
            rows = length_rows(summary, v)
            frames.append(rows[rows["seq_len"] == length].assign(s=factor))
        curves.append((scaling, pd.concat(frames),
                       {"color": SCALING_COLOURS.get(scaling, "#7f7f7f")}))
    if where == "target":  # the parent without scaling, read at the same lengths
        rows = length_rows(summary, parent)
        rows = rows.assign(s=rows["seq_len"] / train_len)
        rows = rows[rows["s"].isin(set(zero["factor"]))]
        curves.append((f"{parent} (no scaling)", rows,
                       {"color": SCALING_COLOURS["none"], "ls": ":"}))
    return curves


def scale_title(where, train_len):
    return (f"read at s x L (the window it was scaled to), L = {train_len}" if where == "target"
            else f"read at L = {train_len} (the trained window)")


def scale_curves(summary, info, out_dir, name="extension_scale"):
    """Zero-shot static scalings at several factors s: loss at s x L and at L against s."""
    setup = scale_setup(info)
    if setup is None:
        return []
    zero, parent, train_len = setup
    fig, axes = plots.panels(["target", "original"], width=4.2, height=3.4)
    for ax, where in zip(axes, ("target", "original")):
        for label, rows, style in scale_panel_curves(summary, zero, parent, train_len, where):
            plots.mean_band(ax, rows, "s", "loss", label, **style)
        plots.dropped_note(ax, summary[summary["variant"].isin(set(zero.index))])
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(zero["factor"].unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.get_xaxis().set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("scaling factor s")
        ax.set_ylabel("test loss (nats/byte)")
        ax.set_title(scale_title(where, train_len), fontsize=9)
    poslab_style.legend_outside(fig, axes)
    fig.tight_layout()
    return plots.save(fig, out_dir, name)


def position_setup(summary, positions, info):
    """What extension_loss_by_position shows, or None: a dict of the parent, the training length
    L, the longest length read, its position rows, the panels [(factor s, members)], the bin
    width (8 bins per L) and the gated runs."""
    if positions is None:
        return None
    zero = [v for v in info.index if info.loc[v, "parent"] and info.loc[v, "steps"] == 0]
    if not zero:
        return None
    parent = info.loc[zero[0], "parent"]
    train_len = int(info.loc[parent, "seq_len"])
    rows = positions[positions["kind"] == "length"]
    if not rows["variant"].isin(zero).any():  # every zero-shot read gated out (a smoke study)
        return None
    longest = int(rows[rows["variant"].isin(zero)]["seq_len"].max())
    rows = rows[rows["seq_len"] == longest]
    zero = [v for v in zero if (rows["variant"] == v).any()]
    moved = moved_reads(info, zero)
    static = [v for v in zero if not str(info.loc[v, "scaling"]).startswith("dynamic")
              and v not in moved]
    dynamic = [v for v in zero if v not in static and v not in moved]
    factors = sorted(set(info.loc[static, "factor"]))
    groups = [(f, [v for v in zero if v in static and info.loc[v, "factor"] == f
                   or (v in dynamic and f == factors[0])]) for f in factors]
    if moved:  # no factor: their own panel (factor None)
        groups.append((None, moved))
    return {"parent": parent, "train_len": train_len, "longest": longest, "rows": rows,
            "groups": groups, "width": max(1, train_len // 8), "factors": factors,
            "gated_runs": set(plots.gated(summary)["run"])}


def position_title(setup, factor, members, info):
    if factor is None:
        return moved_title(info, members)
    dynamic = any(str(info.loc[v, "scaling"]).startswith("dynamic") for v in members)
    return f"static scalings at s = {factor:g}" + (", and the dynamic ones" if dynamic else "")


def factor_line(factor, train_len, longest):
    """Where a panel marks s x L (None: no factor, or s x L is L or beyond the chunk)."""
    if factor is None or factor == 1 or factor * train_len >= longest:
        return None
    return factor * train_len


def loss_by_position(summary, positions, info, out_dir, name="extension_loss_by_position"):
    """Zero-shot loss at each position of the longest chunks, binned (8 bins per L); one panel
    per static factor read there (dynamic scalings with the first), the parent in each."""
    setup = position_setup(summary, positions, info)
    if setup is None:
        return []
    parent, train_len, longest = setup["parent"], setup["train_len"], setup["longest"]
    groups, width = setup["groups"], setup["width"]
    # Taller panels when a legend below one is long (the methods study's 9 reads).
    height = 3.6 if max(len(members) for _, members in groups) < 6 else 5.2
    fig, axes = plots.panels([str(f) for f, _ in groups], width=5.0, height=height, columns=2)
    for ax, (factor, members) in zip(axes, groups):
        for label, part, style in position_curves(setup, info, members):
            style = {key: value for key, value in style.items() if key != "marker"}
            plots.mean_band(ax, part, "position", "loss", label, marker=None, **style)
        poslab_style.reference_line(ax, train_len, f"L = {train_len}", axis="x")
        if factor_line(factor, train_len, longest) is not None:
            poslab_style.reference_line(ax, factor * train_len, f"{factor:g} L", axis="x")
        ax.set_xlabel(f"position inside a {longest}-byte chunk (bins of {width})")
        ax.set_ylabel("test loss (nats/byte)")
        ax.set_title(position_title(setup, factor, members, info), fontsize=9)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False, fontsize=7)
    seeds_note(fig, axes, f"zero-shot from {parent}, read at {longest} bytes: where each "
                          "scaling breaks")
    fig.tight_layout()
    return plots.save(fig, out_dir, name)


def position_curves(setup, info, members):
    """The curves of one extension_loss_by_position panel, the parent's first: (label, binned
    rows of the gated runs, style)."""
    parent, width, rows = setup["parent"], setup["width"], setup["rows"]
    curves = []
    for v in [parent] + members:
        part = rows[(rows["variant"] == v) & rows["run"].isin(setup["gated_runs"])]
        part = part.assign(position=(part["position"] // width) * width + (width - 1) / 2)
        part = part.groupby(["run", "position"], as_index=False)["loss"].mean()
        if v == parent:
            style = {"color": SCALING_COLOURS["none"], "ls": ":"}
        else:
            style = scaling_style(info, v, members)
        label = f"{parent} (no scaling)" if v == parent else scaling_label(info, v)
        curves.append((label, part, style))
    return curves


def extension_figures(study_dir, summary, positions, out_dir):
    """Every figure of a two-stage study; returns the written paths."""
    info = variant_table(study_dir)
    return (loss_vs_length(summary, info, out_dir) + budget_curve(summary, info, out_dir)
            + scale_curves(summary, info, out_dir)
            + loss_by_position(summary, positions, info, out_dir))
