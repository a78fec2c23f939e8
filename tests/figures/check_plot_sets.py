"""Every committed figure redrawn once, and checked twice over: which figures are made, and
that no two texts in one overlap. Each committed results folder is copied (its CSVs and
study.toml, never its figures) into a temporary folder, and what `poslab plot` runs
(notebooks/poslab_plots.py's main) draws every copy, in this process:
- the names of the figures written must equal the names committed in that folder's figures/ (a
  figure that is missing, or one more, fails);
- every figure passes the figure lint (tests/figures/lint_figures.py: no two pieces of text
  overlap), checked before it is saved.
`poslab plot` itself (the C++ command that hands its folders to poslab_plots.py) runs on every
study's smoke in tests/studies/run_smoke.sh. The README's figure (docs/figures/, drawn by
notebooks/loss_and_retrieval.py with the arguments of the command the README shows) is drawn and
linted too.

    /usr/bin/python3 tests/figures/check_plot_sets.py      (CTest: plot_figure_sets)

A results folder whose standard figures are deliberately not committed is listed in
NOT_COMMITTED with the reason; for it only a clean `poslab plot` is checked.

It also checks that `poslab report` has an interactive twin of every figure: for every study
folder, the figures of notebooks/poslab_analysis/figures/charts_backend.standard_figures must have the names of the
figures `poslab plot` drew there (without .png), none missing and none more.
"""
import contextlib
import io
import os
import shutil
import sys
import tempfile

import lint_figures  # the lint (and matplotlib's Agg backend); puts notebooks/ on the path

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RESULTS = os.path.join(REPO, "results")
sys.path.insert(0, os.path.join(REPO, "notebooks"))
import poslab_plots  # noqa: E402
from poslab_analysis.figures import plots  # noqa: E402

# Folders whose standard figures were left out on purpose (see their commits).
NOT_COMMITTED = {
    # Settling run 3 (issue 27): two corpora in one panel (the corpus is in the variant's name,
    # not a column), with one unigram line for both; its result is the headline row of the LM
    # claims table.
    "settle_press_headline": "figures not committed: two corpora share one panel",
    # Settling run 6: its figures would draw the study's gate, which drops every PI read; the
    # run exists to judge claims 5 and 7 under the amended gate (a read counts when its parent
    # passed), which lives in claims.py. Its numbers are the settling-run-6 rows of the table.
    "settle_zero_shot_gate": "figures not committed: they draw the gate the run amends",
    # 0292872: the one memory panel mixes the language-model and long_range losses.
    "state_reuse_conditions": "figures not committed: one memory panel mixes LM and task losses",
    # 589029a: two runs of a pilot, reported as numbers in docs/06.
    "pilots/state_reuse_clamp": "figures not committed: a two-run pilot reported in docs/06",
    # Issue 36, PoSE: the extension figure colours its curves by scaling, so PoSE, RandPos and
    # the fine-tune at 256 (all linear, s = 4) share one colour; docs/11 gives the table.
    "pose": "figures not committed: PoSE, RandPos and the 256 fine-tune share PI's colour",
}


def result_folders():
    """Every folder under results/ that `poslab plot` draws: a study (summary.csv) or the
    benchmark tables (results/bench)."""
    found = []
    for root, dirs, files in os.walk(RESULTS):
        dirs[:] = sorted(d for d in dirs if d not in ("runs", "configs", "figures"))
        if "summary.csv" in files or os.path.exists(os.path.join(root, "reuse_speed.csv")):
            found.append(os.path.relpath(root, RESULTS))
    return found


def figure_names(folder):
    path = os.path.join(folder, "figures")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def report_problems(rel, copy, made):
    """The report's interactive figures of the study in `copy` against the PNGs `poslab plot`
    drew there."""
    if not os.path.exists(os.path.join(copy, "summary.csv")):  # results/bench: no report
        return []
    # needs pandas and the notebooks' modules, as poslab plot does
    from poslab_analysis.figures import charts_backend
    figures, not_interactive = charts_backend.standard_figures(copy)
    interactive = {f["name"] for f in figures}
    drawn = {name[:-len(".png")] for name in made if name.endswith(".png")}
    problems = []
    if drawn - interactive:
        problems.append(f"{rel}: no interactive twin in the report: {sorted(drawn - interactive)}")
    if interactive - drawn:
        problems.append(f"{rel}: in the report but not drawn by poslab plot: "
                        f"{sorted(interactive - drawn)}")
    if not_interactive:
        problems.append(f"{rel}: the report says not interactive: {not_interactive}")
    return problems


def readme_figure_problems():
    """The README's loss-and-retrieval figure, drawn (not saved) with the arguments of the
    command the README shows, through the lint."""
    import re
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    found = re.search(r"notebooks/loss_and_retrieval\.py (\S+) (\S+)((?: [\w.]+)*)`", readme)
    if not found:
        return ["README.md: no `notebooks/loss_and_retrieval.py STUDY PNG [VARIANT ...]` command"]
    import loss_and_retrieval  # notebooks/ is on the path
    with contextlib.redirect_stdout(io.StringIO()):
        fig, _ = loss_and_retrieval.draw(os.path.join(REPO, found.group(1)),
                                         found.group(3).split())
    problems = lint_figures.lint(fig, found.group(2))
    lint_figures.plt.close(fig)
    return problems


def draw_linted(copies, tmp):
    """poslab_plots.main on the copies (what `poslab plot` runs), with plots.save wrapped so that
    each figure is linted before it is written. Returns (exit status, output, lint problems,
    figures linted)."""
    problems, linted = [], []
    original_save = plots.save

    def linted_save(fig, _dir, name):
        linted.append(name)
        problems.extend(lint_figures.lint(fig, f"{os.path.relpath(_dir, tmp)}/{name}"))
        return original_save(fig, _dir, name)

    plots.save = linted_save
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            status = poslab_plots.main(["poslab_plots.py", *copies])
    finally:
        plots.save = original_save
    return status, output.getvalue(), problems, len(linted)


def main(argv):
    if len(argv) != 1:
        print(__doc__)
        return 2
    folders = result_folders()
    problems = []
    with tempfile.TemporaryDirectory(prefix="poslab-plot-sets.") as tmp:
        copies = []
        for rel in folders:  # same relative layout: a _randomized study finds its plain study
            source, copy = os.path.join(RESULTS, rel), os.path.join(tmp, rel)
            os.makedirs(copy, exist_ok=True)
            for name in os.listdir(source):
                if name.endswith((".csv", ".csv.gz")) or name == "study.toml":
                    shutil.copyfile(os.path.join(source, name), os.path.join(copy, name))
            copies.append(copy)
        status, output, problems, linted = draw_linted(copies, tmp)
        if status != 0:
            print(output)
            print(f"plot_figure_sets: poslab_plots.py failed with status {status}")
            return 1
        problems += readme_figure_problems()
        linted += 1
        lint_count = len(problems)
        if linted == 1:
            problems.append("no figure went through the lint: plots.save is not what draws them")
        for rel, copy in zip(folders, copies):
            made, committed = figure_names(copy), figure_names(os.path.join(RESULTS, rel))
            problems += report_problems(rel, copy, made)
            if rel in NOT_COMMITTED:
                if committed:
                    problems.append(f"{rel}: listed in NOT_COMMITTED but has committed figures")
                print(f"{rel}: {len(made)} files drawn, none committed ({NOT_COMMITTED[rel]})")
                continue
            if made != committed:
                if committed - made:
                    problems.append(f"{rel}: not drawn by poslab plot: {sorted(committed - made)}")
                if made - committed:
                    problems.append(f"{rel}: drawn but not committed: {sorted(made - committed)}")
            else:
                print(f"{rel}: {sorted(made)}")
    for p in problems:
        print(p)
    print(f"plot_figure_sets: {len(problems)} problem(s) in {len(folders)} result folders "
          f"({lint_count} of them from the figure lint: overlapping texts or curves alike, in "
          f"{linted} figures linted)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
