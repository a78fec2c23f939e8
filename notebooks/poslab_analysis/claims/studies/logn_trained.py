"""Log-n trained in (experiments/logn_trained.toml and its protocol,
experiments/logn_trained.protocol.md; issue 49, item 2). Two arms of the second context-extension
study's base recipe (RoPE at L = 64 bytes with the passkey mix, 2 layers, 32,000 steps), at the
seeds whose rope64 passed that study's gate (71, 72, 74):

    rope64        the study's base, retrained with the same config
    rope64_logn   every query row i multiplied by f_i = max(1, ln n_i / ln 2), n_i = the keys
                  row i sees (i + 1 in a causal row), in training and at every read
                  (encoding.log_n = "always", encoding.log_n_len = 2)

Everything is read from STUDY/summary.csv and the committed STUDY/study.toml (configs/ and runs/
are not committed, so the table comes out the same from a `git archive` copy of results/):
  - the gate (protocol, "Gate"): a seed counts if the `main` row (the test loss at 64) of BOTH
    arms has in_distribution_ok true (the runner's loss gate: below the test split's bigram
    baseline); a seed whose either arm fails is dropped from every paired statistic and named in
    the gate line. A seed with an arm not yet in summary.csv (a study still running) is named
    as not finished, not as dropped. The gate is reading/protocol_gates.py's SeedLossGate,
    registered for the study, so the figures and summary_ci.csv drop the same seeds;
  - the loss on the whole test split in chunks of f x 64 bytes (kind "length", factor f): row 6
    is rope64_logn minus rope64 at f = 16, paired by seed (claims/papers/chiang2022.py's
    logn_trained);
  - the passkey at 64 (kind "passkey", factor 1, the mean over the 5 depths): reported beside
    the row, never judged (row 6 is a loss claim, so the skill rule does not apply);
  - below the table: rope64's test loss at 64 against the committed
    results/context_extension_methods (same config, same seeds: the same weights?), and the sink
    diagnostic of each rope64 base (STUDY/sinks/<run>/sink_heads.csv, `poslab sinks`), if run.
"""
import os
import tomllib

import pandas as pd

from poslab_analysis.claims.rules import Tally, fmt, table_head
from poslab_analysis.claims.studies import finetune_budget, sink_token
from poslab_analysis.reading import protocol_gates, study_files
from poslab_analysis.statistics import seeds

L = 64                       # the training length, bytes
BASE, LOGN = "rope64", "rope64_logn"
ARMS = (BASE, LOGN)
DECISIVE = 16.0              # the protocol's primary read: 16x, the paper's 20x scaled to L
BESIDE = (2.0, 4.0, 8.0, 1.0)  # the same difference, shown, not decisive
FACTORS = (1.0, 2.0, 4.0, 8.0, 16.0)
DEPTHS = 5                   # passkey depths 0, 0.25, 0.5, 0.75, 1
SIBLING = "context_extension_methods"  # the study whose rope64 this one retrains
NEEDED = ("train.seed", "variant", "factor", "seq_len", "loss", "in_distribution_ok",
          "bigram_loss")


def run_dir(variant, seed):
    """The run's directory under runs/ (and sinks/): rope64__train.seed-71."""
    return f"{variant}__train.seed-{seed}"


GATE = protocol_gates.PROTOCOL_GATES["logn_trained"]  # the protocol's gate (SeedLossGate)


def seed_gate(main, why, seed):
    """The protocol's gate for one seed, from the `main` rows and GATE's {run: why}:
    ("passed", None); ("dropped", why) when the gate drops the seed's runs, naming each arm
    that fails the loss gate itself (its partner goes with it); or ("not finished", why) when
    an arm has no main row yet."""
    failed, missing = [], []
    for arm in ARMS:
        rows = main[(main["variant"] == arm) & (main["train.seed"] == seed)]
        if rows.empty:
            missing.append(arm)
            continue
        run, own = rows["run"].iloc[0], str(rows["in_distribution_ok"].iloc[0]).strip().lower()
        if run in why and own != "true":  # this arm failed (not only dropped with the other)
            failed.append(f"{arm}: {why[run]}")
    if failed:
        return "dropped", "; ".join(failed)
    if missing:
        return "not finished", f"{' and '.join(missing)} not in summary.csv"
    return "passed", None


def read_setting(study_dir, smoke):
    """{variant: {"section.key": value}} from STUDY/study.toml: [base], the variant's `set` over
    it, and for a smoke run the [smoke] section over both (what the runs used); None without
    the file."""
    path = os.path.join(study_dir, "study.toml")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        study = tomllib.load(f)
    base = {f"{section}.{key}": value
            for section, table in study.get("base", {}).items() for key, value in table.items()}
    out = {}
    for variant in study.get("variant", []):
        out[variant["name"]] = {**base, **variant.get("set", {}),
                                **(study.get("smoke", {}) if smoke else {})}
    return out


class Study:
    """What row 6 reads: the loss per gated seed of each arm at each factor, its paired
    difference, each arm's passkey at L; the gate's outcome per seed; the regime."""

    def __init__(self, study_dir):
        self.dir = study_dir
        path = os.path.join(study_dir, "summary.csv")
        self.summary = study_files.read_checked_summary(path)
        missing = [c for c in NEEDED if c not in self.summary.columns]
        if missing:
            raise study_files.StudyFileError(
                f"{path} has no column {', '.join(repr(c) for c in missing)}: the logn_trained "
                "table reads the gate (in_distribution_ok), the loss per factor and the seed")
        self.smoke = finetune_budget.read_smoke(study_dir)
        # The sweep's seeds (None without study.toml; a smoke run reads only some of them).
        self.planned = None if self.smoke else finetune_budget.planned_seeds(study_dir)
        self.setting = read_setting(study_dir, self.smoke)
        s = self.summary
        main = s[s["kind"] == "main"]
        self.seeds_read = sorted(int(x) for x in main["train.seed"].dropna().unique())
        why = GATE.dropped(s)  # {run: why} of every run the protocol's gate drops
        self.gate = {seed: seed_gate(main, why, seed) for seed in self.seeds_read}
        self.passed = [seed for seed, (state, _) in self.gate.items() if state == "passed"]
        self.dropped = {seed: why for seed, (state, why) in self.gate.items()
                        if state == "dropped"}
        self.unfinished = {seed: why for seed, (state, why) in self.gate.items()
                           if state == "not finished"}

    # ---- per gated seed (Series indexed by train.seed) ----

    def loss(self, arm, factor):
        """The test loss of `arm` in chunks of factor x L bytes (kind "length"), per seed that
        passed the gate."""
        s = self.summary
        rows = s[(s["variant"] == arm) & (s["kind"] == "length") & (s["factor"] == factor)
                 & s["train.seed"].isin(self.passed)].drop_duplicates("train.seed")
        return rows.set_index("train.seed")["loss"].astype(float).sort_index()

    def difference(self, factor):
        """rope64_logn minus rope64 at `factor`: (per-seed Series, its t interval over the gated
        seeds both arms have; seeds.paired)."""
        logn, base = self.loss(LOGN, factor), self.loss(BASE, factor)
        common = logn.index.intersection(base.index)
        return logn[common] - base[common], seeds.paired(logn, base)

    def passkey(self, arm):
        """Greedy exact match of `arm` at L (factor 1), mean over the depths, per gated seed
        whose read covers all DEPTHS depths."""
        s = self.summary
        if "passkey_greedy_exact_match" not in s:
            return pd.Series(dtype=float)
        rows = s[(s["variant"] == arm) & (s["kind"] == "passkey") & (s["factor"] == 1.0)
                 & s["train.seed"].isin(self.passed)]
        by_seed = rows.groupby("train.seed")["passkey_greedy_exact_match"]
        return by_seed.mean()[by_seed.count() >= DEPTHS].astype(float).sort_index()

    def too_few(self):
        """Why no verdict can be made (fewer than 2 seeds passed the gate), or None."""
        if len(self.passed) >= 2:
            return None
        return f"{len(self.passed)} of {self.seeds()} seeds passed the gate, a verdict needs 2"

    def seeds(self):
        """How many seeds the study has: those the study file sweeps and any other seed read
        (a study still running has fewer finished than planned)."""
        return len(set(self.planned or []) | set(self.seeds_read))

    # ---- the row format ----

    @staticmethod
    def per_seed(series):
        """'71: -0.051, 72: -0.040' (no seeds: "no runs")."""
        return ", ".join(f"{seed}: {v:+.3f}" for seed, v in series.items()) or "no runs"

    @staticmethod
    def interval(series):
        return fmt(*seeds.t_interval(series.tolist()))

    def regime(self):
        """The regime row 6 is measured in, from the committed study file: "trained and read with
        max(1, log_2 n_i) per causal row (n_i = the keys query i sees), 2 layers, L = 64,
        32,000 steps; read at 16x = 1,024 bytes"."""
        if self.setting is None or LOGN not in self.setting:
            return f"{LOGN} not in study.toml"
        v = self.setting[LOGN]
        mode, base = v.get("encoding.log_n", "off"), v.get("encoding.log_n_len", "L")
        where = {"always": "trained and read", "eval": "read (not trained)"}.get(mode, mode)
        layers = int(v["model.n_layers"])
        return (f"{where} with max(1, log_{base} n_i) per causal row (n_i = the keys query i "
                f"sees; encoding.log_n = {mode}), {layers} layer{'s' * (layers != 1)}, d_model "
                f"{v['model.d_model']}, L = {v['train.seq_len']}, {v['train.steps']:,} steps; "
                f"read at {DECISIVE:g}x = {int(DECISIVE * L):,} bytes")


def gate_line(study):
    """How many seeds passed the gate (of the seeds the study file sweeps), which were dropped
    and why, which have not finished."""
    n = study.seeds()
    runs = study.summary["run"].nunique()
    unread = [seed for seed in study.planned or [] if seed not in study.seeds_read]
    dropped = "; ".join(f"seed {seed} dropped from every paired statistic ({why})"
                        for seed, why in study.dropped.items())
    unfinished = "; ".join(f"seed {seed} not finished ({why})"
                           for seed, why in study.unfinished.items())
    return (f"{runs} runs. Gate (both arms' test loss at {L} below the bigram baseline, "
            f"in_distribution_ok): {len(study.passed)} of {n} seeds passed"
            + (f"; {dropped}" if dropped else "")
            + (f"; {unfinished}" if unfinished else "")
            + (f"; not read yet: seed {', '.join(map(str, unread))}" if unread else ""))


def secondary_rows(study):
    """Reported, never judged: each arm's loss at every factor, and each arm's passkey at L
    (row 6 is a loss claim: it needs the language model, not retrieval)."""
    def mean(series):  # the mean over the gated seeds, or why there is none
        return f"{series.mean():.3f}" if len(series) else "no runs"

    losses = "; ".join(f"{arm} " + ", ".join(f"{f:g}x {mean(study.loss(arm, f))}"
                                             for f in FACTORS) for arm in ARMS)
    retrieval = "; ".join(
        f"{arm} {fmt(*seeds.proportion_interval(study.passkey(arm).tolist()))} (per seed "
        + (", ".join(f"{seed}: {v:.2f}" for seed, v in study.passkey(arm).items()) or "none")
        + ")" for arm in ARMS)
    return [finetune_budget.secondary(
                "each arm's test loss, nats per byte",
                f"mean over the gated seeds: {losses}"),
            finetune_budget.secondary(
                f"each arm's retrieval at L = {L} (information: row 6 is a loss claim and needs "
                "no retrieval, so the skill rule does not apply)",
                f"passkey greedy exact match at {L}, mean over the {DEPTHS} depths, 95% t "
                f"interval over the gated seeds: {retrieval}")]


def reproduction_line(study):
    """rope64 retrained against the committed rope64 of results/context_extension_methods at
    the same seed: their test loss at 64 (the main row), equal to every digit summary.csv
    prints or not, and the binaries (commit column) that ran them."""
    there = study_files.read_sibling(study.dir, SIBLING, family="logn_trained")
    where = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(study.dir))),
                         os.path.basename(study_files.sibling_dir(study.dir, SIBLING,
                                                                  "logn_trained")))
    head = f"\n{BASE} retrained, against {where} (the same config and seeds)"
    if there is None:
        return f"{head}: not compared ({where}/summary.csv not found)."
    s = study.summary
    parts = []
    for seed in study.seeds_read:
        here = s[(s["variant"] == BASE) & (s["kind"] == "main") & (s["train.seed"] == seed)]
        old = there[(there["variant"] == BASE) & (there["kind"] == "main")
                    & (there["train.seed"] == seed)]
        if here.empty or old.empty:
            parts.append(f"seed {seed}: {'not in ' + where if old.empty else 'not finished'}")
            continue
        a, b = float(here["loss"].iloc[0]), float(old["loss"].iloc[0])
        same = "equal to every digit" if a == b else f"differs by {a - b:+.2g}"
        binaries = ""
        if "commit" in here and "commit" in old:
            binaries = (f", binaries {str(here['commit'].iloc[0])[:7]} here and "
                        f"{str(old['commit'].iloc[0])[:7]} there")
        parts.append(f"seed {seed}: {a:.6f} here, {b:.6f} there ({same}{binaries})")
    return f"{head}, test loss at {L}: {'; '.join(parts) or 'no runs'}."


def sinks_line(study):
    """The sink diagnostic of each rope64 base (`poslab sinks`, the protocol's "Also
    produced"), for every seed read: no claim of this table rests on it."""
    parts = []
    for seed in study.seeds_read:
        directory = os.path.join(study.dir, "sinks", run_dir(BASE, seed))
        has = os.path.exists(os.path.join(directory, "sink_heads.csv"))
        parts.append(f"seed {seed}: " + (sink_token.SinkHeads(directory).text() if has
                                         else f"not run (sinks/{run_dir(BASE, seed)} missing)"))
    return (f"\nSink diagnostic of the {BASE} bases (poslab sinks: mean attention on key 0 over "
            "the second half of each window of L bytes; a sink head >= "
            f"{sink_token.SINK_MASS}; no row here rests on it): {'; '.join(parts) or 'no runs'}.")


def table(study_dir, papers, record=None):
    """The claims table: the gate line, the header with a regime column, the papers' rows
    (paper.logn_trained(study, record) -> lines), the secondary rows, the reproduction of
    rope64, the sink diagnostic and the Holm line."""
    study = Study(study_dir)
    intro = (("SMOKE RUN (tiny models, a few steps): the numbers test the code, not the claims. "
              if study.smoke else "")
             + f"{gate_line(study)}. Loss in nats per byte on the whole test split in chunks of "
             f"f x {L} bytes (a token of the paper is a byte here: nats per token too); each "
             "difference rope64_logn minus rope64 paired by seed, mean and 95% t interval over "
             "the gated seeds (n - 1 df).")
    lines = table_head(intro, regime=True)
    own = Tally()  # this table's verdicts, for its Holm line; then the caller's count
    for paper in papers:
        lines += paper.logn_trained(study, own)
    lines += secondary_rows(study)
    own.pass_to(record)
    lines.append(reproduction_line(study))
    lines.append(sinks_line(study))
    lines.append(own.holm_line())
    return "\n".join(lines)
