"""The rules every claims table judges by (docs/conventions.md, "Measuring a claim in its
paper's regime" and "Reporting a study"; each one is planted in tests/notebooks/test_claims_rules.py):
  - a verdict needs at least 2 seeds;
  - "A beats B": agree if the paired interval is above 0, disagree if it is below 0; an interval
    that includes 0 is inconclusive, never "disagree";
  - a comparison where both sides sit at the floor of the metric (every seed within MARGIN of it:
    exact match 0, say) or both at its ceiling is inconclusive: it cannot rank them;
  - a proportion whose unit is an answer (parity: 3 seeds x 1,152 answers) is judged on the
    pooled Wilson interval of every answer, not on a t interval over 3 seeds; a seed whose own
    interval contradicts the pooled verdict keeps it inconclusive;
  - one analysis choice per row (a weighting, a baseline, a reading of the chunks) is fixed in the
    study's protocol and gives the verdict; another choice that would change it is shown beside
    it as a sensitivity, never counted (sensitivity);
  - a claim the runs cannot measure in its paper's setting is inconclusive, with the reason, until
    it is rerun in that setting (outside_setting; docs/06, "Where the claims stand");
  - the skill rule, the gate's rule applied to the arms a row judges as well as to the base
    models: a retrieval row is judged only where each arm it judges has the skill in the setting
    its paper presupposes. A read that retrieves < 0.9 at L (the zero-shot read itself, or the
    zero-shot read a fine-tune starts from, with the fine-tune's positions) gives "inconclusive
    (no skill at L: ...)", and a fine-tune whose data lack the skill's signal (no passkey rows,
    where the base learned retrieval from them) gives "inconclusive (outside the paper's
    setting: ...)", the reason in the row (no_skill, no_signal, unless; docs/06, "The skill
    rule").

Each table row: the published claim, what the paper measured (its metric and range) and what
poslab measures for the verdict (the same, or why not), the measurement (mean over seeds and its
95% t interval, statistics/seeds.py; a paired difference where two conditions are compared; a
pooled Wilson interval where the unit is an answer), and the verdict by these rules. The papers'
rows are in claims/papers/, one module per paper; claims/tables.py says which study's table
holds which papers.
"""
from poslab_analysis.statistics import multiplicity, seeds
from poslab_analysis.statistics.proportions import wilson

# How close to the floor (or ceiling) every seed must be for a side to count as "at" it. A
# practical threshold, not a test: 0.02 is below the largest Wilson half-width of one evaluation
# (2.9 points for an exact match over 1,152 instances). It can call a side "at the floor" that
# pooled instances would tell apart from it (T5 on copy over (L, 2L]: about 0.016 against 0).
MARGIN = 0.02


def fmt(mean, low, high, n):
    if n == 0 or mean != mean:
        return "no runs"
    if n == 1 or low != low:
        return f"{mean:+.3f} (1 seed)"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}], n={n}"


# (agrees, disagrees) pairs of an interval (low, high). Neither holds -> inconclusive.
ABOVE_ZERO = (lambda low, high: low > 0, lambda low, high: high < 0)
BELOW_ZERO = (lambda low, high: high < 0, lambda low, high: low > 0)
AT_MOST_005 = (lambda low, high: high <= 0.05, lambda low, high: low > 0.05)
# "A beats B" on a score where higher is better: the paired interval A - B above 0 agrees, below
# 0 disagrees; an interval that includes 0 (both at 0, say) is inconclusive.
BEATS = ABOVE_ZERO


def at_least(threshold):
    """(agrees, disagrees) of "the value reaches `threshold`" (a retrieval rate against 0.9,
    say): agree if the interval's low end is >= threshold, disagree if its high end is below it;
    an interval that straddles it is inconclusive. The low end may touch the threshold: "at
    least 0.9" holds at 0.9."""
    return (lambda low, high: low >= threshold, lambda low, high: high < threshold)


def above(threshold):
    """(agrees, disagrees) of "the value is above `threshold`" (a difference against 0, or
    against a tolerated loss such as -0.05): agree if the whole interval is above it (low end >
    threshold), disagree if the whole interval is below it (high end < threshold); an interval
    that contains it is inconclusive. above(0.0) is ABOVE_ZERO."""
    return (lambda low, high: low > threshold, lambda low, high: high < threshold)


def verdict(m, agrees, disagrees):
    """agree / disagree / inconclusive for a measured interval m = (mean, low, high, n): the
    claim is judged only with at least 2 seeds, by agrees(low, high) and disagrees(low, high)."""
    _, low, high, n = m
    if n >= 2 and agrees(low, high):
        return "agree"
    if n >= 2 and disagrees(low, high):
        return "disagree"
    return "inconclusive"


def sensitivity(choice, interval, verdict_text):
    """The claim judged under an analysis choice other than the pre-registered one (another
    weighting, another baseline, another reading of the chunks): the interval and the verdict
    that choice gives, for the table to show beside the pre-registered verdict. It is never
    counted (nothing is tallied): one choice is fixed before the runs, the others are shown.
    interval None: the row already shows it (the same interval, judged otherwise)."""
    measured = "" if interval is None else f"{fmt(*interval)}, "
    return f"sensitivity, {choice}: {measured}{verdict_text} (shown, not voted)"


def outside_setting(reason):
    """docs/06's rule for a claim the committed runs cannot measure in its paper's setting (an
    evaluation option the paper's number relies on was not used, say): the row says why not and
    is inconclusive until it is rerun in that setting. The reason is part of the verdict, so the
    table says it; the count reads the first word ("inconclusive")."""
    return f"inconclusive ({reason})"


# The skill rule. SKILL: the passkey at L every seed of a stage-1 model must reach to count (the
# protocols' gate, reading/protocol_gates.py); the same threshold for the arms a row judges.
SKILL = 0.9


def no_skill(read, at_l, threshold=SKILL):
    """The reason a retrieval row cannot judge an arm whose skill is read from `read` (a variant
    name; its passkey at L per seed in `at_l`, a list or Series): the read retrieves < threshold
    at L in some seed, or was not read at L. None when every seed has the skill."""
    x = [float(v) for v in at_l if v == v]
    if not x:
        return f"no skill at L: {read} has no passkey read at L"
    if min(x) < threshold:
        return (f"no skill at L: {read} retrieves {sum(x) / len(x):.2f} at L, the gate asks "
                f"{threshold} of every seed")
    return None


def no_signal(arm, passkey_fraction):
    """The reason a fine-tune `arm` is outside the papers' setting for a retrieval claim: it was
    fine-tuned on data without the skill's signal (passkey_fraction 0, where its base learned
    retrieval from passkey rows; in the papers pre-training and fine-tuning data are of one
    kind). None if its data hold passkey rows, or if the fraction is unknown (None)."""
    if passkey_fraction is None or passkey_fraction > 0:
        return None
    return outside_paper(f"{arm} is fine-tuned on text without passkey rows, its base learned "
                         f"retrieval from them")


def outside_paper(reason):
    """A reason for `unless`: the arm is not in the setting the paper's effect presupposes
    (trained with a factor that is applied here at evaluation only, say)."""
    return f"outside the paper's setting: {reason}"


def unless(reasons, judged_verdict):
    """The verdict of a row under the skill rule: "inconclusive (reason; reason)" if any of
    `reasons` (None for a condition that holds) says an arm lacks the skill or its signal, else
    `judged_verdict`, the verdict the row's interval gives."""
    reasons = [r for r in reasons if r]
    return f"inconclusive ({'; '.join(reasons)})" if reasons else judged_verdict


def qualified(verdict_text, note):
    """A verdict the numbers support only with a qualification the reader must see (a fine-tune
    that has not converged, a margin wider than the paper's effect): "agree (note)". The count
    reads the first word, so the verdict is counted as it is; the note says how far it goes."""
    return f"{verdict_text} ({note})"


def at_bound(values, floor=None, ceiling=None, margin=MARGIN):
    """'floor' / 'ceiling' if every value (one per seed) is within `margin` of that bound of the
    metric, else None. No values: None."""
    x = [v for v in values if v == v]
    if not x:
        return None
    if floor is not None and max(x) <= floor + margin:
        return "floor"
    if ceiling is not None and min(x) >= ceiling - margin:
        return "ceiling"
    return None


def compare(a, b, rule=BEATS, floor=None, ceiling=None):
    """Verdict of 'A beats B' for per-seed Series a, b (paired over the seeds both have):
    inconclusive if both sides sit at the same bound, else `rule` on the paired interval.
    Returns (interval of a - b, verdict)."""
    common = a.index.intersection(b.index)
    m = seeds.t_interval((a[common] - b[common]).tolist())
    bound_a = at_bound(a[common].tolist(), floor, ceiling)
    if bound_a is not None and bound_a == at_bound(b[common].tolist(), floor, ceiling):
        return m, f"inconclusive (both at the {bound_a})"
    return m, verdict(m, *rule)


def pooled_within(groups, low_band, high_band):
    """Is a proportion inside [low_band, high_band] in every group? groups: one list per group
    (an evaluation length, say) of (k, n) per seed. Each group is judged on the Wilson interval
    of all its answers pooled over seeds: agree if every pooled interval lies inside the band and
    no seed's own interval lies wholly outside it (the seeds are alike); disagree if some pooled
    interval lies wholly outside the band; else inconclusive. Returns (verdict, pooled
    intervals as (p, low, high, answers))."""
    pooled, contradicting = [], False
    for per_seed in groups:
        k, n = sum(s[0] for s in per_seed), sum(s[1] for s in per_seed)
        p, low, high = wilson(k, n)
        pooled.append((p, low, high, n))
        for ks, ns in per_seed:
            _, lo_s, hi_s = wilson(ks, ns)
            contradicting |= lo_s > high_band or hi_s < low_band
    if not pooled or any(n == 0 for *_, n in pooled):
        return "inconclusive", pooled
    if any(low > high_band or high < low_band for _, low, high, _ in pooled):
        return "disagree", pooled
    if all(low >= low_band and high <= high_band for _, low, high, _ in pooled) and \
            not contradicting:
        return "agree", pooled
    return "inconclusive", pooled


def combined_verdict(parts):
    """One verdict for a claim measured by several comparisons: the common verdict if they
    agree, else each comparison's verdict by name."""
    verdicts = [v for _, v in parts]
    if len(set(verdicts)) == 1:
        return verdicts[0]
    return ", ".join(f"{v} ({name})" for name, v in parts)


class Tally:
    """The verdicts of the claims rows (not the exploratory or reference ones), per paper, for
    the summary at the top of docs/06; and, where a row gives the intervals behind its verdict,
    the verdict's p-value (statistics/multiplicity.py) for the Holm line of a study's table."""

    def __init__(self):
        self.rows = []  # (paper, [verdict of each comparison])
        self.weighed = []  # (row, verdict, p-value or None), rows that gave their intervals

    def add(self, paper, parts):
        self.rows.append((paper, [v.split(" ")[0] for v in parts]))

    def weigh(self, row, verdict_text, evidence, combine=None):
        """Record the p-value of an agree / disagree verdict made from `evidence`, a list of
        (interval, (agrees, disagrees)) combined by `combine` (one interval: itself)."""
        first = verdict_text.split(" ")[0]
        if first not in ("agree", "disagree"):
            return
        p = multiplicity.p_value(evidence, combine or (lambda vs: vs[0]), verdict)
        self.weighed.append((row, first, p))

    def pass_to(self, record):
        """Add this table's rows and weighed verdicts to the caller's count (`record`, a Tally or
        None: the summary at the top of docs/06 counts every table's verdicts)."""
        if record is not None:
            record.rows += self.rows
            record.weighed += self.weighed

    def holm_line(self):
        """How many verdicts the table makes and which survive Holm's correction over every
        comparison it counts (multiplicity.holm at family-wise 0.05)."""
        m = sum(len(parts) for _, parts in self.rows)
        made = sum(1 for _, parts in self.rows for v in parts if v in ("agree", "disagree"))
        tested = [(row, v, p) for row, v, p in self.weighed if p is not None]
        # The comparisons without a verdict count in m with p = 1: they were tested too.
        survives = multiplicity.holm([p for _, _, p in tested] + [1.0] * (m - len(tested)))
        kept = [f"{row} {v} (p = {p:.2g})" for (row, v, p), ok in zip(tested, survives) if ok]
        lost = [f"{row} {v} (p = {p:.2g})" for (row, v, p), ok in zip(tested, survives) if not ok]
        untested = made - len(tested)
        return (f"\nMultiplicity: {m} comparisons, {made} verdicts (agree or disagree). With Holm's "
                f"correction over the {m} (family-wise 0.05; p from each row's t interval against "
                f"its threshold, statistics/multiplicity.py), {len(kept)} survive: "
                f"{'; '.join(kept) or 'none'}. Not surviving: {'; '.join(lost) or 'none'}."
                + (f" {untested} verdicts have no t interval to test." if untested else ""))


def tally(record, paper, parts, row=None, evidence=None, combine=None):
    """Count a row's verdicts in `record` (a Tally, or None); with `evidence` (the intervals and
    rules behind its one verdict), also its p-value, under the name `row`."""
    if record is not None:
        record.add(paper, parts)
        if evidence is not None:
            record.weigh(row, parts[0], evidence, combine)


def table_head(intro, regime=False):
    """The opening of a study's claims table: a paragraph (`intro`: the gate line, the metric,
    the split, L) and the header of the five columns every study's rows fill; regime=True adds
    a sixth, after the claim: the regime the row measures it in (the method, s, the fine-tune's
    steps and length, L), for a study whose rows each have their own."""
    regime_column = "regime | " if regime else ""
    return [f"\n{intro}\n",
            f"| published claim | {regime_column}what the paper measured; what the verdict uses | "
            "measured | rule | verdict |",
            "|---|---|---|---|---|" + ("---|" if regime else "")]
