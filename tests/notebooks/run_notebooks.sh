#!/usr/bin/env bash
# Executes the notebooks headless on fresh smoke results, so that they cannot rot unnoticed.
#
#   bash tests/notebooks/run_notebooks.sh build/poslab        (CTest: `ctest -R notebooks`)
#
# 1. Runs the four studies in their tiny --smoke version into a temporary directory TMP
#    (TMP/<study>/summary.csv, and TMP/<study>/runs/<run>/checkpoint/ for the inside notebook).
# 2. Draws the figures of one study with `poslab plot`.
# 3. Executes notebooks/tour.ipynb and notebooks/inside_encodings.ipynb with nbconvert (Debian's
#    /usr/bin/python3), POSLAB_RESULTS=TMP and POSLAB_BIN=<poslab>; the executed copies go to TMP.
#    nbconvert fails, and so does this script, as soon as a cell raises.
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

start=$SECONDS
for study in length_generalization state_reuse shaw_clip xl_terms; do
  echo "run_notebooks: smoke study $study"
  "$poslab" run "$repo/experiments/$study.toml" --smoke --out "$tmp/$study" \
    > "$tmp/$study.log" 2>&1 || { cat "$tmp/$study.log" >&2; exit 1; }
done
echo "run_notebooks: studies done in $((SECONDS - start)) s"

"$poslab" plot "$tmp/state_reuse" > "$tmp/plot.log"
if [[ ! -s "$tmp/state_reuse/figures/loss_vs_memory.png" ]]; then
  echo "run_notebooks: poslab plot wrote no state_reuse/figures/loss_vs_memory.png" >&2
  exit 1
fi

for notebook in tour inside_encodings; do
  echo "run_notebooks: executing notebooks/$notebook.ipynb"
  (
    cd "$repo/notebooks"
    POSLAB_RESULTS="$tmp" POSLAB_BIN="$poslab" "$python" -m nbconvert --to notebook --execute \
      --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=300 \
      --output-dir "$tmp" --output "$notebook.executed.ipynb" "$notebook.ipynb"
  )
done

# No cell may have raised (nbconvert stops on an error; this also catches allowed errors).
"$python" - "$tmp/tour.executed.ipynb" "$tmp/inside_encodings.executed.ipynb" <<'PY'
import json, sys
for path in sys.argv[1:]:
    cells = json.load(open(path))["cells"]
    errors = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    images = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    if errors:
        sys.exit(f"{path}: {len(errors)} cells raised: {errors[0]['ename']}: {errors[0]['evalue']}")
    print(f"run_notebooks: {path.rsplit('/', 1)[-1]}: {len(cells)} cells, {images} images, no errors")
PY
echo "run_notebooks: passed in $((SECONDS - start)) s"
