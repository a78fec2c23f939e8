"""The attention-sink diagnostic of one or more trained runs (`poslab sinks`, written by
src/eval/sink_diagnostic.hpp): for each run one column, on top the mean attention weight on the
first key of every layer (row) and head (column), over the queries in the second half of the
window; below, the same weight at every query index, one line per head coloured by layer, with
uniform attention (1 / keys seen) dashed. A sink head (Xiao et al. 2023) sits far above the
dashed line at every query; a head that spreads its attention sits on it.

    /usr/bin/python3 notebooks/sink_diagnostic.py OUT.png DIR[=LABEL] [DIR[=LABEL] ...]

Each DIR is an output directory of `poslab sinks` (sink_heads.csv, sink_profile.csv,
sinks.json). Writes OUT.png and OUT.svg; prints what it drew.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def read_run(arg):
    directory, _, label = arg.partition("=")
    heads = pd.read_csv(os.path.join(directory, "sink_heads.csv"))
    profile = pd.read_csv(os.path.join(directory, "sink_profile.csv"))
    with open(os.path.join(directory, "sinks.json")) as f:
        info = json.load(f)
    return label or os.path.basename(os.path.normpath(directory)), heads, profile, info


def draw_heatmap(ax, heads, info, label):
    grid = heads.pivot(index="layer", columns="head", values="first_key_mass")
    image = ax.imshow(grid.values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for (row, col), value in pd.DataFrame(grid.values).stack().items():
        ax.text(col, row, f"{value:.3f}", ha="center", va="center", fontsize=8,
                color="white" if value < 0.6 else "black")
    ax.set_xticks(range(grid.shape[1]))
    ax.set_yticks(range(grid.shape[0]))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"{label}\nuniform: {info['uniform_mass']:.3f}, queries "
                 f"{info['first_query']}..{info['window'] - 1}", fontsize=9)
    return image


def draw_profile(ax, profile, info):
    layers = info["n_layers"]
    colours = plt.get_cmap("plasma")
    for (layer, head), rows in profile.groupby(["layer", "head"]):
        ax.plot(rows["query"], rows["first_key_mass"], lw=1,
                color=colours(layer / max(1, layers)),
                label=f"layer {layer}" if head == 0 else None)
    uniform = profile[(profile["layer"] == 0) & (profile["head"] == 0)]
    ax.plot(uniform["query"], uniform["uniform_mass"], "k--", lw=1, label="uniform (1 / keys seen)")
    ax.axvline(info["first_query"], color="grey", lw=0.5)
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 1.5)
    ax.set_xlabel("query index i in the window")
    ax.set_ylabel("mean weight on key 0")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)


def main(png_path, args):
    runs = [read_run(a) for a in args]
    fig, axes = plt.subplots(2, len(runs), figsize=(3.6 * len(runs), 6.4), squeeze=False,
                             gridspec_kw={"height_ratios": [1, 1.3], "wspace": 0.3})
    image = None
    for col, (label, heads, profile, info) in enumerate(runs):
        image = draw_heatmap(axes[0, col], heads, info, label)
        draw_profile(axes[1, col], profile, info)
        if col > 0:  # one y label per row, at the left
            axes[0, col].set_ylabel("")
            axes[1, col].set_ylabel("")
        print(f"{label}: {info['n_layers']} layers x {info['n_heads']} heads, "
              f"{info['windows']} windows of {info['window']}; max mass on key 0 "
              f"{heads['first_key_mass'].max():.3f} (uniform {info['uniform_mass']:.3f})")
    fig.colorbar(image, ax=axes[0, :].tolist(), shrink=0.8, label="weight on key 0")
    fig.suptitle("Attention mass on the first key (poslab sinks)", fontsize=10)
    fig.savefig(png_path, dpi=120, bbox_inches="tight")
    fig.savefig(os.path.splitext(png_path)[0] + ".svg", bbox_inches="tight")
    print("wrote", png_path)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
