#!/usr/bin/env bash
# Issue 50, first round: `poslab bench` of two builds (before: OLD, after: NEW), alternated over
# ROUNDS rounds, at the studies' size (2 layers, width 64, d_inner 256, RoPE, 1 thread: what each
# run of `--jobs 2` gets) and at the reference configuration (2 threads), under OpenBLAS's own
# kernel for this CPU and under OPENBLAS_CORETYPE=Haswell with
# OPENBLAS_L2_SIZE=512 (what this machine's environment exports). Measure on an idle machine.
#
#   bash bench/exp_and_corpus/run.sh OLD_POSLAB NEW_POSLAB [ROUNDS] > results/bench/exp_and_corpus.csv
set -euo pipefail
old=${1:?usage: run.sh OLD_POSLAB NEW_POSLAB [ROUNDS]}
new=${2:?usage: run.sh OLD_POSLAB NEW_POSLAB [ROUNDS]}
rounds=${3:-3}
studies=(--steps 100 --set model.n_layers=2 --set model.d_model=64 --set model.d_inner=256
         --set encoding.type=rope --set train.threads=1)
reference=(--steps 20 --set train.threads=2)
here="$(dirname "${BASH_SOURCE[0]}")"
echo "round,kernel,size,build,tokens_per_s,ceiling_gflops,ratio"
for ((r = 1; r <= rounds; r++)); do
  for kernel in own Haswell; do
    for size in studies reference; do
      if [[ $size == studies ]]; then args=("${studies[@]}"); else args=("${reference[@]}"); fi
      if [[ $kernel == own ]]; then
        kernel_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
      else
        kernel_env=(env OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512)
      fi
      # One round of bench/before_after.sh (old, then new); its rows "1,old,..." get this round,
      # kernel and size.
      "${kernel_env[@]}" bash "$here/../before_after.sh" "$old" "$new" 1 "${args[@]}" |
        tail -n +2 | sed "s/^1,/$r,$kernel,$size,/"
    done
  done
done
