"""Xiao et al. 2023, StreamingLLM: a window cache collapses once the first tokens are evicted,
and keeping a few of them as attention sinks restores it (Llama-2-7B on 400k PG19 tokens:
window 3359.95, 4 sinks 9.59); with a learnable sink (a sink token pretrained in) one is enough
(160M models: 18.01 with 1, 18.02 with 4; vanilla 18.49 and 18.05); without its sink token the
sink-token model collapses (1,235 with 0 sinks). Rules 7 and 8 of the second context-extension
study (context_extension_methods: the learned sink is gpt-oss's per-head sink logit, not a
token), and rows 7, 8 and 8b of the sink-token study (sink_token: 4-layer models, the paper's
prepended sink token, a cache of half of L; its protocol's Decisions)."""
from poslab_analysis.claims.rules import fmt, outside_paper, qualified, tally, unless, verdict
from poslab_analysis.statistics.seeds import paired

NAME = "Xiao et al. 2023"
COLLAPSE = 0.1     # nats/byte: window minus sinks, "collapses"
ENOUGH = 0.02      # nats/byte: 1 sink minus 4, "one is enough"
# Both rows presuppose an attention sink: a head that puts its weight on the first tokens
# whatever they are, so that evicting them changes what the model computes. None is shown here,
# and the setting cannot show a collapse: with 2 layers only the second layer's inputs depend on
# the context, and a window of 63 cached tokens at positions inside the cache is exactly the
# condition the model was trained in. Inconclusive until a sink is shown to exist.
NO_SINK = ("no attention sink shown: the models have 2 layers, so only the second layer's "
           "inputs depend on the context, and a window of 63 at positions inside the cache is "
           "the training condition")
LEARNED_SINK = outside_paper(
    "gpt-oss's learned sink logit, not the paper's prepended learned sink token; the threshold "
    f"{ENOUGH} is the size of the paper's whole effect (vanilla, 1 sink against 4: "
    "ln(18.49/18.05) = 0.024 nats per token of several bytes), and rope64 without a learned sink "
    "shows 1 = 4 as well")


def context_extension_methods(study, record=None):
    stream = study.stream
    sinks4 = stream("rope64", "sinks")
    collapse = paired(stream("rope64", "window"), sinks4)
    v7 = unless([NO_SINK], verdict(collapse, lambda low, high: low > COLLAPSE,
                                   lambda low, high: high < COLLAPSE))
    tally(record, NAME, [v7])
    beside = "; ".join(f"{mode} minus sinks {fmt(*paired(stream('rope64', mode), sinks4))}"
                       for mode in ("recompute", "memory", "dense"))
    lines = [
        f"| 7. a window collapses once the first tokens are evicted; 4 sinks restore it ({NAME}) "
        f"| perplexity over a long stream, window 0 + 4,096 against 4 + 4,092 (3,359.95 against "
        f"9.59); here the loss over 6,400 bytes, 63 cached | rope64, window minus 4 sinks: "
        f"{fmt(*collapse)}; {beside}; the 4-sink loss {study.interval(sinks4)} | lower end > "
        f"{COLLAPSE} agrees, upper end < {COLLAPSE} disagrees | {v7} |"]
    learned = paired(stream("sink_stream_s1", "sinks"), stream("rope64_sink", "sinks"))
    v8 = unless([NO_SINK, LEARNED_SINK], verdict(learned, lambda low, high: high <= ENOUGH,
                                                 lambda low, high: low > ENOUGH))
    tally(record, NAME, [v8])
    vanilla = paired(stream("stream_s1", "sinks"), sinks4)
    window = paired(stream("rope64_sink", "window"), stream("rope64_sink", "sinks"))
    lines.append(
        f"| 8. with a learned sink, one sink token is enough ({NAME}) | perplexity of 160M "
        f"models pretrained with a sink token, 1 + 1,023 against 4 + 1,020 (18.01, 18.02; "
        f"vanilla 18.49, 18.05); here gpt-oss's sink logit | rope64_sink, 1 sink minus 4: "
        f"{fmt(*learned)}; rope64 (no learned sink), 1 minus 4: {fmt(*vanilla)}; rope64_sink, "
        f"window (0 sinks) minus 4: {fmt(*window)} | upper end <= {ENOUGH} agrees, lower end > "
        f"{ENOUGH} disagrees | {v8} |")
    return lines


# The sink-token study (experiments/sink_token.protocol.md, "Decisions"); the same thresholds.
PAPER_REGIME_7 = ("Llama-2-7B, cache 4,096, 400k PG19 tokens; 160M models pretrained from "
                  "scratch, cache 1,024")
PAPER_REGIME_8 = "160M models pretrained with a sink token, cache 1,024"
COLLAPSES = (lambda low, high: low > COLLAPSE, lambda low, high: high < COLLAPSE)
ONE_IS_ENOUGH = (lambda low, high: high <= ENOUGH, lambda low, high: low > ENOUGH)


def no_sink_head(study, base, every_seed):
    """The reason a row that presupposes sink heads in `base` is inconclusive, or None: with
    every_seed, some gated seed has no sink head (rows 8, 8b); without, no gated seed has one
    (row 7). The measured column shows the diagnostic in full."""
    missing = study.no_sink_head(base)  # [(seed, why)] of the gated seeds without a sink head
    why = "; ".join(f"seed {seed}: {text}" for seed, text in missing)
    if every_seed and missing:
        return f"no sink head in a gated seed of {base} ({why})"
    if not every_seed and len(missing) == len(study.seeds(base)):
        return f"no sink head in any gated seed of {base} ({why or 'no gated seeds'})"
    return None


def direction(interval):
    """Row 8b's direction, beside its verdict: is the window worse than S = 1?"""
    _, low, high, n = interval
    if n < 2:
        return "direction not measured"
    if low > 0:
        return "window worse than S = 1: interval above 0"
    if high < 0:
        return "window better than S = 1: interval below 0"
    return "direction unresolved: interval includes 0"


def sink_token(study, record=None):
    """Rows 7, 8 and 8b on the sink-token study (studies/sink_token.py's Study): each a paired
    difference of stream losses over the gated seeds, the within-stream SE per seed beside it."""
    here = study.regime()

    def diff(base, a, b):
        interval = study.difference(base, a, b)[1]
        return interval, f"{fmt(*interval)} ({study.within_text(base, a, b)})"

    # 7. vanilla4: window (S = 0) minus S = 4; inconclusive without a sink head in any seed.
    collapse, collapse_text = diff("vanilla4", "window", "S4")
    v7 = unless([no_sink_head(study, "vanilla4", every_seed=False)],
                verdict(collapse, *COLLAPSES))
    tally(record, NAME, [v7], row=f"7. {NAME}", evidence=[(collapse, COLLAPSES)])
    beside = "; ".join(f"{label} minus S = 4 {diff('vanilla4', mode, 'S4')[1]}"
                       for mode, label in (("recompute", "recompute"), ("S1", "S = 1")))
    lines = [
        f"| 7. a window collapses once the first tokens are evicted; 4 sinks restore it ({NAME}) "
        f"| here: {here}; the paper: {PAPER_REGIME_7} | perplexity over a long stream, window "
        f"0 + 4,096 against 4 + 4,092 (3,359.95 against 9.59; 160M: 27.87 against 18.05); here "
        f"vanilla4's loss per byte, window (S = 0) minus S = 4 | vanilla4, window minus S = 4: "
        f"{collapse_text}; {beside}; the S = 4 loss {study.interval(study.stream('vanilla4', 'S4'))};"
        f" sink heads: {study.diagnostic_text('vanilla4')} | no gated seed of vanilla4 with a "
        f"sink head: inconclusive; else lower end > {COLLAPSE} agrees, upper end < {COLLAPSE} "
        f"disagrees | {v7} |"]

    # 8. sink4: S = 1 (the sink token alone) minus S = 4.
    sink_reason = no_sink_head(study, "sink4", every_seed=True)
    enough, enough_text = diff("sink4", "S1", "S4")
    v8 = unless([sink_reason], verdict(enough, *ONE_IS_ENOUGH))
    tally(record, NAME, [v8], row=f"8. {NAME}", evidence=[(enough, ONE_IS_ENOUGH)])
    lines.append(
        f"| 8. with a learnable sink token pretrained in, one sink is enough ({NAME}) | here: "
        f"{here}; the paper: {PAPER_REGIME_8} | perplexity, 1 + 1,023 against 4 + 1,020 (18.01 "
        f"against 18.02; vanilla 18.49, 18.05); here sink4's loss per byte, S = 1 (the sink "
        f"token alone) minus S = 4 (the sink and 3 bytes) | sink4, S = 1 minus S = 4: "
        f"{enough_text}; vanilla4 (no sink token), S = 1 minus S = 4: "
        f"{diff('vanilla4', 'S1', 'S4')[1]}; sink heads: {study.diagnostic_text('sink4')} | a "
        f"gated seed of sink4 without a sink head: inconclusive; else upper end <= {ENOUGH} "
        f"agrees, lower end > {ENOUGH} disagrees | {v8} |")

    # 8b. sink4: window (the sink token evicted) minus S = 1; the direction beside the verdict.
    evicted, evicted_text = diff("sink4", "window", "S1")
    judged = verdict(evicted, *COLLAPSES)
    v8b = unless([sink_reason], judged)
    v8b = qualified(v8b, direction(evicted)) if v8b == judged else v8b
    tally(record, NAME, [v8b], row=f"8b. {NAME}", evidence=[(evicted, COLLAPSES)])
    lines.append(
        f"| 8b. without its sink token, the sink-token model collapses ({NAME}) | here: {here}; "
        f"the paper: {PAPER_REGIME_8} | perplexity, 0 + 1,024 against 1 + 1,023 (1,235 against "
        f"18.01); here sink4's loss per byte, window (the sink token evicted) minus S = 1 | "
        f"sink4, window minus S = 1: {evicted_text}; recompute minus S = 1: "
        f"{diff('sink4', 'recompute', 'S1')[1]} | a gated seed of sink4 without a sink head: "
        f"inconclusive; else lower end > {COLLAPSE} agrees, upper end < {COLLAPSE} disagrees; "
        f"the direction beside | {v8b} |")
    return lines
