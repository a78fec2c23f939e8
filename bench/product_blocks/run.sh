#!/usr/bin/env bash
# Issue 44's cost: the products cut into shape-only blocks (src/core/blas.cpp, product_blocks)
# against one block per thread (the code before it), `poslab bench` alternated round by round
# (bench/before_after.sh), under two OpenBLAS kernels (OpenBLAS's own choice for this CPU, and
# OPENBLAS_CORETYPE=Haswell) and at two sizes: the reference configuration (width 128, 4
# layers, 2 threads) and the studies' size (2 layers, width 64, d_inner 256, RoPE, 1 thread per
# run as `poslab run --jobs 2` gives on 2 cores). Prints a CSV; measure on an idle machine.
#
#   bash bench/product_blocks/run.sh OLD_POSLAB NEW_POSLAB [ROUNDS] > results/bench/product_blocks.csv
# OLD_POSLAB: a build of the commit before issue 44 (e8899c8), e.g.
#   git worktree add /tmp/old e8899c8 && cmake -S /tmp/old -B /tmp/old/build -DCMAKE_BUILD_TYPE=Release \
#     -DPOSLAB_NATIVE=ON && cmake --build /tmp/old/build -j2 --target poslab
set -euo pipefail
old=${1:?usage: run.sh OLD_POSLAB NEW_POSLAB [ROUNDS]}
new=${2:?usage: run.sh OLD_POSLAB NEW_POSLAB [ROUNDS]}
rounds=${3:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
studies=(--set model.n_layers=2 --set model.d_model=64 --set model.d_inner=256
         --set encoding.type=rope --set train.threads=1)
echo "kernel,size,round,build,tokens_per_s,ceiling_gflops,ratio"
for kernel in own Haswell; do
  if [[ $kernel == own ]]; then run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
  else run=(env OPENBLAS_CORETYPE=Haswell); fi
  for size in reference studies; do
    extra=(--steps 20)
    [[ $size == studies ]] && extra+=("${studies[@]}")
    "${run[@]}" bash "$here/before_after.sh" "$old" "$new" "$rounds" "${extra[@]}" |
      tail -n +2 | sed "s/^/$kernel,$size,/"
  done
done
