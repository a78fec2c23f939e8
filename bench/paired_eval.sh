#!/usr/bin/env bash
# Evaluation cost of the inference-time context-extension methods against plain rope, measured in
# pairs: in each round, `poslab eval` of a rope run read at 4x its training length with plain
# positions, then with the method right after it, so that a change in the machine's speed hits
# both sides of each ratio. The run is trained here for one step (the speed of a forward pass does
# not depend on the weights): d_model 64, 2 layers, 4 heads, segment 64, the validation split of
# the context-extension study's corpus (/usr/lib/python3.11), read whole. Tokens/s = the scored
# tokens of eval.json over the process's wall time, which includes reading and splitting the
# corpus (about 0.3 s of each run). Prints a CSV. Measure on an idle machine.
#
# A method is LABEL=KEY=VALUE[,KEY=VALUE...], each KEY=VALUE one --set.
#
#   bash bench/paired_eval.sh [POSLAB] [ROUNDS] [METHODS]
#   bash bench/paired_eval.sh build/poslab 3 > results/bench/eval_methods_paired.csv
set -euo pipefail
poslab=$(realpath "${1:-build/poslab}")
rounds=${2:-3}
methods=${3:-"yarn=encoding.scaling=yarn,encoding.factor=4.0,encoding.original_len=64 \
self_extend=encoding.scaling=self_extend,encoding.original_len=64,encoding.neighbor_window=16,encoding.group_size=4 \
rerope=encoding.scaling=rerope,encoding.original_len=64,encoding.rerope_window=16 \
leaky_rerope=encoding.scaling=leaky_rerope,encoding.original_len=64,encoding.rerope_window=16,encoding.leaky_factor=4 \
log_n_eval=encoding.log_n=eval,encoding.log_n_len=64"}
work=$(mktemp -d "${TMPDIR:-/tmp}/poslab-bench-eval.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/run.toml" <<TOML
[model]
d_model = 64
n_layers = 2
n_heads = 4
d_inner = 256
[encoding]
type = "rope"
[train]
seq_len = 64
batch_size = 16
steps = 1
[eval]
batches = 0
batch_size = 16
split = "valid"
[data]
path = "/usr/lib/python3.11"
include = ["*.py"]
exclude = ["test/*", "*/test/*", "tests/*", "*/tests/*", "*/idle_test/*", "encodings/*",
           "pydoc_data/topics.py", "site-packages/*", "dist-packages/*"]
split = "file"
valid_fraction = 0.05
test_fraction = 0.05
TOML
"$poslab" train --config "$work/run.toml" --out "$work/run" > "$work/train.log" 2>&1
tokens_per_s() {  # [--set K=V ...] -> scored tokens per second of wall time at 256 bytes
  local start end
  start=$(date +%s.%N)
  "$poslab" eval --run "$work/run" --seq-len 256 "$@" > /dev/null 2>&1
  end=$(date +%s.%N)
  /usr/bin/python3 -c "import json,sys; r=json.load(open('$work/run/eval_L256_M0.json')); \
print(round(r['tokens'] / ($end - $start), 1))"
}
echo "round,method,tokens_per_s,rope_tokens_per_s,ratio_to_rope"
for ((r = 1; r <= rounds; r++)); do
  for m in $methods; do
    label=${m%%=*} sets=()
    IFS=, read -ra kvs <<< "${m#*=}"
    for kv in "${kvs[@]}"; do sets+=(--set "$kv"); done
    rope=$(tokens_per_s)
    this=$(tokens_per_s "${sets[@]}")
    echo "$r,$label,$this,$rope,$(awk -v a="$this" -v b="$rope" 'BEGIN{printf "%.4f", a / b}')"
  done
done
