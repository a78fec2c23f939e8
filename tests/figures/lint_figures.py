"""A figure lint: redraws every committed figure from the committed results, and fails if any
two pieces of text overlap (titles, axis labels, tick labels, legend entries, reference-line
notes).

    /usr/bin/python3 tests/figures/lint_figures.py               (CTest: figure_lint)
    /usr/bin/python3 tests/figures/lint_figures.py --self-test   (the lint can fail)

How: poslab_analysis/figures/plots.save is wrapped so that, before a figure is written (to a temporary folder,
never over the committed files), the canvas is drawn and matplotlib reports every text's
bounding box in pixels. Tick labels of ticks outside an axis' view limits are not drawn and are
left out. Two boxes overlap when they share more than 1 pixel both ways. Nothing can be clipped
at the image's edge: plots.save saves with bbox_inches="tight", which grows the image to hold
every text (legends outside the panels included).
"""
import itertools
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "notebooks"))
import poslab_plots  # noqa: E402
from poslab_analysis.figures import plots  # noqa: E402

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


def overlaps(a, b):
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK) and (min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK)


def lint(fig, name):
    fig.canvas.draw()
    problems = []
    texts = visible_texts(fig)
    for (what_a, box_a), (what_b, box_b) in itertools.combinations(texts, 2):
        if overlaps(box_a, box_b):
            problems.append(f"{name}: {what_a} overlaps {what_b}")
    return problems


def redraw_all(out_dir):
    """Every committed figure's study (a results folder with summary.csv, and results/bench),
    redrawn into out_dir with the lint run on each figure. Returns the problems."""
    problems = []
    original_save = plots.save

    def linted_save(fig, _dir, name):
        problems.extend(lint(fig, f"{os.path.relpath(_dir, out_dir)}/{name}"))
        return original_save(fig, _dir, name)

    plots.save = linted_save
    try:
        results = os.path.join(REPO, "results")
        studies = []
        for root, dirs, files in os.walk(results):
            dirs[:] = sorted(d for d in dirs if d not in ("runs", "configs", "figures"))
            if "summary.csv" in files:
                studies.append(root)
        for study in studies:
            target = os.path.join(out_dir, os.path.relpath(study, results), "figures")
            # standard_figures writes summary_ci.csv next to the summary: work on a copy.
            copy = os.path.join(out_dir, "copies", os.path.relpath(study, results))
            os.makedirs(copy, exist_ok=True)
            for f in os.listdir(study):
                if f.endswith(".csv") or f.endswith(".csv.gz") or f == "study.toml":
                    with open(os.path.join(study, f), "rb") as src, \
                            open(os.path.join(copy, f), "wb") as dst:
                        dst.write(src.read())
            poslab_plots.standard_figures(copy, target)
        bench = os.path.join(results, "bench")
        poslab_plots.reuse_speed(bench, os.path.join(out_dir, "bench", "figures"))
        poslab_plots.scaling(bench, os.path.join(out_dir, "bench", "figures"))
        poslab_plots.eval_memory(bench, os.path.join(out_dir, "bench", "figures"))
    finally:
        plots.save = original_save
    return problems, len(studies) + 1


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
    ok = len(bad) >= 1 and not good
    print(f"self-test: planted overlap found: {bad}; clean figure: {good or 'no problem'}")
    return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    with tempfile.TemporaryDirectory() as out_dir:
        problems, studies = redraw_all(out_dir)
    for p in problems:
        print(p)
    print(f"figure_lint: {len(problems)} overlap(s) in the figures of {studies} result folders")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
