"""The figure of docs/11-extending-context.md: each RoPE pair's wavelength against the trained
length, for no scaling, linear (PI), NTK-aware, YaRN and dynamic NTK at a few lengths.

    /usr/bin/python3 notebooks/rope_wavelengths.py docs/figures build/poslab
    /usr/bin/python3 notebooks/rope_wavelengths.py --check build/poslab     (CTest: docs_wavelength_figure)

Every curve is one `poslab encodings --describe rope --csv` command (printed as it runs), at the
chapter's running example: d_model 64 with 4 heads (d_h = 16), trained length L = 64, factor
s = 4. The numbers the figure draws are also written as rope_wavelengths.csv beside the PNG/SVG.
--check redraws the figure into a temporary folder, lints it (no two texts overlap:
tests/figures/lint_figures.py) and requires the committed docs/figures/rope_wavelengths.csv to be
what the commands print today, so the figure cannot drift from the code.
"""
import io
import os
import shlex
import subprocess
import sys
import tempfile

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from poslab_analysis.figures import plots, plots_bench  # noqa: E402

D_MODEL, HEADS, L, S = 64, 4, 64, 4
MODEL = f"--set model.d_model={D_MODEL} --set model.n_heads={HEADS}"
SCALED = f"--set encoding.factor={S} --set encoding.original_len={L}"
DYNAMIC = f"{MODEL} --set encoding.scaling=dynamic_ntk {SCALED} --length"
# (panel title, [(label, arguments after `poslab encodings --describe rope --csv`)])
PANELS = [
    ("static methods at s = 4", [
        ("none (as trained)", f"{MODEL} --set encoding.original_len={L}"),
        (f"linear / PI", f"{MODEL} --set encoding.scaling=linear {SCALED}"),
        (f"NTK-aware", f"{MODEL} --set encoding.scaling=ntk {SCALED}"),
        (f"YaRN", f"{MODEL} --set encoding.scaling=yarn {SCALED}"),
    ]),
    ("dynamic NTK (s = 4) by the keys K a call covers", [
        (f"K = {L} (= L: as trained)", f"{DYNAMIC} {L}"),
        (f"K = {2 * L}", f"{DYNAMIC} {2 * L}"),
        (f"K = {4 * L}", f"{DYNAMIC} {4 * L}"),
        (f"K = {8 * L}", f"{DYNAMIC} {8 * L}"),
    ]),
]


def describe(poslab, arguments):
    """The frame `poslab encodings --describe rope --csv ARGUMENTS` prints."""
    command = [poslab, "encodings", "--describe", "rope", "--csv"] + shlex.split(arguments)
    print("$ build/poslab " + " ".join(shlex.quote(c) for c in command[1:]), file=sys.stderr)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"rope_wavelengths.py: error: {' '.join(command)} failed: {done.stderr.strip()}")
    return pd.read_csv(io.StringIO(done.stdout))


def draw(poslab, out_dir):
    panels = [(title, [(label, describe(poslab, arguments)) for label, arguments in curves])
              for title, curves in PANELS]
    data = pd.concat([frame.assign(panel=title, curve=label)
                      for title, tables in panels for label, frame in tables])
    os.makedirs(out_dir, exist_ok=True)
    data_path = os.path.join(out_dir, "rope_wavelengths.csv")
    data[["panel", "curve", "pair", "theta", "theta_scaled", "wavelength", "rotations_L",
          "interpolation"]].to_csv(data_path, index=False, float_format="%.10g")
    return plots_bench.rope_wavelengths(panels, L, S, out_dir) + [data_path]


def check(poslab):
    sys.path.insert(0, os.path.join(REPO, "tests", "figures"))
    import lint_figures
    problems = []
    original_save = plots.save

    def linted_save(fig, out_dir, name):
        problems.extend(lint_figures.lint(fig, name))
        return original_save(fig, out_dir, name)

    plots.save = linted_save
    with tempfile.TemporaryDirectory() as out_dir:
        draw(poslab, out_dir)
        with open(os.path.join(out_dir, "rope_wavelengths.csv")) as f:
            today = f.read()
    committed_path = os.path.join(REPO, "docs", "figures", "rope_wavelengths.csv")
    with open(committed_path) as f:
        if f.read() != today:
            problems.append(f"{os.path.relpath(committed_path, REPO)} is not what the describe "
                            f"commands print today: redraw with /usr/bin/python3 "
                            f"notebooks/rope_wavelengths.py docs/figures build/poslab")
    for p in problems:
        print(p)
    print(f"rope_wavelengths: {len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        return check(os.path.abspath(argv[2]))
    if len(argv) != 3 or argv[1].startswith("-"):
        print(__doc__)
        return 0 if argv[1:2] in (["-h"], ["--help"]) else 2
    for path in draw(os.path.abspath(argv[2]), argv[1]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
