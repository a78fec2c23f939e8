"""Passkey heatmaps (matplotlib): one panel per condition, evaluation length x depth, the cell
colour the mean over gated seeds of a passkey metric (PASSKEY_METRICS)."""
from poslab_analysis.figures import plots
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.reading.names import ordered
from poslab_analysis.statistics import seeds as poslab_stats


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
    fig, axes = plots.panels(keys, width=max(3.4, 0.62 * len(factors) + 2.0),
                       height=0.42 * len(depths) + 1.6)
    image = None
    for ax, key in zip(axes, keys):
        part = passkey_panel_rows(layout, key)
        kept = plots.gated(part)  # a cell whose runs all fail the gate stays empty
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
    return plots.save(fig, out_dir, name)


def passkey_figures(summary, out_dir):
    """The passkey heatmaps, when the summary has passkey rows (eval.passkey_length_factors)."""
    if "passkey" not in set(summary["kind"]):
        return []
    return (passkey_heatmaps(summary, out_dir, "exact_match", "passkey_exact_match")
            + passkey_heatmaps(summary, out_dir, "passkey_greedy_exact_match",
                               "passkey_greedy_exact_match")
            + passkey_heatmaps(summary, out_dir, "accuracy", "passkey_digit_accuracy"))
