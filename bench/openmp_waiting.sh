#!/usr/bin/env bash
# How OpenMP threads wait, and what it costs (docs/09, "Waiting threads"): `poslab bench` at the
# reference configuration with passive waiting (sleep at once) and with GOMP_SPINCOUNT=N (spin N
# rounds, then sleep), alternated, ROUNDS times; with --busy, beside one busy process (a shell
# loop) on the machine, as when a second job or a compiler shares it. Measure on an idle machine.
#
#   bash bench/openmp_waiting.sh [--busy] [POSLAB] [ROUNDS] [COUNTS]
#   bash bench/openmp_waiting.sh build/poslab 3 "1000 3000 10000"
set -euo pipefail
busy=0
if [[ ${1:-} == --busy ]]; then busy=1; shift; fi
poslab=${1:-build/poslab}
rounds=${2:-3}
counts=${3:-1000 3000 10000}
if ((busy)); then
  sh -c 'while :; do :; done' &
  spinner=$!
  trap 'kill $spinner' EXIT
fi
echo "round,busy,waiting,tokens_per_s"
for ((r = 1; r <= rounds; r++)); do
  for c in passive $counts; do
    if [[ $c == passive ]]; then
      out=$(env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive "$poslab" bench)
    else
      out=$(env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=$c "$poslab" bench)
    fi
    echo "$r,$busy,$c,$(awk '/^training:/{print $2}' <<<"$out")"
  done
done
