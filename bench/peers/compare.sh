#!/usr/bin/env bash
# poslab against its peers at the reference configuration, alternated: poslab 'none' and the plain
# PyTorch decoder, poslab Transformer-XL with memory 64 and the official code, ROUNDS times (3),
# so that a change in the machine's load hits both sides of a ratio. Prints every figure and the
# ratios of the medians. Measure on an idle machine.
#
#   bash bench/peers/compare.sh /tmp/transformer-xl/pytorch [ROUNDS]
#
# POSLAB=path picks the poslab binary (build/poslab). BASELINE=path adds a second poslab binary
# (an older commit's build) to every round, alternated with the first, and prints its ratios too:
# a before / after table from one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
txl=${1:?usage: compare.sh PATH/TO/transformer-xl/pytorch [ROUNDS]}
rounds=${2:-3}
POSLAB=${POSLAB:-build/poslab}
BASELINE=${BASELINE:-}
tokens() { grep -Eo '^(training: +)?[^:]*: +[0-9]+' | grep -Eo '[0-9]+$' | head -n 1; }
declare -a none torch xl official base_none base_xl
bench_none() { "$1" bench --set train.threads=2 | grep '^training:' | tokens; }
bench_xl() {
  "$1" bench --set train.threads=2 --set encoding.type=transformer_xl --set memory.mem_len=64 |
    grep '^training:' | tokens
}
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds"
  none+=("$(bench_none "$POSLAB")")
  [[ -n $BASELINE ]] && base_none+=("$(bench_none "$BASELINE")")
  torch+=("$(/usr/bin/python3 bench/peers/pytorch_decoder.py | tokens)")
  xl+=("$(bench_xl "$POSLAB")")
  [[ -n $BASELINE ]] && base_xl+=("$(bench_xl "$BASELINE")")
  official+=("$(/usr/bin/python3 bench/peers/official_txl.py --txl "$txl" | tokens)")
  [[ -n $BASELINE ]] && echo "  baseline poslab none ${base_none[-1]}, baseline XL m64 ${base_xl[-1]} tokens/s"
  echo "  poslab none ${none[-1]}, pytorch ${torch[-1]}, poslab XL m64 ${xl[-1]}, official XL m64 ${official[-1]} tokens/s (medians of 5 repetitions)"
done
/usr/bin/python3 - "${none[*]}" "${torch[*]}" "${xl[*]}" "${official[*]}" "${base_none[*]:-}" \
  "${base_xl[*]:-}" <<'PY'
import statistics, sys
none, torch, xl, official, base_none, base_xl = ([float(x) for x in a.split()] for a in sys.argv[1:])
m = statistics.median
print(f"none / pytorch decoder:     {m(none) / m(torch):.2f}x  (per round: "
      + ", ".join(f"{a / b:.2f}" for a, b in zip(none, torch)) + ")")
print(f"XL m64 / official XL m64:   {m(xl) / m(official):.2f}x  (per round: "
      + ", ".join(f"{a / b:.2f}" for a, b in zip(xl, official)) + ")")
if base_none:
    print(f"baseline none / pytorch:    {m(base_none) / m(torch):.2f}x  (per round: "
          + ", ".join(f"{a / b:.2f}" for a, b in zip(base_none, torch)) + ")")
    print(f"baseline XL / official XL:  {m(base_xl) / m(official):.2f}x  (per round: "
          + ", ".join(f"{a / b:.2f}" for a, b in zip(base_xl, official)) + ")")
    print(f"none, this / baseline:      {m(none) / m(base_none):.3f}  "
          f"XL m64, this / baseline: {m(xl) / m(base_xl):.3f}")
PY
