"""The second context-extension study (experiments/context_extension_methods.toml and its
protocol, rules 1-11): RoPE trained at L = 64 bytes with the passkey mix (so that it retrieves at
L), then read zero-shot with LongRoPE's searched factors, Self-Extend, ReRoPE and leaky ReRoPE,
log-n scaling, and the first study's PI / NTK / YaRN; fine-tuned with PoSE, RandPos or at full
length; and read as a stream token by token with sinks, a window, recomputation, Transformer-XL's
memory or everything (rope64, and rope64_sink trained with a learned sink logit). Loss in nats
per byte on the test split; passkey = greedy exact match averaged over the five depths; every
comparison paired by seed.

The gate (reading/protocol_gates.py): a stage-1 run counts if its loss at L is below the bigram
baseline and its passkey at L is >= 0.9; a stage-2 run counts if its parent does; the streaming
rows need only the loss gate (their question is the loss)."""

import pandas as pd

from poslab_analysis.claims.rules import Tally, fmt, table_head
from poslab_analysis.claims.studies import context_extension_retrieval
from poslab_analysis.statistics import seeds

TRAIN_LEN = 64   # L of every stage-1 model


class Study(context_extension_retrieval.Study):
    """The retrieval study's reader (loss, passkey, loss by position per gated seed), plus the
    streaming rows (gated by the loss alone), the loss of the last bytes of each chunk and the
    cost columns."""

    def __init__(self, study_dir):
        super().__init__(study_dir)
        s = self.summary
        # A run counts for the chunked and passkey rows if its main row passes the gate (its
        # streaming rows may pass where it does not: they need only the loss gate).
        main = s[s["kind"] == "main"]
        self.kept = set(main["run"][seeds.gate_passed(main)])
        self.stream_kept = s[s["kind"].astype(str).str.startswith("stream_")
                             & seeds.gate_passed(s)]

    def stream(self, variant, mode, sinks=None):
        """The loss over the stream of `variant` read in `mode` (sinks, window, recompute,
        memory, dense), per seed whose streaming rows pass the loss gate; `sinks`: the cache's
        number of sink tokens, where a run reads more than one cache in a mode."""
        rows = self.stream_kept
        rows = rows[(rows["variant"] == variant) & (rows["kind"] == f"stream_{mode}")]
        if sinks is not None and "stream_sinks" in rows:
            rows = rows[rows["stream_sinks"] == sinks]
        return rows.drop_duplicates("train.seed").set_index("train.seed")["loss"]

    def last_bytes(self, variant, length, width=TRAIN_LEN):
        """Mean loss of the last `width` positions of `variant`'s chunks of `length` bytes, per
        gated seed (Su's reading: the loss of the last tokens, read with a longer context)."""
        return self.position_loss(variant, length, length - width, length)

    def trained_tokens(self, variant):
        """Training tokens of `variant`'s own training (steps x batch x segment), per gated seed:
        train_seconds x train_tokens_per_second, as the run measured them."""
        rows = self._rows(variant, ("main",), self._main_length(variant))
        return (rows["train_seconds"] * rows["train_tokens_per_second"]).round().groupby(
            rows["train.seed"]).first()

    def train_seconds(self, variant):
        rows = self._rows(variant, ("main",), self._main_length(variant))
        return rows.groupby("train.seed")["train_seconds"].first()

    def eval_speed(self, variant, length):
        """Scored bytes per second of the chunked evaluation at `length` bytes, per gated seed."""
        if "tokens_per_second" not in self.summary:
            return pd.Series(dtype=float)
        rows = self._rows(variant, ("length", "main"), length).drop_duplicates("train.seed")
        return rows.set_index("train.seed")["tokens_per_second"]

    def _main_length(self, variant):
        s = self.summary
        rows = s[(s["variant"] == variant) & (s["kind"] == "main")]
        return int(rows["seq_len"].iloc[0]) if len(rows) else TRAIN_LEN

    def interval(self, series):
        """fmt of the t interval over seeds of a per-seed Series."""
        return fmt(*seeds.t_interval(series.tolist()))


def gate_line(study):
    """How many runs, which the gate dropped and why."""
    n = study.summary["run"].nunique()
    dropped = study.dropped
    return (f"{n} runs, gate dropped {len(dropped)}"
            + (f" ({'; '.join(dropped)})" if dropped else ""))


def table(study_dir, papers, record=None):
    """The claims table: the gate line, then the papers' rows
    (paper.context_extension_methods(study, record) -> lines)."""
    study = Study(study_dir)
    intro = (f"{gate_line(study)}. Loss in nats per byte on the test split, passkey as greedy "
             "exact match averaged over 5 depths, the stream's loss over 6,400 test bytes read "
             "token by token (the papers: perplexity or loss of LLaMA-size models on long "
             "documents, passkey accuracy); L = 64 bytes; every difference paired over seeds.")
    lines = table_head(intro)
    own = Tally()  # this table's verdicts, for its Holm line; then the caller's count
    for paper in papers:
        lines += paper.context_extension_methods(study, own)
    own.pass_to(record)
    lines.append(cost_line(study))
    lines.append(own.holm_line())
    return "\n".join(lines)


# The inference-time methods whose cost of a read the table reports, as the issue asks.
READ_AT_4X = ("rope64", "zs_linear_s4", "zs_ntk_s4", "zs_yarn_s4", "zs_longrope_s4",
              "zs_se_w16_g16", "zs_se_w56_g28", "zs_rerope_w16", "zs_rerope_w56",
              "zs_leaky_w16_k16", "zs_leaky_w56_k16", "zs_logn", "zs_se_w16_g16_logn",
              "zs_rerope_w16_logn")


def cost_line(study):
    """The cost of a read: scored bytes per second of each method's chunked evaluation at 4x,
    mean over the gated seeds (a comparison within this study: the runs ran two at a time on one
    machine, and the copy-distance bookkeeping is included)."""
    speeds = [(v, study.eval_speed(v, 4 * TRAIN_LEN)) for v in READ_AT_4X]
    shown = "; ".join(f"{v} {s.mean():,.0f}" for v, s in speeds if len(s))
    return ("\nCost of a read at 4x, scored bytes per second of the chunked evaluation (mean over "
            "the gated seeds; two runs at a time on 2 cores, the loss by copy distance included: "
            f"compare within the list): {shown or 'not recorded'}.")
