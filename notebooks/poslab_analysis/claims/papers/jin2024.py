"""Jin et al. 2024, Self-Extend (LLM Maybe LongLM): without training, grouped positions for far
keys keep the perplexity flat up to (L - W) G + W and let the model retrieve a passkey beyond L
(their README's demo; PG19 perplexity and passkey in the paper). Rules 2 and 3 of the second
context-extension study: W = 16, G = 16 (the paper's regime, W = L/4; exact to 784 bytes) and,
as a second row each, W = 56, G = 28 (the pilot's window that keeps retrieval at L; to 280)."""
from poslab_analysis.claims.rules import fmt, tally, unless, verdict
from poslab_analysis.statistics import seeds
from poslab_analysis.statistics.seeds import paired

NAME = "Jin et al. 2024"
FLAT = 0.05   # nats/byte: "flat"
RETRIEVES = 0.5   # greedy exact match: "retrieves"
ARMS = (("zs_se_w16_g16", "W = 16, G = 16 (the paper's regime)", 784, (2, 4, 8), (2,)),
        ("zs_se_w56_g28", "W = 56, G = 28 (keeps retrieval at L)", 280, (2, 4), (2, 4)))


def every(parts):
    """One verdict for a rule that must hold at every length: agree if each part agrees,
    disagree if any disagrees, else inconclusive."""
    return ("agree" if parts and all(p == "agree" for p in parts) else
            "disagree" if any(p == "disagree" for p in parts) else "inconclusive")


def at_every(multiples, interval_at, judged):
    """(verdict of `judged` = (agrees, disagrees) at every multiple of L, 'Mx: interval; ...',
    the intervals with their rule, for the verdict's p-value)."""
    intervals = [(m, interval_at(m)) for m in multiples]
    return (every([verdict(interval, *judged) for _, interval in intervals]),
            "; ".join(f"{m}x: {fmt(*interval)}" for m, interval in intervals),
            [(interval, judged) for _, interval in intervals])


def context_extension_methods(study, record=None):
    loss, passkey, L = study.loss, study.passkey, 64
    flat = (lambda low, high: high <= FLAT, lambda low, high: low > FLAT)
    retrieves = (lambda low, high: low >= RETRIEVES, lambda low, high: high < RETRIEVES)
    lines = []
    for variant, setting, bound, multiples, _ in ARMS:
        v, shown, evidence = at_every(
            multiples, lambda m: paired(loss(variant, m * L), loss(variant, L)), flat)
        beyond = paired(loss(variant, 16 * L), loss(variant, L))
        tally(record, NAME, [v], row=f"2. {NAME} ({variant})", evidence=evidence, combine=every)
        lines.append(
            f"| 2. Self-Extend keeps the loss flat up to (L - W) G + W = {bound} bytes, "
            f"{setting} ({NAME}) | perplexity up to the bound, no training | {variant}, loss at "
            f"N minus at 1x: {shown}; beyond the bound, 16x: {fmt(*beyond)} | upper "
            f"end <= {FLAT} at every N agrees, lower end > {FLAT} at any disagrees | {v} |")
    for variant, setting, bound, _, multiples in ARMS:
        v, shown, evidence = at_every(
            multiples, lambda m: seeds.proportion_interval(passkey(variant, m * L).tolist()),
            retrieves)
        # The skill rule: a zero-shot read that does not retrieve at L has no skill to extend.
        v = unless(study.skill(variant), v)
        tally(record, NAME, [v], row=f"3. {NAME} ({variant})", evidence=evidence, combine=every)
        lines.append(
            f"| 3. Self-Extend retrieves beyond L without training, {setting} ({NAME}) | passkey "
            f"beyond L (README demo: ~5k tokens, Llama-2 4k) | {variant}, passkey (mean over "
            f"depths): {shown}; at 1x {study.proportion(passkey(variant, L))}; rope64 "
            f"at 2x {study.proportion(passkey('rope64', 2 * L))} | lower end >= {RETRIEVES} agrees, "
            f"upper end < {RETRIEVES} disagrees | {v} |")
    return lines
