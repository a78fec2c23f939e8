#!/usr/bin/env python3
"""A small, seeded fuzzer of poslab configs (issue 16): it must never crash, hang or leave
output behind.

Each case starts from a tiny config that trains in a fraction of a second and applies one to
three random mutations: a key set to an extreme or ill-typed value (in the file or with --set),
another encoding or task with one of its options, a line of broken TOML, or bytes changed at
random. It then runs `poslab train --config CASE.toml --out OUT` under a 4 GiB address-space
limit (poslab's memory check reads it, so anything bigger must be refused, not allocated) and
checks:
  - the process exited with 0, 1 or 2: no signal (SIGSEGV, SIGABRT), no timeout (a hang);
  - on failure: stderr starts with `poslab: error:` (or `poslab: usage error:`), is a single
    line for exit code 1, and OUT does not exist, unless training diverged (found only while
    training: OUT then holds an unfinished run, never an eval.json);
  - on success: OUT/eval.json exists and holds a numeric loss;
  - nothing else appeared in the scratch directory.
The case stream depends only on the seed; --budget stops early (the cases run are printed), so
a failure is reproduced with the same --seed and --cases.

  /usr/bin/python3 tests/bad_inputs/fuzz_configs.py build/poslab --seed 16 --cases 60 --budget 60
"""
import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

TINY = """[model]
d_model = 8
n_layers = 1
n_heads = 2
d_inner = 16
[data]
path = "{corpus}"
[train]
seq_len = 8
batch_size = 2
steps = 2
threads = 1
[eval]
batches = 1
"""

KEYS = [
    "model.vocab_size", "model.d_model", "model.n_layers", "model.n_heads", "model.d_inner",
    "model.activation", "model.pre_ln", "model.tie_embeddings", "model.init_std",
    "memory.mem_len", "memory.same_length", "memory.continue_positions", "memory.half_loss",
    "data.path", "data.include", "data.exclude", "data.valid_fraction", "data.test_fraction",
    "data.split", "data.separator",
    "train.seq_len", "train.batch_size", "train.steps", "train.lr", "train.min_lr_ratio",
    "train.warmup_steps", "train.weight_decay", "train.beta1", "train.beta2", "train.eps",
    "train.grad_clip", "train.seed", "train.log_every", "train.eval_every", "train.eval_batches",
    "train.threads", "train.randomized_positions", "train.max_position", "train.init_from",
    "train.pose_target_len", "train.pose_variant",
    "train.init_optimizer",
    "eval.seq_len", "eval.mem_len", "eval.length_factors", "eval.memory_factors", "eval.batches",
    "eval.split", "eval.batch_size", "eval.gate_threshold",
    "out_dir", "encoding.type", "task.name", "nosuch.key", "model.nosuch",
]
ENCODINGS = {
    "none": [], "sinusoidal": [],
    "learned": ["max_len", "init_std"],
    "shaw": ["clip_k", "keys", "values", "per_head", "naive", "init_std"],
    "transformer_xl": ["clamp_len", "untie_uv", "term_a", "term_b", "term_c", "term_d", "naive",
                       "init_std"],
    "t5_bias": ["num_buckets", "max_distance", "bidirectional", "init_std"],
    "rope": ["base", "fraction", "scaling", "factor", "original_len", "attention_factor"],
    "xpos": ["base", "gamma", "scale_base"], "alibi": [],
    "kerple": ["shared", "r1_init", "r2_init"],
    "fire": ["hidden", "c_init", "threshold_init", "learn_threshold", "shared", "naive"],
    "deberta": ["k", "c2p", "p2c", "naive", "init_std"],
    "example_distance_bias": ["max_distance", "init_std"],
}
TASKS = {
    "lm": [], "copy": ["alphabet"], "reverse": ["alphabet"], "sort": ["alphabet"],
    "assoc_recall": ["keys", "key_len", "values"], "induction": ["alphabet", "block"],
    "long_range": ["gap", "block", "alphabet"],
}
# No value here may make a valid run long: the large integers are refused by the memory check
# (under the 4 GiB limit) or by a range; small ones keep the run tiny. No string names a real
# directory (data.path = "/" would read the whole disk).
INTEGERS = ["0", "1", "2", "3", "4", "7", "8", "-1", "2147483647", "2147483648", "4294967296",
            "-2147483649", "9223372036854775807", "-9223372036854775808"]
FLOATS = ["0.0", "-0.0", "1e-320", "1e-3", "0.5", "0.999999", "1.0", "1.5", "1e300", "-1e300",
          "inf", "-inf", "nan", "+nan"]
STRINGS = ['""', '"x"', '"none"', '"shaw"', '"yarn"', '"learned"', '"lm"', '"copy"', '"test"', '"valid"',
           '"file"', '"gelu"', '"\\u0000"', '"a\\nb"', '"a\\tb"', '"' + "a" * 5000 + '"',
           '"\\u00e9\\u4e2d"']
OTHERS = ["true", "false", "[]", "[1, 2]", "[1e300]", "[0.5, 2]", "[-1]", '["a"]', "[[1]]",
          '["*.txt", ""]', "{a = 1}", "1979-05-27T07:32:00Z", "07:32:00", "[nan]", "[inf]"]
BROKEN = ["[model", "= 1", "a = ", "[[model]]", 'x = "unterminated', "model = 1",
          "[model]\nd_model = 8\n[model]", "a.b = 1\na = 2", "[train]\nseq_len = 1\nseq_len = 2",
          "\x00", "\xff\xfe", "a = 1 2", "[encoding]\ntype = 7", "[" + "a." * 300 + "a]",
          "x = " + "[" * 300 + "]" * 300, "x = {" + "a.a." * 200 + "a = 1}", "'''", '"""']


PLAUSIBLE = ["0", "1", "2", "3", "4", "8", "16", "0.1", "0.5", "true", "false"]


def value(rng):
    pool = rng.choice([PLAUSIBLE, PLAUSIBLE, INTEGERS, INTEGERS, FLOATS, STRINGS, OTHERS])
    return rng.choice(pool)


def set_in_text(text, key, val):
    """`key = val` in its section of the TOML text (appended as a new [section] table, which
    TOML may reject as a duplicate table: also a case worth having)."""
    if "." not in key:
        return f"{key} = {val}\n" + text
    section, name = key.split(".", 1)
    marker = f"[{section}]\n"
    if marker in text:
        return text.replace(marker, marker + f"{name} = {val}\n", 1)
    return text + f"\n[{section}]\n{name} = {val}\n"


def make_case(rng, corpus):
    text = TINY.format(corpus=corpus)
    overrides = []
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.55:
            key, val = rng.choice(KEYS), value(rng)
            if rng.random() < 0.5:
                text = set_in_text(text, key, val)
            else:
                overrides.append(f"{key}={val}")
        elif op < 0.80:
            if rng.random() < 0.5:
                name, options = rng.choice(sorted(ENCODINGS.items()))
                section, selector = "encoding", "type"
            else:
                name, options = rng.choice(sorted(TASKS.items()))
                section, selector = "task", "name"
            text = set_in_text(text, f"{section}.{selector}", f'"{name}"')
            if options:
                text = set_in_text(text, f"{section}.{rng.choice(options)}", value(rng))
        elif op < 0.90:
            lines = text.split("\n")
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(BROKEN))
            text = "\n".join(lines)
        else:
            chars = list(text)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(chars))
                kind = rng.random()
                if kind < 0.4:
                    chars[i] = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32),
                                               rng.randrange(128, 256)]))
                elif kind < 0.7:
                    del chars[i]
                else:
                    chars.insert(i, rng.choice('[]="\'.#\n\\{},0123456789'))
            text = "".join(chars)
    return text, overrides


def limit_memory():
    limit = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def check(poslab, scratch, index, text, overrides, timeout):
    case_dir = os.path.join(scratch, f"case{index}")
    os.mkdir(case_dir)
    config = os.path.join(case_dir, "case.toml")
    with open(config, "w", encoding="latin-1") as f:
        f.write(text)
    out = os.path.join(case_dir, "out")
    args = [poslab, "train", "--config", config, "--out", out]
    for o in overrides:
        args += ["--set", o]
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS="1")
    try:
        r = subprocess.run(args, cwd=case_dir, env=env, capture_output=True, timeout=timeout,
                           preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout} s (a hang)", None
    err = r.stderr.decode("utf-8", "replace")
    lines = err.splitlines()
    left = sorted(set(os.listdir(case_dir)) - {"case.toml", "out"})
    if r.returncode < 0:
        return f"killed by signal {-r.returncode}", err
    if r.returncode not in (0, 1, 2):
        return f"exit code {r.returncode}", err
    if left:
        return f"wrote {left} next to the config", err
    if r.returncode == 0:
        try:
            with open(os.path.join(out, "eval.json")) as f:
                loss = json.load(f)["loss"]
        except (OSError, ValueError, KeyError) as e:
            return f"exit 0 without a readable eval.json ({e})", err
        if not isinstance(loss, (int, float)):
            return f"exit 0 with evaluation loss {loss!r}", err
        shutil.rmtree(case_dir)
        return None, "ok"
    # A valid config can still diverge: that is found while training, after the run directory
    # was made, and leaves an unfinished run (config.toml, metrics.csv, never eval.json).
    diverged = len(lines) == 1 and ("training diverged" in lines[0] or
                                    "the main evaluation gave no loss" in lines[0])
    if os.path.lexists(out) and not diverged:
        return f"exit {r.returncode} but {out} was written", err
    if diverged and os.path.lexists(os.path.join(out, "eval.json")):
        return "a diverged run has an eval.json (it looks finished)", err
    if not lines or not (lines[0].startswith("poslab: error: ") or
                         lines[0].startswith("poslab: usage error: ")):
        return "stderr does not start with 'poslab: error:'", err
    if r.returncode == 1 and len(lines) != 1:
        return f"{len(lines)} lines on stderr", err
    shutil.rmtree(case_dir)
    return None, lines[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("poslab")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds; stop early after")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--verbose", action="store_true")
    a = parser.parse_args()
    poslab = os.path.realpath(a.poslab)
    rng = random.Random(a.seed)
    scratch = tempfile.mkdtemp(prefix="poslab-fuzz-")
    corpus = os.path.join(scratch, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(str(i) for i in range(1, 4001)) + "\n")
    start, failures, ran, outcomes = time.monotonic(), 0, 0, {"ok": 0, "error": 0}
    try:
        for index in range(a.cases):
            text, overrides = make_case(rng, corpus)  # drawn even if the budget stops us
            if time.monotonic() - start > a.budget:
                break
            problem, detail = check(poslab, scratch, index, text, overrides, a.timeout)
            ran += 1
            if problem:
                failures += 1
                print(f"FAIL case {index} (seed {a.seed}): {problem}")
                print("  --set " + " --set ".join(overrides) if overrides else "  (no --set)")
                print("  config: " + repr(text[:600]))
                if detail:
                    print("  stderr: " + detail.strip()[:600])
            else:
                outcomes["ok" if detail == "ok" else "error"] += 1
                if a.verbose:
                    print(f"case {index}: {detail[:150]}")
    finally:
        if failures == 0:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"failing cases kept in {scratch}")
    print(f"fuzz seed {a.seed}: {ran} of {a.cases} cases in {time.monotonic() - start:.1f} s "
          f"({outcomes['ok']} trained, {outcomes['error']} refused cleanly), {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
