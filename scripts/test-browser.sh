#!/usr/bin/env bash
# The report and the attention explorer in a real browser: Debian's chromium, headless, driven by
# selenium (python3-selenium) through chromium-driver; scripts/setup.sh installs all three.
# Builds from build/poslab (scripts/setup.sh builds it):
#   1. a smoke study (xl_terms --smoke, seconds) and its report, and the same study with only
#      three of its runs done;
#   2. two tiny language models (sinusoidal, ALiBi; 2 steps) and their explorer, and a RoPE one
#      beside its YaRN twin (its config.toml edited to s = 4) and theirs;
#   3. a study and a run named <script>alert(1)</script> and "><img src=x onerror=alert(2)>,
#      and their report and explorer;
#   4. the reports of three committed studies whose figures are of other kinds: the two-stage
#      context-extension study, the randomized-positions arm and the passkey pilot (heatmaps);
# then opens each page from file:// (tests/browser/check_pages.py says what it checks).
# Screenshots go to build/browser-test/screenshots/. Non-zero if a check fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

poslab=build/poslab
work=build/browser-test
rm -rf "$work"
mkdir -p "$work"
start=$(date +%s)

# 1. The smoke study and its report.
"$poslab" run experiments/xl_terms.toml --smoke --jobs 2 --out "$work/xl_terms-smoke" >"$work/study.log" 2>&1
"$poslab" report "$work/xl_terms-smoke" --out "$work/report"
# ... and a study of which only some runs have run: the others are pending.
"$poslab" run experiments/xl_terms.toml --smoke --only 'all_terms*' --out "$work/partial-smoke" \
  >"$work/partial.log" 2>&1
"$poslab" report "$work/partial-smoke" --out "$work/partial-report"

# 2. Two tiny language models, and the explorer with both side by side.
tiny=(--set model.d_model=16 --set model.n_layers=2 --set model.n_heads=2 --set model.d_inner=32
      --set train.seq_len=16 --set train.batch_size=2 --set train.steps=2 --set train.warmup_steps=1
      --set train.log_every=1 --set eval.batches=1 --set memory.mem_len=0 --set train.threads=1)
for encoding in sinusoidal alibi; do
  "$poslab" train --config experiments/quickstart.toml --set encoding.type=$encoding "${tiny[@]}" \
    --out "$work/runs/$encoding" >"$work/train-$encoding.log" 2>&1
done
"$poslab" explore "$work/runs/sinusoidal" "$work/runs/alibi" --out "$work/explorer"
# ... and a RoPE run beside its YaRN twin (the same weights, read with s = 4): what differs.
"$poslab" train --config experiments/quickstart.toml --set encoding.type=rope "${tiny[@]}" \
  --out "$work/runs/rope" >"$work/train-rope.log" 2>&1
cp -r "$work/runs/rope" "$work/runs/rope_yarn"
sed -i 's/^scaling = "none"/scaling = "yarn"/; s/^factor = 1.0/factor = 4.0/' \
  "$work/runs/rope_yarn/config.toml"
sed -i 's/^original_len = 0/original_len = 16/' "$work/runs/rope_yarn/config.toml"
"$poslab" explore "$work/runs/rope" "$work/runs/rope_yarn" --out "$work/rope-explorer"

# 3. Hostile names: a study directory, study and run names, a run directory and a text file.
hostile_study="$work/hostile/<script>alert(1)</script>"
mkdir -p "$hostile_study"
/usr/bin/python3 - "$work/xl_terms-smoke/summary.csv" "$hostile_study/summary.csv" <<'PY'
import sys
import pandas as pd
s = pd.read_csv(sys.argv[1])
s["study"] = "<script>alert(1)</script>"
s["run"] = '"><img src=x onerror=alert(2)>' + s["run"]
s["variant"] = "<script>alert(1)</script>" + s["variant"]
s.to_csv(sys.argv[2], index=False)
PY
"$poslab" report "$hostile_study" --out "$work/hostile-report"
hostile_run="$work/hostile/\"><img src=x onerror=alert(2)>"
cp -r "$work/runs/alibi" "$hostile_run"
hostile_text="$work/hostile/<script>alert(1)</script>.txt"
for i in $(seq 1 20); do printf '<script>alert(1)</script> "><img src=x onerror=alert(2)> '; done >"$hostile_text"
"$poslab" explore "$hostile_run" --texts 0 --text "$hostile_text" --out "$work/hostile-explorer"

# 4. Committed studies with two-stage, randomized and heatmap figures (a second or two each).
study_reports=()
for study in context_extension length_generalization_randomized pilots/passkey_check; do
  "$poslab" report "results/$study" --out "$work/studies/$study/report" >/dev/null
  study_reports+=(--study-report "$work/studies/$study/report/index.html" "results/$study/summary.csv")
done
built=$(date +%s)

/usr/bin/python3 tests/browser/check_pages.py \
  --report "$work/report/index.html" --summary "$work/xl_terms-smoke/summary.csv" \
  --partial-report "$work/partial-report/index.html" \
  --partial-summary "$work/partial-smoke/summary.csv" \
  --explorer "$work/explorer/index.html" \
  --rope-explorer "$work/rope-explorer/index.html" \
  --hostile-report "$work/hostile-report/index.html" \
  --hostile-explorer "$work/hostile-explorer/index.html" \
  "${study_reports[@]}" \
  --screenshots "$work/screenshots"
echo "browser test: pages built in $((built - start)) s, checked in $(($(date +%s) - built)) s;" \
     "screenshots in $work/screenshots/"
