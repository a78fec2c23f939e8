"""The claims tables of docs/06-running-studies.md, computed from a study's summary.csv, so that
every number in them can be regenerated with one command:

    /usr/bin/python3 notebooks/claims.py results/lm_extrapolation

Each table row: the published claim, poslab's measurement (mean over seeds and its 95% t
interval, poslab_stats.py; a paired difference where two conditions are compared), and the
verdict: agree / disagree / inconclusive, by the rule printed with the row.
"""
import os
import sys

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import poslab_stats  # noqa: E402


def fmt(mean, low, high, n):
    if n == 0 or mean != mean:
        return "no runs"
    if n == 1 or low != low:
        return f"{mean:+.3f} (1 seed)"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}], n={n}"


def verdict(m, agrees, disagrees):
    """agree / disagree / inconclusive for a measured interval m = (mean, low, high, n): the
    claim is judged only with at least 2 seeds, by agrees(low, high) and disagrees(low, high)."""
    _, low, high, n = m
    if n >= 2 and agrees(low, high):
        return "agree"
    if n >= 2 and disagrees(low, high):
        return "disagree"
    return "inconclusive"


# The rules of the claims tables, as (agrees, disagrees) pairs.
ABOVE_ZERO = (lambda low, high: low > 0, lambda low, high: high < 0)
BELOW_ZERO = (lambda low, high: high < 0, lambda low, high: low > 0)
AT_MOST_005 = (lambda low, high: high <= 0.05, lambda low, high: low > 0.05)


def growth(summary, encoding, corpus, factor):
    """Paired over seeds: loss at `factor` x the training length minus loss at 1x."""
    rows = summary[(summary["encoding.type"] == encoding) & (summary["variant"] == corpus)
                   & (summary["kind"] == "length")]
    rows = rows[poslab_stats.gate_passed(rows)]
    at = rows.set_index(["train.seed", "factor"])["loss"]
    diffs = []
    for seed in rows["train.seed"].unique():
        if (seed, factor) in at and (seed, 1.0) in at and at[(seed, factor)] == at[(seed, factor)]:
            diffs.append(at[(seed, factor)] - at[(seed, 1.0)])
    return poslab_stats.t_interval(diffs)


def paired_at(summary, a, b, corpus, factor):
    """Paired over seeds: loss(a) - loss(b) at `factor`."""
    rows = summary[(summary["variant"] == corpus) & (summary["kind"] == "length")
                   & (summary["factor"] == factor)]
    rows = rows[poslab_stats.gate_passed(rows)]
    la = rows[rows["encoding.type"] == a].set_index("train.seed")["loss"].dropna()
    lb = rows[rows["encoding.type"] == b].set_index("train.seed")["loss"].dropna()
    common = la.index.intersection(lb.index)
    return poslab_stats.t_interval((la[common] - lb[common]).tolist())


def lm_extrapolation(study_dir):
    summary = pd.read_csv(os.path.join(study_dir, "summary.csv"))
    top = summary[summary["kind"] == "length"]["factor"].max()
    lines = []
    for corpus in list(dict.fromkeys(summary["variant"])):
        runs = summary[(summary["variant"] == corpus)].drop_duplicates("run")
        dropped = runs[~poslab_stats.gate_passed(runs)]
        lines.append(f"\n**{corpus}** (loss in nats/byte; {len(runs)} runs, gate dropped "
                     f"{len(dropped)}{': ' + ', '.join(dropped['run']) if len(dropped) else ''})\n")
        lines.append("| published claim (Press et al. 2022) | measured: loss at "
                     f"{top:g}x minus loss at 1x, or a paired difference | rule | verdict |")
        lines.append("|---|---|---|---|")
        for encoding, claim in [("sinusoidal", "sinusoidal: loss explodes on longer inputs"),
                                ("rope", "rotary: loss grows on longer inputs")]:
            m = growth(summary, encoding, corpus, top)
            lines.append(f"| {claim} | {encoding}: {fmt(*m)} | interval above 0 | "
                         f"{verdict(m, *ABOVE_ZERO)} |")
        # T5: Press et al. find it no worse than at L up to ~5x, and worse only at ~25x.
        m = growth(summary, "t5_bias", corpus, 2.0)
        lines.append(f"| T5 bias: no worse at 2x than at 1x (degrades only far beyond) | t5_bias, "
                     f"loss at 2x minus 1x: {fmt(*m)} | upper end <= +0.05 | "
                     f"{verdict(m, *AT_MOST_005)} |")
        m = growth(summary, "alibi", corpus, top)
        lines.append(f"| ALiBi: flat (or better) on longer inputs | alibi: {fmt(*m)} | "
                     f"upper end <= +0.05 | {verdict(m, *AT_MOST_005)} |")
        for other in ("sinusoidal", "rope"):
            m = paired_at(summary, "alibi", other, corpus, top)
            lines.append(f"| ALiBi beats {other} at {top:g}x | alibi - {other}: {fmt(*m)} | "
                         f"interval below 0 | {verdict(m, *BELOW_ZERO)} |")
        for encoding in ("none", "learned", "transformer_xl"):
            m = growth(summary, encoding, corpus, top)
            lines.append(f"| (no claim in Press et al.; measured for reference) | {encoding}: "
                         f"{fmt(*m)} | | |")
    return "\n".join(lines)


def state_reuse(study_dir, task="lm"):
    """Dai et al. 2019's state-reuse claims on a study with axes encoding.type and
    memory.mem_len (trained memory) and memory factors (evaluation memory)."""
    summary = pd.read_csv(os.path.join(study_dir, "summary.csv"))
    if "task.name" in summary:
        summary = summary[summary["task.name"] == task]
    rows = summary[(summary["kind"] == "memory")]
    rows = rows[poslab_stats.gate_passed(rows)]
    trained = sorted(rows["memory.mem_len"].unique())
    m_train = max(trained)

    def loss(encoding, trained_mem, eval_mem):
        part = rows[(rows["encoding.type"] == encoding) & (rows["memory.mem_len"] == trained_mem)
                    & (rows["mem_len"] == eval_mem)]
        return part.set_index("train.seed")["loss"].dropna()

    def paired(a, b):
        common = a.index.intersection(b.index)
        return poslab_stats.t_interval((a[common] - b[common]).tolist())

    longest = rows["mem_len"].max()
    lines = [f"\n**{task}** (loss in nats per scored token; trained memory {m_train}, evaluation "
             f"memories {', '.join(str(int(v)) for v in sorted(rows['mem_len'].unique()))})\n",
             "| published claim (Dai et al. 2019) | measured (paired over seeds) | verdict |",
             "|---|---|---|"]
    m = paired(loss("sinusoidal", 0, m_train), loss("sinusoidal", 0, 0))
    lines.append(f"| absolute positions break under state reuse | sinusoidal trained without memory, "
                 f"memory {m_train} minus memory 0: {fmt(*m)} | {verdict(m, *ABOVE_ZERO)} |")
    for enc in ("transformer_xl", "shaw"):
        m = paired(loss(enc, m_train, m_train), loss(enc, 0, m_train))
        lines.append(f"| training with recurrence helps ({enc}) | trained with memory {m_train} "
                     f"minus trained without, both evaluated at memory {m_train}: {fmt(*m)} | "
                     f"{verdict(m, *BELOW_ZERO)} |")
    m = paired(loss("transformer_xl", m_train, longest), loss("transformer_xl", m_train, m_train))
    lines.append(f"| a longer evaluation memory helps a relative encoding | transformer_xl, memory "
                 f"{longest} minus memory {m_train}: {fmt(*m)} | {verdict(m, *BELOW_ZERO)} |")
    for a, b in (("transformer_xl", "shaw"), ("shaw", "sinusoidal")):
        m = paired(loss(a, m_train, m_train), loss(b, m_train, m_train))
        lines.append(f"| with recurrence, {a} < {b} | {a} minus {b}, both trained and evaluated "
                     f"at memory {m_train}: {fmt(*m)} | {verdict(m, *BELOW_ZERO)} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    study_dir = argv[1].rstrip("/")
    name = os.path.basename(study_dir)
    if name.startswith("lm_extrapolation"):
        print(lm_extrapolation(study_dir))
        return 0
    if name.startswith("state_reuse"):
        print(state_reuse(study_dir))
        return 0
    print(f"claims.py: no claims table is defined for {name}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
