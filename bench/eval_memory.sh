#!/bin/bash
# Peak resident memory of evaluation against context length (issue 15, item 4), before and after
# the evaluation-only forward: Transformer-XL, d_model 64, 2 layers, 4 heads, batch 1, segment
# 512, memory M. "training" is the forward that keeps every layer's [B, H, L, K] weights (what
# evaluation used before); "inference" is the evaluation-only one. One process per measurement,
# so that each peak is its own. Usage: bench/eval_memory.sh [POSLAB] > results/bench/eval_memory.csv
set -eu
poslab=${1:-build/poslab}
tmp=$(mktemp -d)
header=1
for path in training inference; do
  for M in 512 2048 8192 15872; do
    "$poslab" bench --eval-memory $M --eval-memory-path $path --set encoding.type=transformer_xl \
      --set model.d_model=64 --set model.n_layers=2 --set train.seq_len=512 \
      --csv "$tmp/one.csv" >&2
    if [[ $header == 1 ]]; then head -1 "$tmp/one.csv"; header=0; fi
    tail -n +2 "$tmp/one.csv"
  done
done
rm -rf "$tmp"
