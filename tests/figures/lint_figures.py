"""A figure lint: a figure fails if any two pieces of text overlap (titles, axis labels, tick
labels, legend entries, reference-line notes), or if a panel or a legend holds more curves than
it has distinct styles (two curves that look the same cannot be told apart). tests/figures/check_plot_sets.py (CTest
plot_figure_sets) redraws every committed figure from the committed results and lints each.

    /usr/bin/python3 tests/figures/lint_figures.py --self-test   (the lint can fail)

How: poslab_analysis/figures/plots.save is wrapped so that, before a figure is written (to a
temporary folder, never over the committed files), the canvas is drawn and matplotlib reports every text's
bounding box in pixels. Tick labels of ticks outside an axis' view limits are not drawn and are
left out. Two boxes overlap when they share more than 1 pixel both ways. Nothing can be clipped
at the image's edge: plots.save saves with bbox_inches="tight", which grows the image to hold
every text (legends outside the panels included).

Styles: a curve is a labelled line of a panel (labels starting with "_", matplotlib's reference
lines and bands, are not curves); its style is (colour, line style, marker). A panel whose curves
have fewer distinct styles than curves fails, naming the curves that share one; so does a legend
whose entries do (one legend for several panels can merge two curves that differ only by panel).
"""
import itertools
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "notebooks"))

SLACK = 1.0  # pixels of overlap tolerated (antialiasing)


def visible_texts(fig):
    """(description, bounding box) of every drawn, non-empty text of the figure."""
    renderer = fig.canvas.get_renderer()
    found = []

    def add(text, what):
        if text is None or not text.get_visible() or not text.get_text().strip():
            return
        found.append((f"{what} '{text.get_text()}'", text.get_window_extent(renderer)))

    add(fig._suptitle, "figure title")
    for n, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"panel {n + 1} ({ax.get_title() or 'untitled'})"
        add(ax.title, f"{where} title")
        add(ax.xaxis.label, f"{where} x label")
        add(ax.yaxis.label, f"{where} y label")
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not (low - 1e-9 * max(1, abs(low)) <= tick.get_loc() <= high + 1e-9 * max(1, abs(high))):
                    continue  # not drawn
                add(tick.label1, f"{where} {name} tick")  # add() skips hidden labels
        for text in ax.texts:
            add(text, f"{where} note")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            for text in legend.get_texts():
                add(text, f"{where} legend entry")
    for legend in fig.legends:
        for text in legend.get_texts():
            add(text, "figure legend entry")
    return found


def hex_colour(value):
    """A colour as '#rrggbb'; the first of several (a collection's handle); else its text."""
    try:
        return matplotlib.colors.to_hex(value)
    except (ValueError, TypeError):
        try:
            return matplotlib.colors.to_hex(value[0])
        except (ValueError, TypeError, IndexError, KeyError):
            return str(value)


def style_of(artist):
    """(colour, line style, marker) of a line or a legend handle, as text; a patch or a
    collection (a bar's or a scatter's handle): (face colour, hatch, its class)."""
    if not hasattr(artist, "get_marker") and hasattr(artist, "get_facecolor"):
        hatch = artist.get_hatch() if hasattr(artist, "get_hatch") else None
        return (hex_colour(artist.get_facecolor()), str(hatch), type(artist).__name__)
    colour = hex_colour(artist.get_color()) if hasattr(artist, "get_color") else "?"
    line = artist.get_linestyle() if hasattr(artist, "get_linestyle") else "?"
    marker = artist.get_marker() if hasattr(artist, "get_marker") else "?"
    if marker in (None, "", " ", "None", "none"):
        marker = "none"
    return (colour, str(line), str(marker))


def shared_styles(named):
    """[(style, [labels])] of the styles more than one of (label, style) has."""
    by_style = {}
    for label, style in named:
        by_style.setdefault(style, []).append(label)
    return [(style, labels) for style, labels in by_style.items() if len(labels) > 1]


def style_problems(fig, name):
    problems = []
    for n, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        curves = [(line.get_label(), style_of(line)) for line in ax.get_lines()
                  if line.get_visible() and not str(line.get_label()).startswith("_")]
        for style, labels in shared_styles(curves):
            problems.append(f"{name}: panel {n + 1} ({ax.get_title() or 'untitled'}): "
                            f"{len(curves)} curves, {len(set(s for _, s in curves))} distinct "
                            f"styles: {labels} share {style}")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + fig.legends
    for legend in legends:
        handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles", [])
        # (an entry whose colour cannot be read, an error bar's collection, is not compared)
        entries = [(text.get_text(), style_of(handle))
                   for text, handle in zip(legend.get_texts(), handles) if handle is not None]
        entries = [(text, style) for text, style in entries if style[0].startswith("#")]
        for style, labels in shared_styles(entries):
            problems.append(f"{name}: a legend of {len(entries)} entries shows {labels} alike "
                            f"{style}")
    return problems


def overlaps(a, b):
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK) and (min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK)


def lint(fig, name):
    fig.canvas.draw()
    problems = []
    texts = visible_texts(fig)
    for (what_a, box_a), (what_b, box_b) in itertools.combinations(texts, 2):
        if overlaps(box_a, box_b):
            problems.append(f"{name}: {what_a} overlaps {what_b}")
    return problems + style_problems(fig, name)


def self_test():
    """Two planted figures: overlapping titles must be found, a clean panel must pass."""
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("a long panel title that runs over")
    ax.text(0.5, 1.02, "a note on top of it", transform=ax.transAxes, ha="center")
    bad = lint(fig, "planted")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    ax.set_title("clean")
    ax.set_xlabel("x")
    good = lint(fig, "clean")
    plt.close(fig)
    # Styles: two curves alike in one panel (a colour cycle that wrapped), then the same two
    # told apart by a line style.
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], color="C0", label="a")
    ax.plot([0, 1], [1, 0], color="C0", label="b")
    ax.legend()
    alike = lint(fig, "alike")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], color="C0", label="a")
    ax.plot([0, 1], [1, 0], color="C0", ls="--", label="b")
    ax.axvline(0.5, color="C0")  # a reference line: not a curve
    ax.legend()
    apart = lint(fig, "apart")
    plt.close(fig)
    ok = len(bad) >= 1 and not good and len(alike) == 2 and not apart
    print(f"self-test: planted overlap found: {bad}; clean figure: {good or 'no problem'}; "
          f"two curves alike: {alike}; told apart: {apart or 'no problem'}")
    return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
