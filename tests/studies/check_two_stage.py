"""The two-stage smoke study of issue 25, run and checked (CTest two_stage_smoke):

    /usr/bin/python3 tests/studies/check_two_stage.py build/poslab

tests/studies/two_stage.toml trains rope at 32 bytes (stage 1), then fine-tunes each seed's model
at 64 with YaRN and reads it zero-shot with YaRN (stage 2, `from = "train32"`). Checked here:
the stage-2 runs start from their own seed's parent (summary's parent column, init_from.json,
eval.json), the zero-shot child keeps the parent's parameters bit for bit while its scaling
changes the loss, the fine-tuned child changes them, every run has its 1x/2x/4x losses and its
passkey cells, a second `poslab run` finds everything done (resume across stages), and `poslab
plot` draws the two-stage figures and pools each stage-2 variant's seeds in summary_ci.csv.
"""
import csv
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
STUDY = os.path.join(HERE, "two_stage.toml")
problems = []


def check(condition, message):
    if not condition:
        problems.append(message)


def rows_of(summary, run, kind):
    return [r for r in summary if r["run"] == run and r["kind"] == kind]


def main():
    poslab = os.path.abspath(sys.argv[1])
    out = os.path.join(tempfile.mkdtemp(prefix="poslab-two-stage."), "results")
    start = time.monotonic()
    first = subprocess.run([poslab, "run", STUDY, "--jobs", "2", "--out", out],
                           capture_output=True, text=True)
    seconds = time.monotonic() - start
    if first.returncode != 0:
        print(first.stdout, first.stderr)
        sys.exit("two_stage_smoke: poslab run failed")
    print(f"two_stage_smoke: 6 runs in {seconds:.1f} s")

    with open(os.path.join(out, "summary.csv")) as f:
        summary = list(csv.DictReader(f))
    runs = {r["run"] for r in summary}
    check(len(runs) == 6, f"expected 6 runs, found {sorted(runs)}")
    for seed in (1, 2):
        parent = f"train32,train.seed={seed}"
        parent_dir = os.path.join(out, "runs", f"train32__train.seed-{seed}")
        check(all(r["parent"] == "" for r in summary if r["run"] == parent),
              f"{parent}: a first-stage run has a parent")
        parent_main = rows_of(summary, parent, "length")
        for child, steps in ((f"yarn64,train.seed={seed}", 20),
                             (f"yarn_zero_shot,train.seed={seed}", 0)):
            child_dir = os.path.join(out, "runs", child.replace(",", "__").replace("=", "-"))
            check(all(r["parent"] == parent for r in summary if r["run"] == child),
                  f"{child}: parent column is not {parent}")
            with open(os.path.join(child_dir, "init_from.json")) as f:
                record = json.load(f)
            with open(os.path.join(parent_dir, "config.toml"), "rb") as f:
                parent_config_hash = hashlib.sha256(f.read()).hexdigest()
            check(os.path.samefile(record["absolute_path"], parent_dir),
                  f"{child}: init_from.json names {record['absolute_path']}, not its parent")
            check(record["config_sha256"] == parent_config_hash,
                  f"{child}: recorded parent config hash differs from sha256(config.toml)")
            with open(os.path.join(child_dir, "eval.json")) as f:
                evaluation = json.load(f)
            check(os.path.samefile(evaluation.get("fine_tuned_from", "/nonexistent"), parent_dir),
                  f"{child}: eval.json's fine_tuned_from is not the parent")
            with open(os.path.join(child_dir, "config.toml"), "rb") as f:
                encoding = tomllib.load(f)["encoding"]
            check(encoding["type"] == "rope" and encoding.get("scaling") == "yarn",
                  f"{child}: encoding {encoding}")
            check(evaluation["steps"] == steps, f"{child}: {evaluation['steps']} steps, not {steps}")
            same = all(
                open(os.path.join(parent_dir, "checkpoint", name), "rb").read()
                == open(os.path.join(child_dir, "checkpoint", name), "rb").read()
                for name in os.listdir(os.path.join(parent_dir, "checkpoint")))
            if steps == 0:
                check(same, f"{child}: zero steps, yet its parameters differ from the parent's")
                child_1x = [r for r in rows_of(summary, child, "length") if r["factor"] == "1"]
                parent_1x = [r for r in parent_main if r["factor"] == "1"]
                check(child_1x and parent_1x and child_1x[0]["loss"] != parent_1x[0]["loss"],
                      f"{child}: YaRN did not change the loss at 1x (the scaling was not applied)")
            else:
                check(not same, f"{child}: fine-tuned, yet its parameters equal the parent's")
    # Every run: losses at 1x, 2x, 4x of its training length, and 2 lengths x 2 depths of passkey.
    for run in runs:
        trained = 64 if run.startswith("yarn64") else 32
        lengths = sorted(int(r["seq_len"]) for r in rows_of(summary, run, "length"))
        check(lengths == [trained, 2 * trained, 4 * trained], f"{run}: evaluated at {lengths}")
        check(all(math.isfinite(float(r["loss"])) for r in rows_of(summary, run, "length")),
              f"{run}: a loss is not finite")
        cells = sorted((int(r["seq_len"]), float(r["passkey_depth"]), int(r["instances"]))
                       for r in rows_of(summary, run, "passkey"))
        check(cells == [(128, 0.0, 4), (128, 1.0, 4), (256, 0.0, 4), (256, 1.0, 4)],
              f"{run}: passkey cells {cells}")
    # Resume across stages: nothing left to run.
    again = subprocess.run([poslab, "run", STUDY, "--jobs", "2", "--out", out],
                           capture_output=True, text=True)
    check(again.returncode == 0 and "6 already done" in again.stdout,
          f"a second poslab run did not find all 6 runs done:\n{again.stdout}{again.stderr}")

    # poslab plot: the two-stage figures (lengths in bytes), and summary_ci.csv pools each
    # stage-2 variant's seeds (the parent column names a seed's parent, not a condition).
    plot = subprocess.run([poslab, "plot", out], capture_output=True, text=True)
    check(plot.returncode == 0, f"poslab plot failed:\n{plot.stdout}{plot.stderr}")
    figures = set(os.listdir(os.path.join(out, "figures"))) if plot.returncode == 0 else set()
    for name in ("extension_loss_vs_length", "extension_budget", "extension_loss_by_position"):
        check(f"{name}.png" in figures, f"poslab plot drew no {name}.png (drew {sorted(figures)})")
    check("loss_vs_length.png" not in figures,
          "poslab plot drew the one-stage loss_vs_length.png for a two-stage study")
    if plot.returncode == 0:
        with open(os.path.join(out, "summary_ci.csv")) as f:
            ci = [r for r in csv.DictReader(f) if r["kind"] == "length"]
        for variant in ("yarn64", "yarn_zero_shot"):  # seeds kept + dropped by the gate
            rows = [r for r in ci if r["variant"] == variant]
            seeds = {int(r["n"]) + int(r["dropped"]) for r in rows}
            lengths = [r["seq_len"] for r in rows]
            check(seeds == {2} and len(lengths) == len(set(lengths)) == 3,
                  f"summary_ci.csv: {variant} has {len(rows)} length rows of {seeds} seeds, "
                  "not one row of both seeds per length")

    for p in problems:
        print("two_stage_smoke:", p)
    if problems:
        sys.exit(f"two_stage_smoke: {len(problems)} problem(s)")
    print("two_stage_smoke: parents, children, zero-shot, lengths and passkey cells as expected")


if __name__ == "__main__":
    main()
