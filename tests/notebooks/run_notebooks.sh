#!/usr/bin/env bash
# Executes the notebooks headless, as a user would on a fresh clone, so that they cannot rot
# unnoticed and cannot come to depend on files that are not committed.
#
#   bash tests/notebooks/run_notebooks.sh build/poslab        (CTest: `ctest -R notebooks`)
#
# 1. Copies the repository's tracked files (`git ls-files`, with their working-tree contents, so
#    uncommitted edits are tested too) into a temporary directory TMP/clone: no build/, no runs/,
#    no study run directories, nothing ignored or untracked. Outside a git checkout it copies
#    notebooks/, experiments/ and results/ without their ignored parts instead.
# 2. Links TMP/clone/build/poslab to the poslab under test: the notebooks' default binary.
# 3. Executes notebooks/tour.ipynb (committed results only) and notebooks/inside_encodings.ipynb
#    (trains its two small runs into TMP/clone/runs/notebooks/, its default place) in
#    TMP/clone/notebooks with nbconvert (Debian's /usr/bin/python3) and no POSLAB_* variables;
#    the executed copies go to TMP. nbconvert fails, and so does this script, as soon as a cell
#    raises.
# 4. Fails if a notebook drew fewer figures than it should, or wrote any file outside the ignored
#    runs/ and __pycache__/ (a notebook must leave a clone as it found it).
# TMP is removed at the end unless KEEP_NOTEBOOK_OUTPUT=1 (then its path is printed).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 PATH/TO/poslab" >&2
  exit 2
fi
poslab="$(realpath "$1")"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python=/usr/bin/python3

if [[ ! -x "$poslab" ]]; then
  echo "run_notebooks: no poslab executable at $1" >&2
  exit 1
fi
if ! "$python" -c 'import nbconvert, nbclient, ipykernel, numpy, pandas, matplotlib' 2>/dev/null; then
  echo "run_notebooks: $python lacks nbconvert/nbclient/ipykernel/numpy/pandas/matplotlib;" \
       "run scripts/setup.sh" >&2
  exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/poslab-notebooks.XXXXXX")"
cleanup() {
  if [[ "${KEEP_NOTEBOOK_OUTPUT:-0}" == 1 ]]; then
    echo "run_notebooks: output kept in $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
export MPLBACKEND=Agg
export PYDEVD_DISABLE_FILE_VALIDATION=1  # ipykernel's debugger: no "frozen modules" warning
# What a user's shell would not set: the notebooks must work with their defaults.
unset POSLAB_RESULTS POSLAB_BIN POSLAB_NOTEBOOK_RUNS

start=$SECONDS
clone="$tmp/clone"
mkdir -p "$clone"
if git -C "$repo" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  # Tracked files as they are in the work tree; a tracked file deleted there is left out.
  (cd "$repo" && git ls-files -z --cached | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
    tar -C "$clone" -xf -
else
  (cd "$repo" && tar --exclude='runs' --exclude='configs' --exclude='checkpoint*' \
     --exclude='*-smoke' --exclude='__pycache__' --exclude='.ipynb_checkpoints' \
     -cf - notebooks experiments results) | tar -C "$clone" -xf -
fi
mkdir -p "$clone/build"
ln -s "$poslab" "$clone/build/poslab"
touch "$tmp/copied"
sleep 1  # file times: anything a notebook writes is strictly newer than the copy
echo "run_notebooks: fresh copy of the repository in $clone"

for notebook in tour inside_encodings; do
  echo "run_notebooks: executing notebooks/$notebook.ipynb"
  notebook_start=$SECONDS
  (
    cd "$clone/notebooks"
    "$python" -m nbconvert --to notebook --execute \
      --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
      --output-dir "$tmp" --output "$notebook.executed.ipynb" "$notebook.ipynb"
  ) > "$tmp/$notebook.log" 2>&1 || { cat "$tmp/$notebook.log" >&2; exit 1; }
  echo "run_notebooks: notebooks/$notebook.ipynb executed in $((SECONDS - notebook_start)) s"
done

# No cell may have raised (nbconvert stops on an error; this also catches allowed errors), and
# every figure must be there (a section that skipped its work would draw nothing).
"$python" - "$tmp/tour.executed.ipynb:9" "$tmp/inside_encodings.executed.ipynb:8" <<'PY'
import json, sys
for arg in sys.argv[1:]:
    path, expected = arg.rsplit(":", 1)
    cells = json.load(open(path))["cells"]
    errors = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    images = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    name = path.rsplit("/", 1)[-1]
    if errors:
        sys.exit(f"{name}: {len(errors)} cells raised: {errors[0]['ename']}: {errors[0]['evalue']}")
    if images < int(expected):
        sys.exit(f"{name}: {images} images, expected at least {expected}")
    print(f"run_notebooks: {name}: {len(cells)} cells, {images} images, no errors")
PY

# The notebooks may write only into ignored places of the clone.
written="$(cd "$clone" && find . -newer "$tmp/copied" -type f \
  -not -path './runs/*' -not -path '*/__pycache__/*' -not -path '*/.ipynb_checkpoints/*')"
if [[ -n "$written" ]]; then
  echo "run_notebooks: the notebooks wrote into the repository (only runs/ is allowed):" >&2
  echo "$written" >&2
  exit 1
fi
echo "run_notebooks: passed in $((SECONDS - start)) s"
