"""One figure style for every poslab figure: the same colour for an encoding in every figure,
colours grouped by family so that neighbours in a legend look different when they behave
differently, one legend order, and the reference lines that explain a curve.

Families and their hues (docs/05-beyond.md explains the families):
    no encoding             black
    absolute                reds and oranges   (sinusoidal, learned)
    relative, learned table blues              (shaw, transformer_xl, deberta)
    relative, bias          greens and teals   (t5_bias, alibi, kerple, fire)
    relative, rotation      purples            (rope, xpos)
A variant of an encoding (randomized positions, another option) keeps the encoding's colour and
changes the line style.
"""
import matplotlib.pyplot as plt

# The order and labels of the encodings are the tables' too (reading/names.py); a figure module
# reads them here beside the colours.
from poslab_analysis.reading.names import (  # noqa: F401
    ENCODING_LABELS, ENCODING_ORDER, label, ordered)

ENCODING_COLOURS = {
    "none": "#000000",
    "sinusoidal": "#d62728",         # red
    "learned": "#ff7f0e",            # orange
    "shaw": "#1f77b4",               # blue
    "transformer_xl": "#17becf",     # cyan
    "deberta": "#393b79",            # dark blue
    "t5_bias": "#2ca02c",            # green
    "alibi": "#8c6d31",              # olive brown
    "kerple": "#98df8a",             # light green
    "fire": "#637939",               # dark olive
    "rope": "#9467bd",               # purple
    "xpos": "#e377c2",               # pink-purple
    "example_distance_bias": "#7f7f7f",
}

# Line styles for the variants of one encoding, in order of appearance.
VARIANT_STYLES = ["-", "--", ":", "-."]

REFERENCE_STYLE = dict(color="0.45", lw=0.9, ls=":", zorder=0)


def apply():
    """Global matplotlib settings of every poslab figure."""
    plt.rcParams.update({
        "svg.hashsalt": "poslab",          # the same figure gives the same SVG file
        "figure.dpi": 110,
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.25,
    })


def colour(name):
    """The colour of an encoding (or of a series that starts with an encoding's name)."""
    if name in ENCODING_COLOURS:
        return ENCODING_COLOURS[name]
    for encoding in sorted(ENCODING_COLOURS, key=len, reverse=True):
        if str(name).startswith(encoding):
            return ENCODING_COLOURS[encoding]
    return None


def reference_line(ax, value, text, axis="y"):
    """A dotted grey line at `value` with a short text: chance level, the trained length, ..."""
    if axis == "y":
        ax.axhline(value, **REFERENCE_STYLE)
        ax.annotate(text, xy=(1.0, value), xycoords=("axes fraction", "data"),
                    xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
                    fontsize=7, color="0.35")
    else:
        ax.axvline(value, **REFERENCE_STYLE)
        ax.annotate(text, xy=(value, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", ha="left", va="top",
                    fontsize=7, color="0.35", rotation=90)


def seeds_title(axes):
    """How many seeds stand behind each point of the curves drawn with a band (their lines carry
    `poslab_n`, the smallest and largest n of their points; plots.mean_band sets it), as a
    legend title: "mean of n = 3 seeds / band: 95% t interval"; None if no such curve."""
    counts = [n for ax in axes for line in ax.lines for n in getattr(line, "poslab_n", ())]
    if not counts:
        return None
    low, high = min(counts), max(counts)
    if high <= 1:
        return "n = 1 seed\n(no band)"
    n = f"n = {low}" if low == high else f"n = {low} to {high}"
    fewer = "" if low == high else "\n(fewer where the gate\ndropped runs)"
    return f"mean of {n} seeds,\nband: 95% t interval{fewer}"


def legend_outside(fig, axes, ncol=1):
    """One legend for the whole figure, to the right of the last panel, without duplicates; its
    title says how many seeds each point averages (seeds_title)."""
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    if handles:
        axes[-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                        ncol=ncol, frameon=False, title=seeds_title(axes),
                        title_fontsize="small", alignment="left")


apply()
