"""Figures of `poslab bench` (results/bench/: reuse_speed.csv, eval_memory.csv, scaling.csv) and
the RoPE wavelength panels of docs/11 (notebooks/rope_wavelengths.py): not a study's figures,
drawn in the same style by the same matplotlib helpers (plots.py)."""
import os

import matplotlib.ticker
import pandas as pd

from poslab_analysis.figures import plots
from poslab_analysis.figures import style as poslab_style
from poslab_analysis.reading.names import ordered


def reuse_speed(bench_dir, out_dir=None):
    """`poslab bench --reuse`: evaluation tokens/s against attention length for the vanilla
    sliding window, its per-segment variant and state reuse (log scales), with the speedup of
    reuse over the vanilla model written at each point (Dai et al. 2019, Table 9)."""
    table = pd.read_csv(os.path.join(bench_dir, "reuse_speed.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = plots.panels([None], width=5.0, height=3.8)
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
    return plots.save(fig, out_dir, "reuse_speed")


def eval_memory(bench_dir, out_dir=None):
    """`poslab bench --eval-memory` (bench/eval_memory.sh): peak resident memory of evaluating
    one row against the context length, for the training forward (every layer's weights kept),
    the evaluation-only forward at the default score budget (256 MiB) and at a 32 MiB budget
    (scores made one row and as many heads as fit at a time), with the heads per chunk written
    where the chunk holds fewer than all heads."""
    table = pd.read_csv(os.path.join(bench_dir, "eval_memory.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = plots.panels([None], width=5.0, height=3.8)
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
    return plots.save(fig, out_dir, "eval_memory")


def scaling(bench_dir, out_dir=None):
    """`poslab bench --scaling`: training tokens/s of every encoding against the segment length
    (batch x segment fixed, memory = segment), and its GFLOP/s (FLOPs counted in its sgemm
    calls, its own products included) relative to 'none' at the same segment, with the 0.9
    target of issue 15 as a reference line. Naive reference paths are dashed."""
    table = pd.read_csv(os.path.join(bench_dir, "scaling.csv"))
    out_dir = out_dir or os.path.join(bench_dir, "figures")
    fig, axes = plots.panels([0, 1], width=4.4, height=3.6, columns=2)
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
    return plots.save(fig, out_dir, "scaling")


def rope_wavelengths(panels_tables, original_len, factor, out_dir, name="rope_wavelengths"):
    """Each rotation pair's wavelength against the trained length, one curve per RoPE scaling
    (docs/11-extending-context.md). panels_tables: [(panel title, [(label, frame)])], each frame
    what `poslab encodings --describe rope --csv` prints (columns pair, wavelength, ...), all for
    one head size; original_len L and factor s as in those commands. Draws
    lambda'_i = 2 pi / theta'_i (log scale) against the pair index i, with the trained length L
    and the extended length s L as reference lines. A pair whose wavelength lies below L turned
    at least once over the trained length: every phase of it was seen in training."""
    fig, axes = plots.panels([t for t, _ in panels_tables], width=4.2, height=3.6, columns=2)
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
    return plots.save(fig, out_dir, name)
