#!/usr/bin/env bash
# Where one training step's time goes (issue 50): `perf record -e cpu-clock` (a timer, so it
# works without hardware counters, in virtual machines too) of POSLAB training STEPS steps on
# real text (experiments/quickstart.toml's corpus), then the share of the samples
# per function, grouped: the products (OpenBLAS: its kernel, packing copies and the zeroing of C),
# exp, and each of poslab's own passes. CPU samples, so the shares hold on a busy machine too
# (times do not). One thread, so the OpenMP runtime's waiting does not count.
#
#   bash bench/profile_step/run.sh studies|reference [STEPS] [POSLAB]     (POSLAB: build/poslab)
#
# BY_CALLER=1 also records the call stacks (perf's dwarf unwinding, 2,000 samples a second) and
# adds a table of who calls the products (bench/profile_step/by_caller.py): attention's forward
# and backward, the linear layers', the rest; each split into OpenBLAS's kernel, its packing, its
# zeroing of C and poslab's own code. Samples whose stack could not be unwound are counted apart.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
size=${1:?usage: run.sh studies|reference [STEPS] [POSLAB]}
steps=${2:-300}
poslab=${3:-$repo/build/poslab}
case $size in
  studies) args=(--set model.n_layers=2 --set model.d_model=64 --set model.d_inner=256 --set encoding.type=rope) ;;
  reference) args=(--set encoding.type=none) ;;
  *) echo "size must be studies or reference" >&2; exit 2 ;;
esac
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
record=(-F 4000) norandom=()
# Call stacks unwind through OpenBLAS only in some address layouts: BY_CALLER runs without address
# randomisation (setarch -R), where they did in every try.
[[ ${BY_CALLER:-0} == 1 ]] && record=(-F 2000 --call-graph dwarf,16384) norandom=(setarch -R)
perf record -q -e cpu-clock "${record[@]}" -o "$tmp/perf.data" "${norandom[@]}" "$poslab" train \
  --config "$repo/experiments/quickstart.toml" --out "$tmp/run" --set train.steps="$steps" \
  --set train.log_every="$steps" --set eval.batches=1 --set memory.mem_len=0 \
  --set train.threads=1 "${args[@]}" > "$tmp/train.log" 2>&1
provenance=$(python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["provenance"]; print("commit " + p["commit"] + ", BLAS " + p["blas"])' "$tmp/run/eval.json")
echo "# $size size, $steps steps, 1 thread, $provenance"
perf report -i "$tmp/perf.data" --no-children --stdio --sort symbol 2>/dev/null |
  awk '/^ +[0-9.]+%/ { p = $1; sub("%", "", p); $1 = ""; sym = $0; sub(/^ +\[[.k]\] /, "", sym); sub(/ +- +-$/, "", sym); print p "\t" sym }' |
  python3 -c '
import sys, re
groups = [("products (OpenBLAS kernel, packing, zeroing C)", r"sgemm|^__memset"),
          ("exp (libm expf, or exp_shifted inlined in the softmaxes)", r"expf"),
          ("attention: softmax, scores, masks (poslab)", r"Attention<"),
          ("loss: softmax cross-entropy", r"cross_entropy"),
          ("layer norm", r"layernorm"),
          ("GELU", r"activation_"),
          ("Adam", r"adamw"),
          ("RoPE rotations", r"rotate_pairs|rope"),
          ("sums and adds (biases, residuals)", r"add_column_sums|parallel_add|ordered_row|row_max"),
          ("zeroing and copies", r"parallel_fill|memmove|memcpy"),
          ("kernel (page faults, system calls)", r"^pvm_|^clear_page|^_raw|^asm_|^do_"),
          ("corpus loading and batching", r"split_by|read_file|_M_assign|corpus|Batch")]
rows = [(float(p), s) for p, s in (l.rstrip("\n").split("\t", 1) for l in sys.stdin)]
total = {g: 0.0 for g, _ in groups}; other = 0.0
for p, s in rows:
    for g, rx in groups:
        if re.search(rx, s): total[g] += p; break
    else: other += p
for g, _ in groups: print(f"{total[g]:6.1f}%  {g}")
print(f"{other:6.1f}%  everything else")
print("top functions:")
for p, s in sorted(rows, reverse=True)[:12]: print(f"{p:6.2f}%  {s[:110]}")
'
if [[ ${BY_CALLER:-0} == 1 ]]; then
  perf script -i "$tmp/perf.data" -F ip,sym 2>/dev/null | python3 "$repo/bench/profile_step/by_caller.py"
fi
