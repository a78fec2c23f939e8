"""Paired differences between two streaming reads of the same model (`eval.stream_*` rows),
bucket by bucket along the stream: is evicting the first tokens (window, S = 0) worse than
keeping S sinks? Reads a study's loss_by_stream_position.csv (one line per run, mode and bucket of
train.seq_len bytes) and prints, for every pair asked, the token-weighted mean difference of the
two losses over the buckets both score and the standard error of the bucket differences
(poslab_analysis/statistics/stream_buckets.py).

    /usr/bin/python3 notebooks/stream_pairs.py RESULTS_DIR [--seed N] A=B [A=B ...]

A and B name a read as VARIANT:KIND[:S], e.g. vanilla:stream_window vanilla_s1:stream_sinks:1;
--seed N keeps the runs of train.seed N (needed when a variant has several seeds).
Example (experiments/pilots/sink_token.toml):
    /usr/bin/python3 notebooks/stream_pairs.py results/pilots/sink_token \\
        vanilla:stream_window=vanilla_s1:stream_sinks:1
"""
import math
import os
import sys

import pandas as pd

from poslab_analysis.statistics.stream_buckets import bucket_difference


def read(table, spec):
    variant, kind, *sinks = spec.split(":")
    rows = table[(table["variant"] == variant) & (table["kind"] == kind)]
    if sinks:
        rows = rows[rows["stream_sinks"] == int(sinks[0])]
    if rows.empty:
        sys.exit(f"stream_pairs: no rows for {spec}")
    if rows["position_low"].duplicated().any():
        sys.exit(f"stream_pairs: {spec} has several runs (seeds); choose one with --seed N")
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    table = pd.read_csv(os.path.join(sys.argv[1], "loss_by_stream_position.csv"))
    pairs = sys.argv[2:]
    if pairs[:1] == ["--seed"]:
        table = table[table["train.seed"] == int(pairs[1])]
        pairs = pairs[2:]
    for pair in pairs:
        a_spec, b_spec = pair.split("=")
        a, b = read(table, a_spec), read(table, b_spec)
        try:
            d = bucket_difference(a, b)
        except ValueError as e:
            sys.exit(f"stream_pairs: {pair}: {e}")
        print(f"{a_spec} - {b_spec}: {d.mean:+.4f} nats/byte (SE {d.se:.4f} over {d.buckets} "
              f"buckets); {d.loss_a:.4f} vs {d.loss_b:.4f}, perplexity per byte "
              f"{math.exp(d.loss_a):.3f} vs {math.exp(d.loss_b):.3f}")


if __name__ == "__main__":
    main()
