"""The attention-sink study (experiments/sink_token.toml and its protocol): two RoPE models of 4
layers trained at L = 64 bytes, `vanilla4` and `sink4` (Xiao et al.'s learned sink token
prepended to every row in pre-training), each read as a stream of the test split's first bytes
token by token with a cache smaller than L:

    mode        summary.csv row                      keys kept
    S = 4       vanilla4 / sink4, stream_sinks       the 4 first stream entries + the most recent
    S = 1       vanilla4_s1 / sink4_s1, stream_sinks the first entry + the most recent (the child
                                                     reads its parent's weights, train.steps = 0)
    window      vanilla4 / sink4, stream_window      the most recent only (S = 0)
    recompute   vanilla4 / sink4, stream_recompute   a fresh window at every byte

For `sink4` the sink token is stream entry 0: S = 1 keeps the sink alone, `window` evicts it.

The gate (the protocol's, reading/protocol_gates.py's LossGate, which the figures apply too): a
base run counts if its chunked test loss at 64 (its `main` row) is below the bigram baseline; a
failing seed is dropped with its *_s1 child.

The sink diagnostic (`poslab sinks --windows 1000 --split test` per base run, into
STUDY/sinks/<run directory>/sink_heads.csv): per layer and head the mean attention on key 0 over
queries 32..63 of test windows of 64 bytes. A **sink head** is a head whose mass on key 0 is
>= SINK_MASS (protocol, "Statistics"; uniform attention gives about 0.021). The column `sink` of
sink_heads.csv is the diagnostic's own flag at its threshold 0.5 and is not used. The figure of
the diagnostic (notebooks/sink_diagnostic.py, one column per base run; `poslab plot` draws none):

    /usr/bin/python3 notebooks/sink_diagnostic.py results/sink_token/sinks/sinks.png \\
      "results/sink_token/sinks/vanilla4__train.seed-121=vanilla4, seed 121" (... six base runs)

Beside each interval over seeds, the within-stream standard error of each seed's difference
(statistics/stream_buckets.py, buckets of 64 bytes from loss_by_stream_position.csv)."""
import json
import os
import tomllib

import pandas as pd

from poslab_analysis.claims.rules import Tally, fmt
from poslab_analysis.claims.studies import context_extension_methods
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds
from poslab_analysis.statistics.stream_buckets import bucket_difference

SINK_MASS = 0.1    # mean attention on key 0 that makes a head a sink head (protocol)
BASES = ("vanilla4", "sink4")
# mode -> (variant suffix, summary.csv kind): where each read of a base's stream is.
MODES = {"S4": ("", "stream_sinks"), "S1": ("_s1", "stream_sinks"),
         "window": ("", "stream_window"), "recompute": ("", "stream_recompute")}


def run_dir(variant, seed):
    """The run's directory name under runs/ (and sinks/): vanilla4__train.seed-121."""
    return f"{variant}__train.seed-{seed}"


class SinkHeads:
    """One base run's sink diagnostic: how many heads reach SINK_MASS on key 0, the largest
    mass (and its layer and head), the uniform mass, the split and windows it was read on."""

    COLUMNS = ("layer", "head", "first_key_mass", "uniform_mass", "windows")

    def __init__(self, directory):
        path = os.path.join(directory, "sink_heads.csv")
        heads = pd.read_csv(path)  # one row per (layer, head)
        missing = [c for c in self.COLUMNS if c not in heads]
        if missing or heads.empty:
            raise ValueError(f"{path}: not a `poslab sinks` table (missing columns "
                             f"{', '.join(missing) or 'none'}; {len(heads)} rows)")
        self.sink_heads = int((heads["first_key_mass"] >= SINK_MASS).sum())
        top = heads.loc[heads["first_key_mass"].idxmax()]
        self.largest = float(top["first_key_mass"])
        self.where = (int(top["layer"]), int(top["head"]))
        self.heads = len(heads)
        self.uniform = float(heads["uniform_mass"].iloc[0])
        self.windows = int(heads["windows"].iloc[0])
        info_path = os.path.join(directory, "sinks.json")  # the split it read, if written
        self.split = "split not recorded"
        if os.path.exists(info_path):
            with open(info_path) as f:
                self.split = json.load(f).get("split", self.split)

    def text(self):
        return (f"{self.sink_heads} of {self.heads} heads >= {SINK_MASS} (largest "
                f"{self.largest:.3f}, layer {self.where[0]} head {self.where[1]}; {self.split}, "
                f"{self.windows} windows)")


class Study:
    """What the rows read: the stream loss per seed for each base and mode (gated), the
    within-stream SE of a difference per seed, and the sink diagnostic per base run."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary, self.why = study_files.read_gated_summary(study_dir)  # the protocol's
        self.dropped = [f"{run} ({why})" for run, why in self.why.items()]  # gate, its drops
        s = self.summary
        self.kept = s[seeds.gate_passed(s)]
        self.buckets = study_files.read_loss_by_stream_position(study_dir)  # gate applied
        self.sinks = {}  # (base, seed) -> SinkHeads, or None where the diagnostic is missing
        for base in BASES:
            for seed in self.seeds(base):
                directory = os.path.join(study_dir, "sinks", run_dir(base, seed))
                has = os.path.exists(os.path.join(directory, "sink_heads.csv"))
                self.sinks[(base, seed)] = SinkHeads(directory) if has else None

    def seeds(self, base):
        """The seeds of `base` whose run passes the gate, in order."""
        k = self.kept
        return sorted(int(x) for x in k[(k["variant"] == base) & (k["kind"] == "main")]
                      ["train.seed"].unique())

    def stream(self, base, mode):
        """The loss over the stream of `base` read in `mode` (MODES), per gated seed."""
        suffix, kind = MODES[mode]
        k = self.kept
        rows = k[(k["variant"] == base + suffix) & (k["kind"] == kind)]
        return rows.drop_duplicates("train.seed").set_index("train.seed")["loss"]

    def difference(self, base, mode_a, mode_b):
        """(a - b per seed, its t interval over the seeds both have (seeds.paired))."""
        a, b = self.stream(base, mode_a), self.stream(base, mode_b)
        common = a.index.intersection(b.index)
        return a[common] - b[common], seeds.paired(a, b)

    def within_stream(self, base, mode_a, mode_b):
        """{seed: BucketDifference} of `base`'s mode_a minus mode_b along the stream, for the
        gated seeds with both reads in loss_by_stream_position.csv (empty without the file)."""
        out = {}
        if self.buckets is None:
            return out
        t = self.buckets
        for seed in self.seeds(base):
            reads = []
            for mode in (mode_a, mode_b):
                suffix, kind = MODES[mode]
                reads.append(t[(t["variant"] == base + suffix) & (t["kind"] == kind)
                               & (t["train.seed"] == seed)])
            if all(len(r) for r in reads):
                try:
                    out[seed] = bucket_difference(*reads)
                except ValueError as e:
                    raise ValueError(f"{self.dir}/loss_by_stream_position.csv, {base} seed "
                                     f"{seed}, {mode_a} minus {mode_b}: {e}") from None
        return out

    def within_text(self, base, mode_a, mode_b):
        """'within-stream SE per seed 0.0031, 0.0042, 0.0027 (64-byte buckets)', or why not."""
        per_seed = self.within_stream(base, mode_a, mode_b)
        if not per_seed:
            return ("within-stream SE: no loss_by_stream_position.csv rows" if self.seeds(base)
                    else "no gated seeds")
        width = int(self.buckets["position_high"].iloc[0] - self.buckets["position_low"].iloc[0])
        return (f"within-stream SE per seed {', '.join(f'{d.se:.4f}' for d in per_seed.values())}"
                f", {width}-byte buckets")

    def interval(self, series):
        return fmt(*seeds.t_interval(series.tolist()))

    def no_sink_head(self, base):
        """[passing seeds of `base` without a sink head, or without a diagnostic]: (seed, text)."""
        out = []
        for seed in self.seeds(base):
            heads = self.sinks[(base, seed)]
            if heads is None:
                out.append((seed, f"sinks/{run_dir(base, seed)} missing"))
            elif heads.sink_heads == 0:
                out.append((seed, f"largest mass on key 0 {heads.largest:.3f}"))
        return out

    def diagnostic_text(self, base):
        """Per gated seed: 'seed 121: 4 of 16 heads >= 0.1 (largest 0.587, layer 0 head 3)'."""
        parts = []
        for seed in self.seeds(base):
            heads = self.sinks[(base, seed)]
            parts.append(f"seed {seed}: " + (heads.text() if heads else "not run"))
        return "; ".join(parts) or "no gated seeds"

    def regime(self):
        """The setting of this study's streams, from STUDY/study.toml (the study file, copied by
        the runner and committed; configs/ is not): [base] with vanilla4's `set` over it:
        layers, L, steps, cache keys, stream bytes, split."""
        path = os.path.join(self.dir, "study.toml")
        if not os.path.exists(path):
            return "no study.toml"
        with open(path, "rb") as f:
            study = tomllib.load(f)
        setting = {f"{section}.{key}": value
                   for section, table in study.get("base", {}).items() for key, value in table.items()}
        for variant in study.get("variant", []):
            if variant.get("name") == "vanilla4":
                setting.update(variant.get("set", {}))
        L, sinks = setting["train.seq_len"], setting.get("eval.stream_sinks", 4)
        recent = setting.get("eval.stream_recent", 0) or L - 1 - sinks  # 0: the default
        keys = sinks + recent + 1  # S + R + the current token
        half = " = L/2" if 2 * keys == L else ""
        return (f"{setting['model.n_layers']} layers, L = {L}, {setting['train.steps']:,} steps, "
                f"cache {keys}{half}, {setting.get('eval.split', 'valid')} stream "
                f"{setting['eval.stream_length']:,} bytes")


gate_line = context_extension_methods.gate_line  # how many runs, which the gate dropped, why


def table(study_dir, papers, record=None):
    """The claims table: the gate line, the header with a regime column, the papers' rows
    (paper.sink_token(study, record) -> lines), the sink diagnostic and the Holm line."""
    study = Study(study_dir)
    intro = (f"{gate_line(study)}. Loss in nats per byte over the stream, read token by token "
             f"({study.regime()}); every difference paired by seed, its 95% t interval over the "
             f"gated seeds; a sink head: mean attention >= {SINK_MASS} on key 0"
             + "".join(f" (uniform: {h.uniform:.3f})" for h in
                       list(filter(None, study.sinks.values()))[:1]) + ".")
    lines = [f"\n{intro}\n",
             "| published claim | regime (here; the paper's) | what the paper measured; what "
             "the verdict uses | measured | rule | verdict |",
             "|---|---|---|---|---|---|"]
    own = Tally()  # this table's verdicts, for its Holm line; then the caller's count
    for paper in papers:
        lines += paper.sink_token(study, own)
    own.pass_to(record)
    lines.append("\nSink diagnostic (poslab sinks: mean attention on key 0 over the second half "
                 "of each window of L bytes; its split and windows named), per gated seed: "
                 + "; ".join(f"{base}: {study.diagnostic_text(base)}" for base in BASES) + ".")
    lines.append(own.holm_line())
    return "\n".join(lines)
