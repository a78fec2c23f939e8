"""Paired differences between two streaming reads of the same model (`eval.stream_*` rows),
bucket by bucket along the stream: is evicting the first tokens (window, S = 0) worse than
keeping S sinks? Reads a study's loss_by_stream_position.csv (one line per run, mode and bucket of
train.seq_len bytes) and prints, for every pair asked, the token-weighted mean difference of the
two losses over the buckets both score and the standard error of the bucket differences (buckets
treated as independent, which ignores their correlation along the stream).

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


def read(table, spec):
    variant, kind, *sinks = spec.split(":")
    rows = table[(table["variant"] == variant) & (table["kind"] == kind)]
    if sinks:
        rows = rows[rows["stream_sinks"] == int(sinks[0])]
    if rows.empty:
        sys.exit(f"stream_pairs: no rows for {spec}")
    if rows["position_low"].duplicated().any():
        sys.exit(f"stream_pairs: {spec} has several runs (seeds); choose one with --seed N")
    return rows.set_index("position_low")


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
        both = a.index.intersection(b.index)
        if not (a.loc[both, "tokens"] == b.loc[both, "tokens"]).all():
            sys.exit(f"stream_pairs: {pair} score different bytes")
        d = a.loc[both, "loss"] - b.loc[both, "loss"]
        w = a.loc[both, "tokens"]
        mean = (d * w).sum() / w.sum()
        se = d.std(ddof=1) / math.sqrt(len(d))
        la = (a.loc[both, "loss"] * w).sum() / w.sum()
        lb = (b.loc[both, "loss"] * w).sum() / w.sum()
        print(f"{a_spec} - {b_spec}: {mean:+.4f} nats/byte (SE {se:.4f} over {len(d)} buckets); "
              f"{la:.4f} vs {lb:.4f}, perplexity per byte {math.exp(la):.3f} vs {math.exp(lb):.3f}")


if __name__ == "__main__":
    main()
