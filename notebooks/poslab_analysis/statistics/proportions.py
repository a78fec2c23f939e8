"""Proportions whose unit is an answer (one right or wrong answer per instance): the Wilson
score interval of k right answers in n, and the (k, n) of summary rows."""
import math


def wilson(k, n, z=1.96):
    """(p, low, high) of the Wilson score interval of k successes in n trials."""
    if n <= 0:
        return float("nan"), float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def answers(rows, metric="accuracy", count="tokens"):
    """Per row: (right answers, answers) of a proportion `metric` over `count` answers."""
    return [(int(round(r[metric] * r[count])), int(r[count])) for _, r in rows.iterrows()
            if r[metric] == r[metric]]
