"""Xiao et al. 2023, StreamingLLM: a window cache collapses once the first tokens are evicted,
and keeping a few of them as attention sinks restores it (Llama-2-7B on 400k PG19 tokens:
window 3359.95, 4 sinks 9.59); with a learnable sink (a sink token pretrained in) one is enough
(160M models: 18.01 with 1, 18.02 with 4; vanilla 18.49 and 18.05). Rules 7 and 8 of the second
context-extension study; here the learned sink is gpt-oss's per-head sink logit, not a token."""
from poslab_analysis.claims.rules import fmt, outside_paper, tally, unless, verdict
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
