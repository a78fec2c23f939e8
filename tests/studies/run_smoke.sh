#!/usr/bin/env bash
# Every study file under experiments/ (shipped studies and pilots) runs in its --smoke version,
# and `poslab plot` draws its figures and writes its summary_ci.csv: a study that no longer
# parses, runs or plots fails here, long before anyone spends hours on its real version.
#
#   bash tests/studies/run_smoke.sh build/poslab
set -euo pipefail
poslab="${1:?usage: run_smoke.sh POSLAB_BINARY}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/poslab-study-smoke.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}" MPLBACKEND=Agg

# Every smoke runs from a scratch working directory and writes where its real version would
# (experiments/pilots/X.toml -> results/pilots/X), so that a study that starts from another
# study's run (train.init_from = "results/pilots/...", a relative path) finds that study's smoke
# version: the smokes run in name order, the files that start from another study's runs
# (a line `init_from = "results/...`) after all others, so a parent's file runs first whatever
# the names (retrieval_base_curve before finetune_budget), and the child's [smoke] uses the
# parent's [smoke] model.
work="$tmp/work"
mkdir -p "$work"
cd "$work"
studies=0
while IFS= read -r file; do
  grep -q '^\[study\]' "$file" || continue  # plain run configs (quickstart, python_corpus)
  # Without [smoke], --smoke runs the whole study: minutes to hours inside CI.
  grep -q '^\[smoke\]' "$file" ||
    { echo "study smoke: $file has no [smoke] section (its smoke would be the full study)" >&2; exit 1; }
  name="$(basename "$file" .toml)"
  relative="${file#"$repo/experiments/"}"
  out="$work/results/${relative%.toml}"
  echo "study smoke: $file"
  "$poslab" run "$file" --smoke --jobs 2 --out "$out" > "$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log" >&2; echo "study smoke: $file failed" >&2; exit 1; }
  [[ -s "$out/summary.csv" ]] || { echo "study smoke: $file wrote no summary.csv" >&2; exit 1; }
  "$poslab" plot "$out" > "$tmp/$name.plot.log" 2>&1 ||
    { cat "$tmp/$name.plot.log" >&2; echo "study smoke: poslab plot $out failed" >&2; exit 1; }
  [[ -s "$out/summary_ci.csv" ]] || { echo "study smoke: no summary_ci.csv for $file" >&2; exit 1; }
  studies=$((studies + 1))
done < <(find "$repo/experiments" -name '*.toml' | sort |
         while IFS= read -r f; do grep -q '^init_from = "results/' "$f" && echo "1 $f" || echo "0 $f"; done |
         sort -s -k1,1 | cut -d' ' -f2-)
[[ $studies -gt 0 ]] || { echo "study smoke: no study found" >&2; exit 1; }
echo "study smoke: $studies studies ran and plotted"
