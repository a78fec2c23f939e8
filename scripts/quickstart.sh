#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs what is missing, builds, then
#   1. trains the quickstart model (experiments/quickstart.toml: Transformer-XL with memory on
#      Debian's fortunes) and prints its validation loss next to the unigram baseline;
#   2. runs a short comparison study on the long-document corpus, Debian's Python standard
#      library (experiments/quickstart_comparison.toml: none, sinusoidal, Shaw and
#      Transformer-XL trained with memory 32, each evaluated with memory 0, 32 and 128) and
#      prints its table;
#   3. writes the comparison's report and the quickstart model's attention explorer (docs/10)
#      and prints where they are.
# About 5 minutes on 2 cores. Results: runs/quickstart/ and results/quickstart_comparison/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build/poslab train --config experiments/quickstart.toml --force  # a rerun moves the last run aside
echo
build/poslab run experiments/quickstart_comparison.toml --jobs 2
echo
/usr/bin/python3 - <<'PY'
import pandas as pd
s = pd.read_csv("results/quickstart_comparison/summary.csv")
m = s[s["kind"] == "memory"].pivot_table(index="encoding.type", columns="mem_len", values="loss")
m.columns = [f"memory {c}" for c in m.columns]
print("Python standard library, validation loss (nats/byte) by evaluation memory;")
print("trained with memory 32, segment 32, 1500 steps:")
print(m.round(4).to_string())
PY
echo
# The web pages (docs/10): the comparison's report, and the attention explorer of the quickstart
# model; both open from disk in any browser.
build/poslab explore runs/quickstart --out runs/quickstart_explorer
build/poslab report results/quickstart_comparison
echo
echo "Open in a browser: results/quickstart_comparison/report/index.html (the report)"
echo "            and    runs/quickstart_explorer/index.html (the attention explorer)"

