"""Relative effective context length (RECL), Dai et al. 2019, Appendix C: how much context a
model really uses, measured against a group of models on the same tokens.

    /usr/bin/python3 notebooks/recl.py OUT.csv RUN_DIR...       # every RUN_DIR/token_losses_M<c>.npy
    /usr/bin/python3 notebooks/recl.py --self-test

Inputs: for every model i of the group and every context length c, the loss l_i(c, t) of every
token t of the same evaluation text, written by

    build/poslab eval --run RUN_DIR --mem-len c --token-losses RUN_DIR/token_losses_M<c>.npy

(same segment length and rows for every c, so that token t is the same text in every file).

The definition (docs/conventions.md, "Relative effective context length (RECL)"), for a group of models and a ratio r = 0.1:
    b(c, t)       = min_i l_i(c, t)                          the group's best loss on t at c
    T(c)          = the r fraction of tokens with the largest b(c, t)   (the hard tokens)
    f_i(c, c')    = mean_{t in T(c)} min(b(c, t), l_i(c', t))
    g_i(c, c')    = (exp f_i(c, c) - exp f_i(c, c')) / exp f_i(c, c)   relative gain from c to c'
    RECL_i        = the first c (in increasing order) at which g_i(c, c + delta) < 0.01
A model whose loss still falls when it is given more context keeps a large gain; RECL is the
context beyond which it stops gaining. With the contexts measured here, RECL is at most the
second largest c (the last c has no c + delta); a model still gaining there is reported as
">= that c".

No public code implements RECL; this file follows the appendix's definition, with its r and
its 0.01 threshold, and delta = the step between consecutive measured contexts.
"""
import glob
import json
import os
import re
import sys

import numpy as np

THRESHOLD = 0.01
RATIO = 0.1


def recl(losses, ratio=RATIO, threshold=THRESHOLD):
    """losses: {model: {c: array of per-token losses}}, every array the same tokens.
    Returns {model: (recl, censored)}: censored = True if the model still gained at the largest
    pair of contexts (its RECL is at least the value given)."""
    models = sorted(losses)
    contexts = sorted(set.intersection(*(set(losses[m]) for m in models)))
    if len(contexts) < 2:
        raise ValueError("RECL needs at least two context lengths shared by every model")
    n = {len(losses[m][c]) for m in models for c in contexts}
    if len(n) != 1:
        raise ValueError(f"the token-loss arrays differ in length: {sorted(n)}")
    result = {}
    gains = {m: [] for m in models}
    for c, c_next in zip(contexts, contexts[1:]):
        stack = np.stack([losses[m][c] for m in models])          # [models, tokens]
        b = stack.min(axis=0)                                      # b(c, t)
        k = max(1, int(round(ratio * len(b))))
        hard = np.argsort(-b, kind="stable")[:k]                   # T(c)
        for m in models:
            f_same = np.minimum(b[hard], losses[m][c][hard]).mean()        # f_i(c, c)
            f_next = np.minimum(b[hard], losses[m][c_next][hard]).mean()   # f_i(c, c')
            gains[m].append((np.exp(f_same) - np.exp(f_next)) / np.exp(f_same))
    for m in models:
        below = [c for c, g in zip(contexts, gains[m]) if g < threshold]
        result[m] = (below[0], False) if below else (contexts[-2], True)
    return result, gains, contexts


def load_run(run_dir):
    """{c: losses} of a run directory, and its label (the encoding, from eval.json)."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, "token_losses_M*.npy")):
        c = int(re.search(r"token_losses_M(\d+)\.npy$", path).group(1))
        out[c] = np.load(path).astype(np.float64)
    label = os.path.basename(run_dir.rstrip("/"))
    eval_json = os.path.join(run_dir, "eval.json")
    if os.path.exists(eval_json):
        label = json.load(open(eval_json)).get("encoding", label) + " (" + label + ")"
    return label, out


def self_test():
    """A group of three synthetic models whose answers are known: 'short' stops gaining after
    context 16, 'long' after 64, 'flat' never gains."""
    rng = np.random.default_rng(0)
    base = rng.uniform(1.0, 3.0, size=5000)
    contexts = [8, 16, 32, 64, 128]
    def curve(stop):
        return {c: base * (1.0 - 0.2 * np.log2(min(c, stop) / 8)) for c in contexts}
    losses = {"short": curve(16), "long": curve(64), "flat": curve(8)}
    result, _, _ = recl(losses)
    assert result["flat"] == (8, False), result
    assert result["short"] == (16, False), result
    assert result["long"] == (64, False), result
    # A model still gaining at the last pair is censored at the second largest context.
    losses["endless"] = curve(1 << 20)
    result, _, _ = recl(losses)
    assert result["endless"] == (64, True), result
    print("recl.py self-test passed")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 4 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 and argv[1] in ("-h", "--help") else 2
    out_csv, run_dirs = argv[1], argv[2:]
    losses = {}
    for run_dir in run_dirs:
        label, per_context = load_run(run_dir)
        if not per_context:
            print(f"recl.py: error: {run_dir} has no token_losses_M<c>.npy files", file=sys.stderr)
            return 1
        losses[label] = per_context
    result, gains, contexts = recl(losses)
    with open(out_csv, "w") as out:
        out.write("model,recl,censored," + ",".join(f"gain_{c}_{d}" for c, d in
                                                   zip(contexts, contexts[1:])) + "\n")
        for m in sorted(result):
            value, censored = result[m]
            out.write(f"{m},{value},{str(censored).lower()},"
                      + ",".join(f"{g:.5f}" for g in gains[m]) + "\n")
            print(f"{m}: RECL {'>= ' if censored else ''}{value}")
    print(f"wrote {out_csv}")
    return 0

