#!/bin/bash
# Peak resident memory of evaluation against context length (issue 15, item 4): Transformer-XL,
# d_model 64, 2 layers, 4 heads, batch 1, segment 512, memory M (context M + 512, 512 .. 16,384).
# Three forwards:
#   training              keeps every layer's [B, H, L, K] weights (what evaluation used before)
#   inference, budget 256 the evaluation-only forward as evaluation runs it: scores of one layer
#                         at a time, in chunks of (rows, heads) only above 256 MiB
#   inference, budget 32  the same with a 32 MiB score budget: one row and as many heads as fit
#                         (one head at 16,384), so the scores never exceed 32 MiB
# One process per measurement, so that each peak is its own.
# Usage: bench/eval_memory.sh [POSLAB] > results/bench/eval_memory.csv
set -eu
poslab=${1:-build/poslab}
tmp=$(mktemp -d)
header=1
for run in "training 256" "inference 256" "inference 32"; do
  read -r path budget <<< "$run"
  for M in 0 512 1536 3584 7680 15872; do
    "$poslab" bench --eval-memory $M --eval-memory-path $path --eval-memory-budget $budget \
      --set encoding.type=transformer_xl --set model.d_model=64 --set model.n_layers=2 \
      --set train.seq_len=512 --csv "$tmp/one.csv" >&2
    if [[ $header == 1 ]]; then head -1 "$tmp/one.csv"; header=0; fi
    tail -n +2 "$tmp/one.csv"
  done
done
rm -rf "$tmp"
