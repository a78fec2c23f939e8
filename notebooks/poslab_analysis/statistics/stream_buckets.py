"""The within-stream sampling error of a difference between two streaming reads of one model
(`eval.stream_*`): two modes (window and sinks, say) score the same bytes of one stream, and
STUDY/loss_by_stream_position.csv holds each read's mean loss per bucket of train.seq_len bytes.
For the buckets both reads score, with d_b = loss_A(b) - loss_B(b) and t_b the bucket's scored
bytes:

    mean  = sum_b t_b d_b / sum_b t_b        (the difference of the two streams' losses)
    SE    = sd(d_b) / sqrt(#buckets)         (buckets treated as independent, which ignores
                                              their correlation along the stream)

A rerun with other seeds sees the spread over seeds; this SE says only how much one stream's
bytes move a difference, to show it is small beside that spread (the protocols of the streaming
studies report it beside the interval over seeds). notebooks/stream_pairs.py prints it."""
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BucketDifference:
    mean: float      # token-weighted mean of d_b, nats/byte
    se: float        # sd(d_b) / sqrt(buckets)
    buckets: int
    loss_a: float    # token-weighted loss of A over the common buckets
    loss_b: float


def bucket_difference(a, b):
    """A minus B for two reads' bucket rows (DataFrames with position_low, tokens, loss; one row
    per bucket). Raises ValueError if the common buckets score different numbers of bytes (the
    reads are not of the same bytes) or if they share fewer than 2 buckets."""
    a, b = a.set_index("position_low"), b.set_index("position_low")
    both = a.index.intersection(b.index)
    if len(both) < 2:
        raise ValueError(f"{len(both)} common buckets: a standard error needs 2")
    if not (a.loc[both, "tokens"] == b.loc[both, "tokens"]).all():
        raise ValueError("the two reads score different bytes in some bucket")
    d = a.loc[both, "loss"] - b.loc[both, "loss"]
    w = a.loc[both, "tokens"]
    return BucketDifference(mean=float((d * w).sum() / w.sum()),
                            se=float(d.std(ddof=1) / math.sqrt(len(d))), buckets=len(d),
                            loss_a=float((a.loc[both, "loss"] * w).sum() / w.sum()),
                            loss_b=float((b.loc[both, "loss"] * w).sum() / w.sum()))
