#!/usr/bin/env bash
# The catalogue of bad inputs (issue 16): one case per class of bad input or fault that once
# crashed poslab, left output behind, was accepted, or lost data. Each case runs the real
# binary in a fresh scratch directory and checks the contract:
#   - exit code 1 (2 for usage errors), never a signal;
#   - stderr is exactly one line, `poslab: error: ...`, holding the expected text;
#   - nothing was written: every path of the scratch directory has the same type, link target,
#     size and modification time as before, so existing runs and checkpoints are untouched.
# A few cases were wrongly refused or crashed on valid input; they must succeed (`expect_ok`).
#
#   bash tests/bad_inputs/catalogue.sh build/poslab        (CTest: bad_inputs_catalogue)
set -uo pipefail
POSLAB=$(realpath "${1:?usage: catalogue.sh POSLAB}")
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
SCRATCH=$(mktemp -d /tmp/poslab-bad-inputs.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH" || exit 1
failures=0 cases=0

# The state of the working directory: every path with its type, link target, size and
# modification time (in nanoseconds: any write changes it).
snapshot() {
  find . -path ./.capture -prune -o -printf '%y %p %l %s %T@\n' | sort
}

# expect_error NAME EXPECTED_TEXT COMMAND...: the command must fail cleanly, writing nothing.
expect_error() {
  local name=$1 expected=$2; shift 2
  cases=$((cases + 1))
  mkdir -p .capture
  local before; before=$(snapshot)
  timeout 120 "$@" >.capture/out 2>.capture/err
  local code=$?
  local after; after=$(snapshot)
  local lines; lines=$(wc -l <.capture/err)
  local problem=""
  if [ "$code" -ne 1 ] && [ "$code" -ne 2 ]; then problem="exit code $code (1 or 2 expected)"
  elif [ "$code" -eq 1 ] && [ "$lines" -ne 1 ]; then problem="stderr has $lines lines, not 1"
  elif ! head -n 1 .capture/err | grep -q '^poslab\( report\| plot\)\?: \(usage \)\?error: '; then
    problem="stderr does not start with 'poslab: error:' (or 'poslab report: error:', 'poslab plot: error:')"
  elif ! grep -qF -- "$expected" .capture/err; then problem="stderr lacks '$expected'"
  elif [ "${ALLOW_WRITES:-0}" != 1 ] && [ "$before" != "$after" ]; then
    problem="files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -3 | tr '\n' ' ')"
  fi
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "FAIL $name: $problem"
    sed 's/^/    stderr: /' .capture/err | head -5
  else
    echo "ok   $name: $(head -c 160 .capture/err)"
  fi
}

# expect_ok NAME FILE COMMAND...: valid input, the command must succeed and write FILE.
expect_ok() {
  local name=$1 file=$2; shift 2
  cases=$((cases + 1))
  mkdir -p .capture
  timeout 120 "$@" >.capture/out 2>.capture/err
  local code=$?
  if [ "$code" -ne 0 ] || [ ! -e "$file" ]; then
    failures=$((failures + 1))
    echo "FAIL $name: exit code $code, $file $( [ -e "$file" ] && echo exists || echo missing)"
    sed 's/^/    stderr: /' .capture/err | head -5
  else
    echo "ok   $name: exit 0, wrote $file"
  fi
}

# --- Fixtures (made before the cases; they are part of the "before" snapshot) ---------------
seq 1 4000 >corpus.txt  # 18,893 bytes: validation split of about 1,900 tokens
cat >tiny.toml <<TOML
[model]
d_model = 8
n_layers = 1
n_heads = 2
d_inner = 16
[data]
path = "$SCRATCH/corpus.txt"
[train]
seq_len = 8
batch_size = 2
steps = 2
[eval]
batches = 1
TOML
: >empty.toml
# Self-Extend with W not a multiple of G, in a file: the error names file and line.
{ cat tiny.toml; printf '[encoding]\ntype = "rope"\nscaling = "self_extend"\noriginal_len = 8\nneighbor_window = 6\ngroup_size = 4\n'; } >self_extend_bad.toml
"$POSLAB" train --config tiny.toml --out finished >/dev/null 2>&1 || { echo "FAIL: cannot train the fixture run"; exit 1; }
mkdir killed && cp finished/config.toml finished/metrics.csv killed/  # a run killed mid-way
"$POSLAB" train --config tiny.toml --set encoding.type=rope --out finished_rope >/dev/null 2>&1 || { echo "FAIL: cannot train the rope fixture run"; exit 1; }
cp -r finished forged && cp -r finished nan
# forged: a 16 KB .npy whose header claims 536,870,912 floats (2 GiB)
{ printf '\x93NUMPY\x01\x00\x76\x00'
  printf '%-117s\n' "{'descr': '<f4', 'fortran_order': False, 'shape': (536870912,), }"; } \
  >forged/checkpoint/output.b.npy
head -c 16000 /dev/zero >>forged/checkpoint/output.b.npy
# nan: the same bytes with every float of one parameter replaced by a quiet NaN
/usr/bin/python3 - nan/checkpoint/output.b.npy <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
header = 10 + int.from_bytes(data[8:10], 'little')
open(sys.argv[1], 'wb').write(data[:header] + b'\x00\x00\xc0\x7f' * ((len(data) - header) // 4))
PY
mkdir linked && ln -s "$SCRATCH/corpus.txt" linked/metrics.csv  # a run dir whose metrics.csv is a link
awk 'BEGIN { printf "a"; for (i = 0; i < 60000; i++) printf ".a"; print " = 1" }' >dotted.toml
{ echo '[study]'; echo 'name = "big"'; echo '[sweep]'
  for k in train.seed train.steps train.warmup_steps train.log_every train.eval_every \
           train.eval_batches eval.batches model.n_layers model.d_inner memory.mem_len \
           train.seq_len train.batch_size eval.batch_size eval.seq_len train.max_position \
           model.vocab_size; do
    echo "\"$k\" = [$(seq -s, 1 16)]"
  done; } >grid.toml
{ echo '[study]'; echo 'name = "small"'; echo '[base]'; sed 's/^\[/[base./' tiny.toml
  echo '[sweep]'; echo '"train.seed" = [1]'; } >small_study.toml
{ cat small_study.toml; printf '[[variant]]\nname = "a"\nfrom = "b"\n[[variant]]\nname = "b"\nfrom = "a"\n'; } >cycle_study.toml
{ cat small_study.toml; printf '[[variant]]\nname = "base"\n[[variant]]\nname = "ft"\nfrom = "bsae"\n'; } >unknown_parent_study.toml
"$POSLAB" run small_study.toml --out study >/dev/null 2>&1 || { echo "FAIL: cannot run the fixture study"; exit 1; }
# A study on a corpus that is not there: [base] names it on a known line, a variant another.
sed "s|^path = .*|path = \"$SCRATCH/no_such_corpus.txt\"|" small_study.toml >missing_corpus.toml
missing_line=$(grep -n '^path = ' missing_corpus.toml | cut -d: -f1)
{ sed '/^\[sweep\]/,$d' small_study.toml; echo '[[variant]]'; echo 'name = "mine"'
  echo '[[variant]]'; echo 'name = "gone"'
  echo "set = { \"data.path\" = \"$SCRATCH/gone/corpus.txt\" }"; } >missing_variant.toml
rm study/summary.csv && mkdir study/summary.csv  # the summary cannot be written
T=(train --config tiny.toml)
# PoSE's target written in a file, below train.seq_len: the message names the file and line.
sed 's/^\[train\]$/[train]\npose_target_len = 4/' tiny.toml >pose_low.toml
pose_low_line=$(grep -n '^pose_target_len' pose_low.toml | cut -d: -f1)

# --- Crashes --------------------------------------------------------------------------------
expect_error crash_dotted_key "dotted key of more than 257 parts" "$POSLAB" train --config dotted.toml --out out
expect_error crash_dotted_key_set "dotted key of more than 257 parts" "$POSLAB" "${T[@]}" --out out --set "train.steps={$(awk 'BEGIN { printf "a"; for (i = 0; i < 60000; i++) printf ".a" }')=1}"
expect_ok    crash_threads_huge out_threads/eval.json "$POSLAB" "${T[@]}" --set train.threads=2147483647 --out out_threads
rm -rf out_threads
# --- Errors that left output behind ---------------------------------------------------------
expect_error size_mem_len "needs about" "$POSLAB" "${T[@]}" --set memory.mem_len=2147483647 --out out
expect_error size_seq_len "needs about" "$POSLAB" "${T[@]}" --set train.seq_len=2147483647 --out out
expect_error size_d_model "needs about" "$POSLAB" "${T[@]}" --set model.d_model=1073741824 --set model.n_heads=1 --out out
expect_error size_bench "bench (train.batch_size, train.seq_len, memory.mem_len) needs about" "$POSLAB" bench --steps 1 --set model.d_model=1073741824 --set model.n_heads=1
expect_error size_eval_override "needs about" "$POSLAB" eval --run finished --set model.vocab_size=2147483647
expect_error nonfinite_lr "train.lr must be a finite number, got inf" "$POSLAB" "${T[@]}" --set train.lr=inf --out out
expect_error nonfinite_init_std "model.init_std must be a finite number" "$POSLAB" "${T[@]}" --set model.init_std=nan --out out
expect_error learned_max_len "encoding.max_len (4) must be at least train.seq_len (8)" "$POSLAB" "${T[@]}" --set encoding.type=learned --set encoding.max_len=4 --out out
expect_error rope_factor_zero "encoding.factor must be a finite number > 0, got 0" "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.scaling=linear --set encoding.factor=0 --out out
expect_error rope_factor_nan "encoding.factor must be a finite number, got nan" "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.scaling=yarn --set encoding.factor=nan --out out
expect_error rope_original_len_zero "encoding.original_len must be set (>= 1" "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.scaling=yarn --set encoding.factor=4 --set encoding.original_len=0 --out out
expect_error rope_original_len_too_large "encoding.original_len must be in [0, 16777216]" "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.scaling=yarn --set encoding.factor=4 --set encoding.original_len=99999999 --out out
# Log-n scaling and LongRoPE (issue 36).
expect_error log_n_len_unset "encoding.log_n_len must be >= 2" "$POSLAB" "${T[@]}" --set encoding.type=alibi --set encoding.log_n=always --out out
expect_error longrope_list_length "encoding.short_factor has 2 factors; it needs one per rotated pair, d_rot / 2 = 8" "$POSLAB" "${T[@]}" --set model.d_model=32 --set model.n_heads=2 --set encoding.type=rope --set encoding.scaling=longrope --set encoding.factor=4 --set encoding.original_len=64 --set encoding.short_factor=1,2 --set encoding.long_factor=1,2 --out out
expect_error longrope_decreasing "encoding.long_factor must not decrease" "$POSLAB" "${T[@]}" --set model.d_model=32 --set model.n_heads=2 --set encoding.type=rope --set encoding.scaling=longrope --set encoding.factor=4 --set encoding.original_len=64 --set encoding.short_factor=1,1,1,1,1,1,1,1 --set encoding.long_factor=2,1,1,1,1,1,1,1 --out out
# Self-Extend, ReRoPE, leaky ReRoPE (issue 36): rope's two-map scalings.
SE=(--set encoding.type=rope --set encoding.original_len=8)
expect_error self_extend_window_not_multiple 'self_extend_bad.toml:18: encoding.neighbor_window (6) must be a multiple of encoding.group_size (4)' "$POSLAB" train --config self_extend_bad.toml --out out
expect_error self_extend_window_too_long "encoding.neighbor_window (8) must be < encoding.original_len (8)" "$POSLAB" "${T[@]}" "${SE[@]}" --set encoding.scaling=self_extend --set encoding.neighbor_window=8 --set encoding.group_size=4 --out out
expect_error rerope_window_too_long "encoding.rerope_window (8) must be < encoding.original_len (8)" "$POSLAB" "${T[@]}" "${SE[@]}" --set encoding.scaling=rerope --set encoding.rerope_window=8 --out out
expect_error leaky_rerope_slope "encoding.leaky_factor must be a finite number > 1" "$POSLAB" "${T[@]}" "${SE[@]}" --set encoding.scaling=leaky_rerope --set encoding.rerope_window=4 --set encoding.leaky_factor=1 --out out
expect_error self_extend_with_factor "encoding.factor has no effect with encoding.scaling = self_extend" "$POSLAB" "${T[@]}" "${SE[@]}" --set encoding.scaling=self_extend --set encoding.neighbor_window=4 --set encoding.group_size=2 --set encoding.factor=4 --out out
expect_error rerope_option_with_yarn "encoding.rerope_window is an option of rerope and leaky_rerope" "$POSLAB" "${T[@]}" "${SE[@]}" --set encoding.scaling=yarn --set encoding.factor=4 --set encoding.rerope_window=4 --out out
expect_error rope_factor_without_scaling "has no effect with encoding.scaling = none" "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.factor=4 --out out
# PoSE (issue 36): a target that does not extend, an encoding or setup it cannot apply to.
expect_error pose_target_below_len "pose_low.toml:$pose_low_line: train.pose_target_len (4): the PoSE target length must be above train.seq_len (8)" "$POSLAB" train --config pose_low.toml --set encoding.type=rope --out out
expect_error pose_no_positions "train.pose_target_len: encoding 'none' reads no positions" "$POSLAB" "${T[@]}" --set train.pose_target_len=32 --out out
expect_error pose_with_memory "set memory.mem_len = 0 (got 8)" "$POSLAB" "${T[@]}" --set encoding.type=rope --set train.pose_target_len=32 --set memory.mem_len=8 --out out
expect_error pose_not_lm "PoSE cuts its chunks from a text stream, for language models" "$POSLAB" "${T[@]}" --set encoding.type=rope --set train.pose_target_len=32 --set task.name=copy --out out
expect_error pose_and_randpos "PoSE and randomized positions (its RandPos baseline)" "$POSLAB" "${T[@]}" --set encoding.type=rope --set train.pose_target_len=32 --set train.randomized_positions=true --out out
expect_error pose_variant_name "train.pose_variant must be one of code, paper" "$POSLAB" "${T[@]}" --set encoding.type=rope --set train.pose_target_len=32 --set train.pose_variant=Paper --out out
expect_error pose_learned_table "encoding.max_len (16) must be at least train.pose_target_len (32)" "$POSLAB" "${T[@]}" --set encoding.type=learned --set encoding.max_len=16 --set train.pose_target_len=32 --out out
expect_error pose_corpus_too_small "PoSE reads windows of 5 x train.seq_len = 40 tokens" "$POSLAB" "${T[@]}" --set encoding.type=rope --set train.pose_target_len=32 --set train.batch_size=1000 --out out
expect_ok    pose_runs out_pose/eval.json "$POSLAB" "${T[@]}" --set encoding.type=rope --set encoding.scaling=linear --set encoding.factor=4 --set train.pose_target_len=32 --out out_pose
rm -rf out_pose
# LongRoPE's search (issue 36 item 1): a run it cannot search, a target that does not extend.
expect_error longrope_search_not_rope "its encoding is 'none'; the search rescales rope's pairs" "$POSLAB" longrope-search --run finished --target 32 --out out_search
expect_error longrope_search_target "longrope-search --target 8: must be above the run's train.seq_len (8)" "$POSLAB" longrope-search --run finished_rope --target 8 --out out_search
expect_error longrope_search_seed "unknown seed 'llama3' (pi, ntk or yarn)" "$POSLAB" longrope-search --run finished_rope --target 32 --out out_search --seeds pi,llama3
expect_error longrope_search_cap "--cap" "$POSLAB" longrope-search --run finished_rope --target 32 --out out_search --cap wide
expect_error longrope_search_out_taken "already holds files" "$POSLAB" longrope-search --run finished_rope --target 32 --out finished
# Issue 51: --out checked before the search (a file, a path under a file, a device), the options
# that need no run checked first, a negative seed refused.
expect_error longrope_search_out_file "longrope-search --out tiny.toml: is a file, not a directory" "$POSLAB" longrope-search --run finished_rope --target 32 --out tiny.toml
expect_error longrope_search_out_under_file "longrope-search --out tiny.toml/x: cannot create the directory" "$POSLAB" longrope-search --run finished_rope --target 32 --out tiny.toml/x
expect_error longrope_search_out_device "longrope-search --out /dev/null: is a device or special file" "$POSLAB" longrope-search --run finished_rope --target 32 --out /dev/null
expect_error longrope_search_parents "longrope-search --parents 100: more than --population (64)" "$POSLAB" longrope-search --run finished_rope --target 32 --out out_search --parents 100
expect_error longrope_search_seed_negative "--seed" "$POSLAB" longrope-search --run finished_rope --target 32 --out out_search --seed -1
expect_error randomized_max_position "train.max_position (4) must be at least" "$POSLAB" "${T[@]}" --set train.randomized_positions=true --set train.max_position=4 --out out
expect_error escaped_nul_out_dir 'it may not hold control characters' "$POSLAB" "${T[@]}" --set 'out_dir="out\u0000x"'
expect_error length_factor_overflow "more positions than an int holds" "$POSLAB" "${T[@]}" --set 'eval.length_factors=[1e300]' --out out
# Passkey retrieval (issue 25): a grid or a training mix that cannot make its instances.
expect_error passkey_length_short "x 2 = 16 bytes is shorter than a passkey instance with no filler (103 bytes" "$POSLAB" "${T[@]}" --set 'eval.passkey_length_factors=[2]' --out out
expect_error passkey_factor_overflow "more positions than an int holds" "$POSLAB" "${T[@]}" --set 'eval.passkey_length_factors=[1e300]' --out out
expect_error passkey_depth_range "eval.passkey_depths[1] must be in [0, 1], got 2" "$POSLAB" "${T[@]}" --set train.seq_len=128 --set 'eval.passkey_length_factors=[1]' --set 'eval.passkey_depths=[0, 2]' --out out
expect_error passkey_depths_empty "eval.passkey_depths is empty" "$POSLAB" "${T[@]}" --set train.seq_len=128 --set 'eval.passkey_length_factors=[1]' --set 'eval.passkey_depths=[]' --out out
expect_error passkey_filler_name "eval.passkey_filler must be one of corpus, sentence" "$POSLAB" "${T[@]}" --set eval.passkey_filler=lorem --out out
expect_error passkey_not_lm "passkey retrieval is for language models" "$POSLAB" "${T[@]}" --set task.name=copy --set train.seq_len=128 --set 'eval.passkey_length_factors=[1]' --out out
expect_error passkey_fraction_short "train.passkey_fraction: train.seq_len (8) is shorter than a passkey instance" "$POSLAB" "${T[@]}" --set train.passkey_fraction=0.1 --out out
expect_error passkey_format_name "eval.passkey_format must be one of paper, compact" "$POSLAB" "${T[@]}" --set eval.passkey_format=short --out out
expect_error passkey_compact_short "x 2 = 16 bytes is shorter than a passkey instance with no filler (27 bytes in the compact format" "$POSLAB" "${T[@]}" --set eval.passkey_format=compact --set 'eval.passkey_length_factors=[2]' --out out
expect_error passkey_filler_longer_than_split "which holds only" "$POSLAB" "${T[@]}" --set train.seq_len=128 --set 'eval.passkey_length_factors=[20]' --out out
# Sliding-window evaluation (issue 35): a stride that cannot move a window.
expect_error stride_zero "eval.stride = 0: a sliding window must move by at least 1 byte" "$POSLAB" "${T[@]}" --set eval.stride=0 --out out
expect_error stride_above_length "eval.stride (9) is above the shortest evaluated length, train.seq_len = 8 bytes" "$POSLAB" "${T[@]}" --set eval.stride=9 --out out
expect_error stride_not_lm "sliding-window evaluation reads a text stream" "$POSLAB" "${T[@]}" --set task.name=copy --set eval.stride=4 --out out
# Loss by copy distance (issue 35): a match shorter than one byte, or a task that is not text.
# (Its buckets are powers of two up to each evaluated length, never configured: none can lie
# beyond it.)
expect_error copy_min_match_zero "eval.copy_min_match must be >= 1, got 0" "$POSLAB" "${T[@]}" --set eval.copy_distance=true --set eval.copy_min_match=0 --out out
expect_error copy_distance_not_lm "eval.copy_distance: the loss by copy distance is for language models" "$POSLAB" "${T[@]}" --set task.name=copy --set eval.copy_distance=true --out out
# Streaming cache (issue 36 item 5): an absolute encoding, a cache as long as the stream, a
# negative or empty setting, a stream the split cannot hold.
{ cat tiny.toml; printf 'stream_length = 200\n[encoding]\ntype = "sinusoidal"\n'; } >stream_absolute.toml
stream_line=$(grep -n '^stream_length' stream_absolute.toml | cut -d: -f1)
expect_error stream_absolute_encoding "stream_absolute.toml:$stream_line: eval.stream_length: the streaming cache needs a relative encoding, and 'sinusoidal' is absolute" "$POSLAB" train --config stream_absolute.toml --out out
expect_error stream_learned_encoding "'learned' is absolute" "$POSLAB" "${T[@]}" --set encoding.type=learned --set eval.stream_length=200 --out out
expect_error stream_cache_beyond_stream "eval.stream_sinks + eval.stream_recent = 4 + 3 reaches beyond the stream (eval.stream_length = 8)" "$POSLAB" "${T[@]}" --set eval.stream_length=8 --out out
expect_error stream_sinks_negative "eval.stream_sinks must be >= 0" "$POSLAB" "${T[@]}" --set eval.stream_length=200 --set eval.stream_sinks=-1 --out out
expect_error stream_recent_none_left "means train.seq_len - 1 - eval.stream_sinks = 0 recent tokens" "$POSLAB" "${T[@]}" --set eval.stream_length=200 --set eval.stream_sinks=7 --out out
expect_error stream_modes_empty "eval.stream_modes is empty" "$POSLAB" "${T[@]}" --set eval.stream_length=200 --set 'eval.stream_modes=[]' --out out
expect_error stream_modes_twice "eval.stream_modes names 'sinks' twice" "$POSLAB" "${T[@]}" --set eval.stream_length=200 --set 'eval.stream_modes=["sinks","sinks"]' --out out
expect_error stream_not_lm "the streaming evaluation reads a text stream" "$POSLAB" "${T[@]}" --set task.name=copy --set eval.stream_length=200 --out out
expect_error stream_longer_than_split "eval.stream_length = 100000 is longer than the valid split" "$POSLAB" "${T[@]}" --set eval.stream_length=100000 --out out
expect_error eval_stream_no_length "--stream: eval.stream_length is 0 in the run's config" "$POSLAB" eval --run finished_rope --stream
expect_error eval_stream_absolute "'sinusoidal' is absolute" "$POSLAB" eval --run finished --stream --set encoding.type=sinusoidal --set eval.stream_length=200
expect_ok    eval_stream_runs finished_rope/eval_stream.csv "$POSLAB" eval --run finished_rope --stream --set eval.stream_length=200
rm -f finished_rope/eval_stream.csv finished_rope/eval_stream.json
# --- Accepted bad input ---------------------------------------------------------------------
expect_error nonfinite_eps "train.eps must be a finite number" "$POSLAB" "${T[@]}" --set train.eps=inf --out out
expect_error option_beyond_int32 "encoding.clip_k must be in [-2147483648, 2147483647] to fit its C++ type" "$POSLAB" "${T[@]}" --set encoding.type=shaw --set encoding.clip_k=4294967296 --out out
expect_error study_grid_overflow "the sweep has more than 100000 runs" "$POSLAB" run grid.toml --out grid_out
expect_error eval_longer_than_split "is too small for one batch" "$POSLAB" "${T[@]}" --set eval.seq_len=1500 --out out
expect_error config_too_large "a config or study file may have at most 1048576" "$POSLAB" train --config /dev/zero --out out
expect_error study_missing_corpus "missing_corpus.toml:$missing_line: in [base]: data.path = \"$SCRATCH/no_such_corpus.txt\": does not exist" "$POSLAB" run missing_corpus.toml --out missing_out
expect_error study_missing_corpus_dry_run "missing_corpus.toml:$missing_line: in [base]: data.path" "$POSLAB" run missing_corpus.toml --out missing_out --dry-run
expect_error study_missing_corpus_variant "missing_variant.toml:$(grep -n '^set = ' missing_variant.toml | cut -d: -f1): in variant 'gone': data.path" "$POSLAB" run missing_variant.toml --out missing_out
# --- Rejected good input --------------------------------------------------------------------
expect_ok    empty_config_is_defaults out_empty/eval.json "$POSLAB" train --config empty.toml --set model.d_model=8 --set model.n_heads=2 --set model.n_layers=1 --set model.d_inner=16 --set train.seq_len=8 --set train.batch_size=2 --set train.steps=1 --set eval.batches=1 --set "data.path=$SCRATCH/corpus.txt" --out out_empty
rm -rf out_empty
# --- Checkpoints ----------------------------------------------------------------------------
expect_error checkpoint_forged_header "parameter 'output.b': the file has shape [536870912], the manifest [256]" "$POSLAB" eval --run forged
expect_error checkpoint_nan "parameter 'output.b' holds a non-finite value (nan" "$POSLAB" eval --run nan
expect_error eval_impossible_setting "needs about" "$POSLAB" eval --run finished --seq-len 2000000
# --- Fine-tuning and studies in stages (issue 25) --------------------------------------------
expect_error finetune_shape "parameter 'embedding' has shape [256, 8] in the parent but [256, 16] in this run" "$POSLAB" "${T[@]}" --init-from finished --set model.d_model=16 --out out
expect_error finetune_new_parameter "has no parameter 'learned.U' (this run has it, [1024, 8])" "$POSLAB" "${T[@]}" --init-from finished --set encoding.type=learned --out out
expect_error finetune_unfinished_parent "train.init_from = killed: not a finished run (no eval.json)" "$POSLAB" "${T[@]}" --init-from killed --out out
expect_error finetune_missing_parent "train.init_from = nowhere: no such run directory" "$POSLAB" "${T[@]}" --init-from nowhere --out out
expect_error finetune_corrupt_parent "parameter 'output.b' holds a non-finite value" "$POSLAB" "${T[@]}" --init-from nan --out out
expect_error study_stage_cycle "cycle_study.toml:21: variants start from each other in a cycle: a from b from a" "$POSLAB" run cycle_study.toml --out cycle_out
expect_error study_unknown_parent "unknown_parent_study.toml:23: variant 'ft' has from = \"bsae\", which is not a variant of this study (did you mean 'base'?)" "$POSLAB" run unknown_parent_study.toml --out unknown_out
# --- Studies in stages whose children cannot start from their parents (issue 32) -------------
{ cat small_study.toml; printf '[[variant]]\nname = "base"\n[[variant]]\nname = "wide"\nfrom = "base"\nset = { "model.d_model" = 16 }\n'; } >shape_study.toml
{ cat small_study.toml; printf '[[variant]]\nname = "base"\n[[variant]]\nname = "ft"\nfrom = ""\n'; } >empty_from_study.toml
shape_line=$(grep -n '^from = "base"' shape_study.toml | cut -d: -f1)
expect_error study_stage_shape "shape_study.toml:$shape_line: variant 'wide' (from = \"base\"): run 'wide,train.seed=1' cannot start from run 'base,train.seed=1': parameter 'embedding' has shape [256, 8] in the parent but [256, 16] in this run" "$POSLAB" run shape_study.toml --out shape_out
expect_error study_stage_shape_dry_run "cannot start from run 'base,train.seed=1'" "$POSLAB" run shape_study.toml --out shape_out --dry-run
expect_error study_stage_shape_export "cannot start from run 'base,train.seed=1'" "$POSLAB" run shape_study.toml --out shape_out --export slurm
expect_error study_stage_empty_from "empty_from_study.toml:$(grep -n '^from = ""' empty_from_study.toml | cut -d: -f1): variant 'from' is empty" "$POSLAB" run empty_from_study.toml --out empty_from_out --dry-run

# --- Where report and explore write: never over what they did not make (issue 32) ----------
"$POSLAB" run small_study.toml --out site_study >/dev/null 2>&1 || { echo "FAIL: cannot run the site fixture study"; exit 1; }
mkdir mine && echo 'chapter 1' >mine/thesis.tex
echo 'notes' >notes.txt
expect_error report_out_is_input "--out site_study is the input site_study itself" "$POSLAB" report site_study --out site_study
expect_error report_out_holds_input "--out . holds the input site_study" "$POSLAB" report site_study --out .
expect_error report_out_inside_input "--out site_study/runs is inside the input site_study" "$POSLAB" report site_study --out site_study/runs
expect_error report_out_file "--out notes.txt is a file" "$POSLAB" report site_study --out notes.txt
expect_error report_out_foreign_dir "--out mine holds files it did not make (thesis.tex)" "$POSLAB" report site_study --out mine
expect_error explore_out_is_run "--out finished is the input finished itself" "$POSLAB" explore finished --out finished
expect_error explore_out_inside_run "--out finished/checkpoint is inside the input finished" "$POSLAB" explore finished --out finished/checkpoint
expect_error explore_out_file "--out notes.txt is a file" "$POSLAB" explore finished --out notes.txt
expect_error explore_out_foreign_dir "--out mine holds files it did not make (thesis.tex)" "$POSLAB" explore finished --out mine
# A site the command wrote before is replaced (twice: the second finds the first's marker).
expect_ok    report_out_again site_report/.poslab-report "$POSLAB" report site_study --out site_report
expect_ok    report_out_again_2 site_report/.poslab-report "$POSLAB" report site_study --out site_report
expect_ok    explore_out_again site_explorer/.poslab-explorer "$POSLAB" explore finished --texts 1 --factors 1 --out site_explorer
expect_ok    explore_out_again_2 site_explorer/.poslab-explorer "$POSLAB" explore finished --texts 1 --factors 1 --out site_explorer
expect_error explore_out_report "--out site_report holds what poslab report wrote" "$POSLAB" explore finished --out site_report
# A summary.csv report.py cannot read: one line naming the file, nothing written.
for k in empty binary latin1 nokind ragged zero; do cp -r site_study "bad_$k"; done
: >bad_empty/summary.csv
printf 'study,run,kind\ns,\x00\x01\x02,main\n' >bad_binary/summary.csv
printf 'study,run,kind\ncaf\xe9,a,main\n' >bad_latin1/summary.csv
printf 'study,run,loss\ns,a,1.5\n' >bad_nokind/summary.csv
printf 'study,run,kind\ns,a,main,1,2\ns,b\n' >bad_ragged/summary.csv
ln -sf /dev/zero bad_zero/summary.csv
expect_error report_summary_dir "study/summary.csv is not a regular file" "$POSLAB" report study
expect_error report_summary_empty "bad_empty/summary.csv is empty" "$POSLAB" report bad_empty
expect_error report_summary_binary "bad_binary/summary.csv holds NUL bytes" "$POSLAB" report bad_binary
expect_error report_summary_latin1 "bad_latin1/summary.csv is not UTF-8 text (byte 18)" "$POSLAB" report bad_latin1
expect_error report_summary_no_kind "bad_nokind/summary.csv has no column 'kind'" "$POSLAB" report bad_nokind
expect_error report_summary_ragged "bad_ragged/summary.csv is not a CSV table poslab wrote: line 2 has 5 fields, the header 3" "$POSLAB" report bad_ragged
expect_error report_summary_dev_zero "bad_zero/summary.csv is not a regular file" "$POSLAB" report bad_zero
# poslab plot reads summary.csv with the same checks (it printed a pandas traceback).
expect_error plot_summary_empty "bad_empty/summary.csv is empty" "$POSLAB" plot bad_empty
expect_error plot_summary_binary "bad_binary/summary.csv holds NUL bytes" "$POSLAB" plot bad_binary
expect_error plot_summary_ragged "bad_ragged/summary.csv is not a CSV table poslab wrote: line 2 has 5 fields, the header 3" "$POSLAB" plot bad_ragged
expect_error plot_summary_no_kind "bad_nokind/summary.csv has no column 'kind'" "$POSLAB" plot bad_nokind

# --- A run another process is training: waited for, then its outcome (issue 32) -------------
# This shell holds the directory's lock, as a running `poslab train` would, and lets it go
# after a second: a finished run is then this command's success, an unfinished one its error.
wait_case() {  # wait_case DIR: hold DIR's lock for 1.5 s in the background
  ( exec 8<"$1" && flock -n 8 && sleep 1.5 ) & sleep 0.3
}
cp -r finished busy_done && cp -r killed busy_killed
wait_case busy_done
expect_ok    wait_for_trainer_done busy_done/eval.json "$POSLAB" "${T[@]}" --out busy_done --resume --wait-for-trainer 30
wait; grep -q "is being trained by a process holding its lock; waiting" .capture/out ||
  { failures=$((failures + 1)); echo "FAIL wait_for_trainer_done: it did not say it waited"; }
wait_case busy_killed
expect_error wait_for_trainer_unfinished "busy_killed: the process that was training it ended before the run finished" "$POSLAB" "${T[@]}" --out busy_killed --resume --wait-for-trainer 30
wait
( exec 8<busy_killed && flock -n 8 && sleep 3 ) & sleep 0.3
expect_error wait_for_trainer_timeout "busy_killed is still being trained by a process holding its lock after 1 s of waiting" "$POSLAB" "${T[@]}" --out busy_killed --resume --wait-for-trainer 1
wait
expect_error wait_for_trainer_needs_resume "--wait-for-trainer requires --resume" "$POSLAB" "${T[@]}" --out busy_killed --wait-for-trainer 1

# --- Faults and lost data -------------------------------------------------------------------
expect_error rerun_killed_run "killed already holds an unfinished run" "$POSLAB" "${T[@]}" --out killed
expect_error other_config_over_finished "finished already holds a finished run" "$POSLAB" "${T[@]}" --set train.seed=7 --out finished
expect_error metrics_symlink "linked already holds an unfinished run (metrics.csv)" "$POSLAB" "${T[@]}" --out linked
mkdir busy
exec 9<busy && flock -n 9  # this shell holds the lock a running `poslab train` would hold
expect_error two_writers "busy is being written by another poslab process" "$POSLAB" "${T[@]}" --out busy
exec 9<&-
rmdir busy
# --- Exit 0 on failure ----------------------------------------------------------------------
# (a study rewrites its study.toml and tables on every invocation: here only the exit code and
# the error line are the contract)
ALLOW_WRITES=1 expect_error summary_not_written "cannot write the summary" "$POSLAB" run small_study.toml --out study
# --- Injection ------------------------------------------------------------------------------
expect_error newline_in_out_export "--out: a path may not hold control characters" "$POSLAB" run small_study.toml --export slurm --out "$(printf 'x\nrm -rf /')"
expect_error space_in_out_slurm "contains a space or a control character" "$POSLAB" run small_study.toml --export slurm --out "with space"
expect_error newline_in_study_path "a path may not hold control characters" "$POSLAB" run "$(printf 'small_study.toml\nx')" --export slurm
expect_error newline_in_train_out "--out: a path may not hold control characters" "$POSLAB" "${T[@]}" --out "$(printf 'x\ny')"
expect_error newline_in_set "--set train.steps=2\\n3" "$POSLAB" "${T[@]}" --out out --set "$(printf 'train.steps=2\n3')"

# --- A runner killed with -9 leaves no training behind -------------------------------------
cases=$((cases + 1))
sed 's/^steps = 2$/steps = 1000000/' small_study.toml >long_study.toml
"$POSLAB" run long_study.toml --out long >/dev/null 2>&1 & runner=$!
child=""
for _ in $(seq 1 100); do  # the runner's children, from /proc (no procps needed)
  child=$(cat /proc/"$runner"/task/*/children 2>/dev/null | xargs)
  [ -n "$child" ] && break; sleep 0.1
done
kill -9 "$runner"; wait "$runner" 2>/dev/null
alive=""
for _ in $(seq 1 50); do
  alive=""; for c in $child; do kill -0 "$c" 2>/dev/null && alive="$alive $c"; done
  [ -z "$alive" ] && break; sleep 0.1
done
if [ -z "$child" ] || [ -n "$alive" ]; then
  failures=$((failures + 1))
  echo "FAIL runner_killed: child '${child}' of the killed runner${alive:+ still alive:$alive}"
  for c in $alive; do kill "$c"; done
else
  echo "ok   runner_killed: the training (pid $child) died with its runner"
fi

echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
