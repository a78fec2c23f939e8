#!/bin/bash
# The whole model with libxsmm's kernels (issue 15, item 2): `poslab bench` of the default build
# and of a build with libxsmm_experiment.patch (gemm asks libxsmm_smmdispatch for a kernel at any
# size, OpenBLAS where it gets none: the `libxsmm_jit` of run.sh), alternated, at memory 0 and 64.
# The patch is an experiment, not a build option (that build's `poslab bench` line still names
# OpenBLAS, its fallback). To make the second build (needs libxsmm-dev):
#   git apply bench/blas_backends/libxsmm_experiment.patch
#   cmake -S . -B build-xsmm -DCMAKE_BUILD_TYPE=Release -DPOSLAB_NATIVE=ON \
#     -DCMAKE_CXX_FLAGS=-DPOSLAB_XSMM_EXPERIMENT \
#     -DCMAKE_CXX_STANDARD_LIBRARIES="-lxsmm -lopenblas -lpthread -lrt -ldl"
#   cmake --build build-xsmm -j2 --target poslab
#   git apply -R bench/blas_backends/libxsmm_experiment.patch
# Usage: bench/blas_backends/whole_model.sh [ROUNDS] > results/bench/blas_backends_model.csv
set -eu
rounds=${1:-3}
tmp=$(mktemp)
{
echo "round,mem_len,build,tokens_per_second,tokens_per_second_min,tokens_per_second_max,ceiling_gflops,load1"
for round in $(seq 1 "$rounds"); do
  for mem in 0 64; do
    for build in build build-xsmm; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      out=$("./$build/poslab" bench --set memory.mem_len=$mem)
      echo "$out" >&2
      /usr/bin/python3 - "$round" "$mem" "$build" "$load" "$out" <<'PY'
import re, sys
r, mem, build, load, out = sys.argv[1:]
t = re.search(r"training:\s+(\d+) \(min (\d+), max (\d+)\)", out)
c = re.search(r"ceiling:\s+([\d.]+)", out)
print(f"{r},{mem},{build},{t[1]},{t[2]},{t[3]},{c[1]},{load}")
PY
    done
  done
done
} > "$tmp"
# speedup: tokens/s over the default build's in the same round and memory (1 for the default).
/usr/bin/python3 - "$tmp" <<'PY'
import sys
import pandas as pd
d = pd.read_csv(sys.argv[1])
base = d[d.build == "build"].set_index(["round", "mem_len"]).tokens_per_second
d["speedup"] = [round(r.tokens_per_second / base[(r["round"], r.mem_len)], 4) for _, r in d.iterrows()]
print(d.to_csv(index=False), end="")
PY
rm -f "$tmp"
