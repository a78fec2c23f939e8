#!/usr/bin/env bash
# Byte-identity check for refactorings that must change nothing observable (issue 47): runs a
# tiny run of every evaluation mode, the inspection commands (attention, explore, encodings
# --describe), bench at a tiny size, and a few study smokes with one binary into a directory,
# then compares two such directories file by file (scripts/compare_trees.py says what it
# ignores: moment, duration, speed, memory and commit fields, nothing else).
#
#   bash scripts/compare_refactor.sh run OLD_POSLAB /tmp/cmp/old
#   bash scripts/compare_refactor.sh run build/poslab /tmp/cmp/new
#   bash scripts/compare_refactor.sh compare /tmp/cmp/old /tmp/cmp/new
#
# About 5 minutes per binary on a loaded 2-core machine (1 thread per run).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:?usage: compare_refactor.sh run POSLAB OUT | compare A B}"
if [[ $mode == compare ]]; then
  exec /usr/bin/python3 "$repo/scripts/compare_trees.py" "${2:?A}" "${3:?B}"
fi
poslab="$(realpath "${2:?POSLAB}")"
out="${3:?OUT}"
# Every binary runs in the same scratch directory (paths are written into run files), moved to
# OUT at the end.
scratch="${TMPDIR:-/tmp}/poslab-compare-refactor"
rm -rf "$out" "$scratch" && mkdir -p "$scratch/work" && cd "$scratch/work" || exit 1
cp "$poslab" "$scratch/poslab" && poslab="$scratch/poslab"  # its path is written into run logs
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 MPLBACKEND=Agg

# step NAME COMMAND...: stdout, stderr and exit code of one command into $scratch/logs/NAME.*
mkdir -p "$scratch/logs"
step() {
  local name=$1; shift
  echo "== $name: $*" | sed "s|$poslab|poslab|g" >&2
  "$@" >"$scratch/logs/$name.out" 2>"$scratch/logs/$name.err"
  echo $? >"$scratch/logs/$name.code"
}

cat >tiny.toml <<'TOML'
# A tiny byte-level language model with every evaluation mode of the final plan on.
out_dir = "runs/lm_all"
[model]
d_model = 16
n_layers = 1
n_heads = 2
d_inner = 32
[encoding]
type = "transformer_xl"
[memory]
mem_len = 16
[train]
seq_len = 32
batch_size = 4
steps = 12
log_every = 4
eval_every = 6
eval_batches = 2
threads = 1
[eval]
batches = 2
length_factors = [2.0]
memory_factors = [1.0]
stride = 16
copy_distance = true
passkey_length_factors = [4.0]
passkey_depths = [0.0, 1.0]
passkey_instances = 3
stream_length = 200
stream_recent = 11
TOML

# train + chunked (main, length, memory), sliding window, copy distance, passkey, stream
step train_lm_all "$poslab" train --config tiny.toml
# rope: length factors with sliding windows, the passkey curve read during training
step train_rope "$poslab" train --config tiny.toml --set out_dir=runs/rope \
  --set encoding.type=rope --set memory.mem_len=0 --set eval.memory_factors=[] \
  --set eval.stream_length=0 --set train.eval_passkey_instances=2
# two-stage: fine-tuned from the rope run at 64 with YaRN, optimizer moments continued
step train_child "$poslab" train --config tiny.toml --set out_dir=runs/child \
  --set encoding.type=rope --set memory.mem_len=0 --set eval.memory_factors=[] \
  --set eval.stream_length=0 --set train.seq_len=64 --set train.steps=4 \
  --set encoding.scaling=yarn --set encoding.factor=2.0 --set encoding.original_len=32 \
  --set train.init_from=runs/rope --set train.init_optimizer=true
# a generated task: gate settings, exact match, randomized positions (sampled settings)
step train_task "$poslab" train --config tiny.toml --set out_dir=runs/task --set task.name=copy \
  --set encoding.type=rope --set memory.mem_len=0 --set eval.memory_factors=[] \
  --set eval.stream_length=0 --set eval.stride=-1 --set eval.passkey_length_factors=[] \
  --set eval.copy_distance=false --set train.randomized_positions=true \
  --set train.max_position=256
# resume of a finished run: nothing to do
step train_resume_finished "$poslab" train --config tiny.toml --resume
# evaluations of a finished run
step eval_chunked "$poslab" eval --run runs/lm_all --seq-len 64 --mem-len 0 \
  --token-losses losses.npy
step eval_passkey "$poslab" eval --run runs/lm_all --passkey --set eval.passkey_instances=2
step eval_stream "$poslab" eval --run runs/lm_all --stream --set eval.stream_length=150
step sinks "$poslab" sinks --run runs/rope --windows 4
step attention "$poslab" attention --run runs/rope --input "The quick brown fox"
# attention with a memory (the Transformer-XL run), the no-memory notice, a bad input
step attention_memory "$poslab" attention --run runs/lm_all --input "over the lazy dog" \
  --mem-text "The quick brown fox jumps" --out attention_xl
step attention_no_memory "$poslab" attention --run runs/rope --input "ab" --mem-text "xyz" \
  --out attention_no_memory
step bad_attention_empty "$poslab" attention --run runs/rope --input ""
# the explorer: two language-model runs side by side, windows of the split and a text of ours
printf 'A text of our own, long enough for 1x and 2x of a 32-byte segment and its memory: %s\n' \
  "the quick brown fox jumps over the lazy dog" >our_text.txt
step explore "$poslab" explore runs/lm_all runs/rope --out explorer --texts 2 --factors 1,2,8 \
  --text our_text.txt
step bad_explore_task "$poslab" explore runs/task --out explorer_task
step bad_explore_no_text "$poslab" explore runs/rope --texts 0 --out explorer_none
# encodings --describe: the RoPE frequency table of each scaling, as a table and as CSV
step describe_yarn "$poslab" encodings --describe rope --set encoding.scaling=yarn \
  --set encoding.factor=4 --set encoding.original_len=64
step describe_yarn_csv "$poslab" encodings --describe rope --set encoding.scaling=yarn \
  --set encoding.factor=4 --set encoding.original_len=64 --csv
step describe_dynamic_ntk "$poslab" encodings --describe rope --set encoding.scaling=dynamic_ntk \
  --set encoding.factor=2 --set encoding.original_len=32 --length 100
step describe_self_extend "$poslab" encodings --describe rope --set encoding.scaling=self_extend \
  --set encoding.original_len=64 --set encoding.neighbor_window=16 --set encoding.group_size=4 \
  --length 300
step describe_rerope "$poslab" encodings --describe rope --set encoding.scaling=rerope \
  --set encoding.original_len=64 --set encoding.rerope_window=16
step describe_leaky_rerope "$poslab" encodings --describe rope \
  --set encoding.scaling=leaky_rerope --set encoding.original_len=64 \
  --set encoding.rerope_window=16 --length 200
step describe_log_n "$poslab" encodings --describe rope --set encoding.log_n=always \
  --set encoding.log_n_len=64 --length 256
step describe_longrope "$poslab" encodings --describe rope --set model.d_model=16 \
  --set model.n_heads=2 --set encoding.scaling=longrope --set encoding.factor=4 \
  --set encoding.original_len=64 --set "encoding.short_factor=1, 1.5, 2, 4" \
  --set "encoding.long_factor=1, 2, 3, 4" --set encoding.start_tokens=2 --length 300
step bad_describe "$poslab" encodings --describe alibi
# bench, at a tiny size (its times and memory differ run to run: compare_trees.py masks the
# numbers of logs/bench*; its CSVs keep the counted FLOPs, shapes and estimates)
bench_size=(--set model.d_model=16 --set model.n_layers=1 --set model.n_heads=2
  --set model.d_inner=32 --set train.seq_len=16 --set train.batch_size=2 --set train.threads=1)
step bench "$poslab" bench --steps 1 "${bench_size[@]}"
step bench_compare "$poslab" bench --steps 1 --compare 8 "${bench_size[@]}"
step bench_scaling "$poslab" bench --steps 1 --scaling 8,16 --tokens 32 --csv bench_scaling.csv \
  "${bench_size[@]}"
step bench_reuse "$poslab" bench --reuse 32,48 --targets 4 --csv bench_reuse.csv \
  "${bench_size[@]}"
step bench_eval_memory "$poslab" bench --eval-memory 0,32 --csv bench_eval_memory.csv \
  "${bench_size[@]}"
step bench_eval_memory_training "$poslab" bench --eval-memory 16 --eval-memory-path training \
  --csv bench_eval_memory_training.csv "${bench_size[@]}"
step bench_bad_path "$poslab" bench --eval-memory 16 --eval-memory-path nope "${bench_size[@]}"
step bench_bad_reuse "$poslab" bench --reuse 32,16 --targets 4 "${bench_size[@]}"
step bench_bad_scaling "$poslab" bench --scaling 7 --tokens 32 "${bench_size[@]}"
step longrope "$poslab" longrope-search --run runs/rope --target 64 --out runs/longrope \
  --population 4 --parents 2 --iterations 1 --mutations 2 --crossovers 2 --eval-batches 1 \
  --eval-rows 2
# bad inputs: the messages and exit codes
step bad_missing_config "$poslab" train --config nowhere.toml
step bad_key "$poslab" train --config tiny.toml --set eval.nope=1
step bad_value "$poslab" train --config tiny.toml --set eval.stride=-3
step bad_existing "$poslab" train --config tiny.toml
step bad_eval_unread "$poslab" eval --run runs/lm_all --set eval.length_factors=[2]
step bad_eval_training_key "$poslab" eval --run runs/lm_all --stream --set train.lr=1
step bad_eval_missing_run "$poslab" eval --run runs/none
step bad_replace "$poslab" eval --run runs/lm_all --passkey --set eval.passkey_instances=1
step bad_stream_short "$poslab" train --config tiny.toml --set out_dir=runs/x \
  --set eval.stream_length=100000000
step bad_passkey_long "$poslab" train --config tiny.toml --set out_dir=runs/y \
  --set eval.passkey_length_factors=[1000000.0]
step bad_passkey_and_stream "$poslab" train --config tiny.toml --set out_dir=runs/y \
  --set eval.stream_length=100000000 --set eval.passkey_length_factors=[1000000.0]
step bad_parent "$poslab" train --config tiny.toml --set out_dir=runs/z \
  --set train.init_from=runs/none
step bad_eval_seq_len "$poslab" train --config tiny.toml --set out_dir=runs/w \
  --set eval.seq_len=100000000
# every command's help
for command in "" train eval bench encodings tasks plot attention sinks longrope-search explore \
  report run; do
  step "help_${command:-poslab}" "$poslab" $command --help
done
step usage_unknown_command "$poslab" trian
step usage_missing_option "$poslab" eval
step listing_encodings "$poslab" encodings
step listing_tasks "$poslab" tasks
# study smokes (each well under a minute here)
step study_two_stage "$poslab" run "$repo/tests/studies/two_stage.toml" --jobs 1 --out studies/two_stage
step study_streaming "$poslab" run "$repo/experiments/streaming_sinks.toml" --smoke --jobs 1 \
  --out studies/streaming_sinks
step study_copy_distance "$poslab" run "$repo/experiments/copy_distance_demo.toml" --smoke \
  --jobs 1 --out studies/copy_distance
step study_length_generalization "$poslab" run "$repo/experiments/length_generalization.toml" \
  --smoke --jobs 1 --out studies/length_generalization
rm -f "$scratch/poslab" && cd / && mkdir -p "$(dirname "$out")" && mv "$scratch" "$out" && echo "wrote $out" >&2
