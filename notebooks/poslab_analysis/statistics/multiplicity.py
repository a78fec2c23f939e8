"""How many verdicts a claims table makes, and which of them survive a Holm correction.

A study's table makes many verdicts at once (the second context-extension study: 15 rows), each
from a 95% interval. With that many, some "agree" or "disagree" would appear by chance alone;
Holm's step-down procedure keeps the chance of any false verdict in the whole table at 5%:

    sort the m p-values p_(1) <= ... <= p_(m); the verdict of p_(i) survives if
    p_(j) <= 0.05 / (m - j + 1) for every j <= i                      (Holm 1979)

The p-value of a verdict. A row's verdict comes from its 95% t interval over seeds,
mean +- t_{0.975, n-1} * se, judged against the row's threshold (0, or 0.05 nats/byte, ...):
the interval lies wholly on one side. Widen the interval, mean +- k * se with k > t_{0.975}, and
the verdict holds until k reaches k*, where an end touches the threshold. The verdict's p-value
is the level at which that happens, p = 2 (1 - T_{n-1}(k*)): the two-sided p-value of the t test
of the mean against the threshold, found by the row's own rule, whatever its threshold. A verdict
made from several intervals (at every length) widens all of them together. A verdict whose
seeds do not differ at all (se = 0) has p = 0; one that holds at every width although its seeds
differ (a rule on the mean alone) has none: the interval does not test it.

Only the Python standard library: the t distribution's CDF is integrated from its density.
"""
import math

from poslab_analysis.statistics import seeds

ALPHA = 0.05


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom: 1/2 plus the integral of the
    density from 0 to t (Simpson's rule, 2,000 steps; far below the 3 decimals shown)."""
    if t < 0:
        return 1.0 - t_cdf(-t, df)
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(x):  # f(x) = norm * (1 + x^2 / df)^(-(df + 1) / 2)
        return norm * (1 + x * x / df) ** (-(df + 1) / 2)

    steps = 2000
    h = t / steps
    total = density(0) + density(t) + sum((4 if i % 2 else 2) * density(i * h)
                                           for i in range(1, steps))
    return min(1.0, 0.5 + total * h / 3)


def widened(interval, k):
    """The interval (mean, low, high, n) with its half-width scaled from t_{0.975, n-1} to k."""
    mean, low, high, n = interval
    se = (high - low) / (2 * seeds.t975(n - 1))
    return mean, mean - k * se, mean + k * se, n


def p_value(evidence, combine, verdict_of):
    """The p-value of a verdict made from `evidence`, a list of (interval, (agrees, disagrees)),
    by `combine` (a list of verdicts -> one) and verdict_of(interval, agrees, disagrees): the
    level at which the widened intervals stop giving it. None if it is not agree or disagree, or
    if an interval has fewer than 2 seeds."""
    if any(interval[3] < 2 or interval[1] != interval[1] for interval, _ in evidence):
        return None
    df = min(interval[3] for interval, _ in evidence) - 1

    def at(k):
        return combine([verdict_of(widened(interval, k), *judged) for interval, judged in evidence])

    given = at(seeds.t975(df))
    if given not in ("agree", "disagree"):
        return None
    low, high = seeds.t975(df), 1e6
    if at(high) == given:  # holds at any width: the seeds agree exactly (p = 0), or the rule
        # reads the mean alone and the interval cannot test it (no p)
        return 0.0 if all(interval[2] == interval[1] for interval, _ in evidence) else None
    for _ in range(100):  # bisection: at(low) == given, at(high) != given
        middle = (low + high) / 2
        low, high = (middle, high) if at(middle) == given else (low, middle)
    return 2 * (1 - t_cdf(low, df))


def holm(pvalues, alpha=ALPHA):
    """Which of `pvalues` survive Holm's step-down correction at family-wise level `alpha`: a list
    of booleans in the same order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    survives = [False] * len(pvalues)
    m = len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (m - rank):
            break
        survives[i] = True
    return survives
