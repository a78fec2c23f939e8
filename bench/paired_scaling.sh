#!/usr/bin/env bash
# Every encoding's GFLOP/s over those of `none`, measured in pairs: at each segment and in each
# round, `poslab bench` of `none` and of the encoding right after it, so that a change in the
# machine's speed hits both sides of each ratio (docs/09, "Encodings at length"). Batch x segment
# = 1,024 tokens and memory = segment, as `poslab bench --scaling`. Prints a CSV. Measure on an
# idle machine.
#
# An encoding may carry options, NAME:KEY=VALUE:KEY=VALUE (each becomes --set encoding.KEY=VALUE):
# by default every registered encoding, then rope with yarn scaling. ENCODINGS replaces the list.
#
#   bash bench/paired_scaling.sh [POSLAB] [SEGMENTS] [ROUNDS] [STEPS] [ENCODINGS]
#   bash bench/paired_scaling.sh build/poslab "128 512" 3 3 > results/bench/scaling_paired.csv
#   bash bench/paired_scaling.sh build/poslab "128 512" 3 3 \
#       "rope:scaling=yarn:factor=4:original_len=16 xpos"
set -euo pipefail
poslab=${1:-build/poslab}
segments=${2:-64 128 256 512}
rounds=${3:-3}
steps=${4:-3}
encodings=${5:-$("$poslab" encodings | awk '/^[a-z_0-9]+  \(/{print $1}' | grep -v '^none$')
rope:scaling=yarn:factor=4:original_len=16}
gflops() {  # encoding[:key=value...] segment -> median GFLOP/s of `poslab bench`
  local name=${1%%:*} sets=()
  if [[ $1 == *:* ]]; then
    local options=${1#*:}
    for kv in ${options//:/ }; do sets+=(--set "encoding.$kv"); done
  fi
  "$poslab" bench --steps "$steps" --set "encoding.type=$name" "${sets[@]}" --set "train.seq_len=$2" \
    --set "train.batch_size=$((1024 / $2))" --set "memory.mem_len=$2" |
    awk '/^achieved:/{print $2}'
}
echo "segment,round,encoding,gflops,none_gflops,gflops_vs_none"
for s in $segments; do
  for ((r = 1; r <= rounds; r++)); do
    for e in $encodings; do
      none=$(gflops none "$s")
      this=$(gflops "$e" "$s")
      echo "$s,$r,$e,$this,$none,$(awk -v a="$this" -v b="$none" 'BEGIN{printf "%.4f", a / b}')"
    done
  done
done
