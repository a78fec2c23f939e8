"""Chiang & Cholak 2022 (Overcoming a theoretical limitation of self-attention), the log-n remedy:
multiplying the attention logits by log n (n = the number of keys) keeps attention sharp at
lengths beyond training. Their code multiplies the query input by ln n (n = the whole encoder
input's length), in training and at test; `first` and parity are trained at 50 and tested at
1,000 (20x), with 2 layers and d_model 16.

Two rows 6, one per study:
  - context_extension_methods: RoPE with log-n at evaluation only (Qwen's use_logn_attn, base
    L = 64) on a model trained without it: another experiment than theirs, inconclusive
    whatever its interval says; its rows with ReRoPE and Self-Extend are Su's (su2023.py);
  - logn_trained: the factor trained in (experiments/logn_trained.protocol.md), read at 16x."""
from poslab_analysis.claims.rules import BELOW_ZERO, fmt, outside_paper, tally, unless, verdict
from poslab_analysis.claims.studies.logn_trained import BASE, BESIDE, DECISIVE, LOGN
from poslab_analysis.statistics.seeds import paired

NAME = "Chiang & Cholak 2022"
PAPER_REGIME = ("ln n of the whole input (its length with CLS) on the query input, in training "
                "and at test; 2 layers, d_model 16; trained at 50, tested at 1,000 (20x)")


def context_extension_methods(study, record=None):
    """Rule 6 alone. Chiang & Cholak train their models with the log n factor; here it is applied
    at evaluation only, to a model trained without it: outside the paper's setting, whatever the
    interval says (shown). The trained-in test is row 6 of the logn_trained study's table."""
    loss, L = study.loss, 64
    base_at_4x = loss("rope64", 4 * L).mean()
    unigram = study.unigram
    reason = (f"the paper trains with the log n factor, here it is applied at evaluation only, "
              f"to a read whose loss at 4x is already broken (rope64 {base_at_4x:.3f}; the "
              f"bigram baseline {study.bigram:.3f}, the unigram {unigram:.3f}); the factor "
              f"trained in is row 6 of the logn_trained table")
    return [study.row(
        "6. log-n scaling helps beyond L (RoPE, log-n at evaluation only)", NAME,
        "cross-entropy at test lengths beyond training (parity, first, 50 -> 1,000); here the "
        "loss at 4x", "zs_logn minus rope64, loss at 4x",
        paired(loss("zs_logn", 4 * L), loss("rope64", 4 * L)),
        "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record,
        f"; 16x: {fmt(*paired(loss('zs_logn', 16 * L), loss('rope64', 16 * L)))}; 1x (log-n is "
        f"the identity there): {fmt(*paired(loss('zs_logn', L), loss('rope64', L)))}",
        reasons=[outside_paper(reason)])]


def logn_trained(study, record=None):
    """Row 6 of experiments/logn_trained.protocol.md ("Statistic and decision", fixed before the
    runs): rope64_logn minus rope64, test loss at 16x (the longest read; the paper's test length
    is 20x its training length), paired by seed over the seeds whose both arms pass the gate;
    interval below 0 agrees, above 0 disagrees, across 0 inconclusive. Beside it, not decisive:
    the same difference at 2x, 4x (the length of the evaluation-only row 6), 8x and 1x (what the
    factor costs in distribution)."""
    per_seed, decisive = study.difference(DECISIVE)
    v = unless([study.too_few()], verdict(decisive, *BELOW_ZERO))
    tally(record, NAME, [v], row=f"6. {NAME} (trained in)", evidence=[(decisive, BELOW_ZERO)])
    notes = {4.0: " (the evaluation-only row's length)", 1.0: " (the factor's cost at L)"}
    beside = "; ".join(f"{f:g}x {fmt(*study.difference(f)[1])}{notes.get(f, '')}"
                       for f in BESIDE)
    arms = "; ".join(f"{arm} at {DECISIVE:g}x {study.interval(study.loss(arm, DECISIVE))}"
                     for arm in (BASE, LOGN))
    return [
        f"| 6. log-n scaling, trained in, helps beyond L ({NAME}) | here: {study.regime()}; the "
        f"paper: {PAPER_REGIME} | cross-entropy at test lengths beyond training (first, parity: "
        f"50 -> 1,000); here the test loss per byte at {DECISIVE:g}x, the longest read | {LOGN} "
        f"minus {BASE}, loss at {DECISIVE:g}x, paired by seed: {fmt(*decisive)} (per seed "
        f"{study.per_seed(per_seed)}); beside, not decisive: {beside}; {arms} | interval below 0 "
        f"agrees, above 0 disagrees, across 0 inconclusive | {v} |"]
