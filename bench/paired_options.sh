#!/usr/bin/env bash
# Training-time options against plain rope, measured in pairs: at each segment and in each round,
# `poslab bench` of plain rope and of rope with the option right after it, so that a change in the
# machine's speed hits both sides of each ratio (docs/09). Batch x segment = 1,024 tokens, no
# memory (PoSE's skipping positions are for training without memory), the reference model size.
# Prints a CSV of tokens/s (medians of `poslab bench`'s 5 repetitions). Measure on an idle machine.
#
# An option is LABEL=KEY=VALUE[,KEY=VALUE...], each KEY=VALUE one --set; by default issue 36's
# training-time options: PoSE (target 4x the segment), the learned sink logit, log-n scaling
# applied in training too (`always`, trained length = the segment).
#
#   bash bench/paired_options.sh [POSLAB] [SEGMENTS] [ROUNDS] [STEPS] [OPTIONS]
#   bash bench/paired_options.sh build/poslab "128 512" 3 3 > results/bench/options_paired.csv
set -euo pipefail
poslab=${1:-build/poslab}
segments=${2:-128 512}
rounds=${3:-3}
steps=${4:-3}
tokens_per_s() {  # segment [--set K=V ...] -> median tokens/s of `poslab bench` with rope
  local s=$1; shift
  "$poslab" bench --steps "$steps" --set encoding.type=rope --set "train.seq_len=$s" \
    --set "train.batch_size=$((1024 / s))" --set memory.mem_len=0 "$@" |
    awk '/^training:/{print $2}'
}
echo "segment,round,option,tokens_per_s,rope_tokens_per_s,ratio_to_rope"
for s in $segments; do
  options=${5:-"pose=train.pose_target_len=$((4 * s)) sink_logit=model.sink_logit=true log_n_always=encoding.log_n=always,encoding.log_n_len=$s"}
  for ((r = 1; r <= rounds; r++)); do
    for o in $options; do
      label=${o%%=*} sets=()
      IFS=, read -ra kvs <<< "${o#*=}"
      for kv in "${kvs[@]}"; do sets+=(--set "$kv"); done
      rope=$(tokens_per_s "$s")
      this=$(tokens_per_s "$s" "${sets[@]}")
      echo "$s,$r,$label,$this,$rope,$(awk -v a="$this" -v b="$rope" 'BEGIN{printf "%.4f", a / b}')"
    done
  done
done
