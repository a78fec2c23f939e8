#!/bin/bash
# OpenBLAS, BLIS and libxsmm on the products of one poslab training step (issue 15, item 2).
# Needs Debian's libopenblas-dev, libblis-dev and libxsmm-dev (not CI dependencies):
#   apt-get install -y libblis-dev libxsmm-dev
# Usage: bench/blas_backends/run.sh [REPETITIONS] [CSV] [--only reference|xl_mem64]
#   e.g. bench/blas_backends/run.sh 41 results/bench/blas_backends.csv
# BLIS is linked statically and called through bli_sgemm (Debian's libblis.so also exports
# cblas_sgemm and sgemm_, which would clash with OpenBLAS's); libxsmm is static (Debian ships
# only libxsmm.a), its BLAS fallback is OpenBLAS's sgemm_.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
args="$*"
reps=${1:-41}
csv=${2:-}
shift $(( $# < 2 ? $# : 2 ))
out=${TMPDIR:-/tmp}/poslab_blas_backends
mkdir -p "$out"
blis=/usr/lib/x86_64-linux-gnu/blis-openmp
g++ -std=c++20 -O3 -march=native -fopenmp -Wall -Wextra -c "$here/openblas.cpp" -o "$out/openblas.o"
g++ -std=c++20 -O3 -march=native -fopenmp -isystem /usr/include/x86_64-linux-gnu/blis-openmp \
  -c "$here/blis.cpp" -o "$out/blis.o"
g++ -std=c++20 -O3 -march=native -fopenmp -c "$here/xsmm.cpp" -o "$out/xsmm.o"
g++ -std=c++20 -O3 -march=native -fopenmp -Wall -Wextra -c "$here/main.cpp" -o "$out/main.o"
# OpenBLAS before BLIS's archive: the linker then takes cblas_sgemm and sgemm_ from OpenBLAS and
# pulls only the bli_* objects from the archive.
g++ -fopenmp "$out/main.o" "$out/openblas.o" "$out/blis.o" "$out/xsmm.o" -o "$out/blas_backends" \
  -lxsmm -lopenblas "$blis/libblis.a" -lpthread -lrt -ldl -lm
# cblas_sgemm and sgemm_ must come from OpenBLAS, not from a BLIS object linked in by accident.
if nm "$out/blas_backends" | grep -E ' [TW] (cblas_sgemm|sgemm_)$'; then
  echo "a cblas/BLAS symbol was linked from BLIS's archive" >&2
  exit 1
fi
echo "command:     bench/blas_backends/run.sh $args"
echo "commit:      $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "machine:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "compiler:    $(g++ --version | head -1), -O3 -march=native -fopenmp"
echo "packages:    $(dpkg-query -W -f='${Package} ${Version}, ' libopenblas0-pthread libblis4-openmp libxsmm-dev 2>/dev/null)"
echo "load before: $(cat /proc/loadavg)"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=${OMP_PROC_BIND:-false} \
  "$out/blas_backends" --reps "$reps" ${csv:+--csv "$csv"} "$@"
echo "load after:  $(cat /proc/loadavg)"
