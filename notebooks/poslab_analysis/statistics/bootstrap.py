"""A paired bootstrap of a loss difference over the slices of the evaluation text: how much of a
difference between two evaluations of the same tokens comes from *which* text was evaluated.

    /usr/bin/python3 notebooks/bootstrap.py results/state_reuse          # -> bootstrap.csv
    /usr/bin/python3 notebooks/bootstrap.py --self-test

The seed interval of the claims tables (statistics/seeds.py) measures how much a result moves when
the model is trained again; this one measures how much it moves when the evaluation text is drawn
again. Both should exclude 0 for a difference to be believed.

Inputs: the per-token test losses that `poslab eval --token-losses` writes (RUN/token_losses_M<c>.npy,
the RECL inputs of experiments/state_reuse.protocol.md). Their order is batch by batch, row by row
(src/eval/chunked.hpp), and the evaluation stream is laid out as in Transformer-XL: the test
split is cut into B contiguous slices, one per batch row (StreamBatcher, src/data/corpus.hpp).
With B = 32 rows and a 462 kB test split, a slice is about 14 kB of consecutive modules. Slices,
not files, are resampled: the loss files do not record file boundaries, and a slice is the unit
the evaluation itself keeps contiguous (the memory never crosses from one row to another).

For one pair (A, B) of evaluations of the same tokens, per slice s:
    D_s = sum over the slice's tokens of l_A(t) - l_B(t),   N_s = its token count
    estimate = sum_s D_s / sum_s N_s                           (the paired mean difference)
    replicate: draw B slices with replacement, sum their D and N, divide
    interval = the 2.5% and 97.5% quantiles of 10,000 replicates (percentile bootstrap)
"""
import os
import sys
import tomllib

import numpy as np

REPLICATES = 10_000
SEED = 2019  # the bootstrap's own random stream: the interval is reproducible

# (label, run A, memory A, run B, memory B): protocol comparisons 2 and 4 for Transformer-XL,
# the one encoding whose with- and without-memory runs both have token losses.
XL32 = "encoding.type-transformer_xl__memory.mem_len-32"
XL0 = "encoding.type-transformer_xl__memory.mem_len-0"
COMPARISONS = [
    ("XL: trained with memory 32 (at 32) minus trained without (at 0)", XL32, 32, XL0, 0),
    ("XL: trained with memory 32 minus trained without, both at memory 32", XL32, 32, XL0, 32),
    ("XL trained with memory 32: memory 64 minus memory 32", XL32, 64, XL32, 32),
    ("XL trained with memory 32: memory 128 minus memory 32", XL32, 128, XL32, 32),
]


def slice_sums(diff, rows, seg_len):
    """diff: per-token differences in reading order [batches * rows * seg_len]. Returns the
    per-slice sums D_s and counts N_s (row r of every batch belongs to slice r)."""
    if diff.size % (rows * seg_len):
        raise ValueError(f"{diff.size} token losses are not whole batches of {rows} rows x "
                         f"{seg_len} tokens")
    per_batch = diff.reshape(-1, rows, seg_len)                  # [batches, rows, L]
    return per_batch.sum(axis=(0, 2)), np.full(rows, per_batch.shape[0] * seg_len)


def bootstrap(d_sums, counts, replicates=REPLICATES, seed=SEED):
    """(estimate, low, high): the paired mean difference and its 95% percentile interval."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(d_sums), size=(replicates, len(d_sums)))
    means = d_sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(d_sums.sum() / counts.sum()), float(low), float(high)


def batch_layout(run_dir):
    """(rows, segment length) of the run's evaluation: eval.batch_size (0 = train.batch_size) and
    train.seq_len of its config (src/cli/commands.cpp, evaluation_batch_size)."""
    with open(os.path.join(run_dir, "config.toml"), "rb") as f:
        config = tomllib.load(f)
    rows = int(config.get("eval", {}).get("batch_size", 0)) or int(config["train"]["batch_size"])
    return rows, int(config["train"]["seq_len"])


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    study = argv[1].rstrip("/")
    runs = os.path.join(study, "runs")
    lines = ["comparison,seed,estimate,ci_low,ci_high,slices,tokens"]
    for label, run_a, mem_a, run_b, mem_b in COMPARISONS:
        for seed in (21, 22, 23):
            dir_a = os.path.join(runs, f"{run_a}__train.seed-{seed}")
            dir_b = os.path.join(runs, f"{run_b}__train.seed-{seed}")
            files = [os.path.join(dir_a, f"token_losses_M{mem_a}.npy"),
                     os.path.join(dir_b, f"token_losses_M{mem_b}.npy")]
            missing = [f for f in files if not os.path.exists(f)]
            if missing:
                print(f"bootstrap.py: skipping {label}, seed {seed}: no {missing[0]}",
                      file=sys.stderr)
                continue
            a, b = (np.load(f).astype(np.float64) for f in files)
            if a.shape != b.shape:
                print(f"bootstrap.py: error: {files[0]} and {files[1]} differ in length "
                      f"({a.size} vs {b.size}): not the same tokens", file=sys.stderr)
                return 1
            rows, seg_len = batch_layout(dir_a)
            d_sums, counts = slice_sums(a - b, rows, seg_len)
            est, low, high = bootstrap(d_sums, counts)
            lines.append(f"\"{label}\",{seed},{est:.5f},{low:.5f},{high:.5f},{rows},{a.size}")
            print(f"{label}, seed {seed}: {est:+.4f} [{low:+.4f}, {high:+.4f}]")
    out = os.path.join(study, "bootstrap.csv")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


def self_test():
    """A difference planted in half of the slices is found, with an interval that covers the
    truth; a zero difference gets an interval around 0."""
    rng = np.random.default_rng(0)
    rows, L, batches = 32, 32, 50
    noise = rng.normal(0, 0.5, size=(batches, rows, L))
    shift = np.zeros((batches, rows, L))
    shift[:, ::2, :] = -0.2                       # slices 0, 2, 4, ... gain 0.2 nats
    d_sums, counts = slice_sums((noise + shift).ravel(), rows, L)
    est, low, high = bootstrap(d_sums, counts)
    assert abs(est + 0.1) < 0.01 and low < -0.1 < high and high < 0, (est, low, high)
    d_sums, counts = slice_sums(noise.ravel(), rows, L)
    est, low, high = bootstrap(d_sums, counts)
    assert low < 0 < high, (est, low, high)
    # The layout: slice s is row s of every batch, not a run of consecutive tokens.
    marked = np.zeros((batches, rows, L))
    marked[:, 3, :] = 1.0
    d_sums, _ = slice_sums(marked.ravel(), rows, L)
    assert d_sums[3] == batches * L and d_sums.sum() == batches * L, d_sums
    print("bootstrap.py self-test passed")
    return 0

