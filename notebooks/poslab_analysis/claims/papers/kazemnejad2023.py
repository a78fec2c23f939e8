"""Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization": NoPE and
T5's bias generalize better than absolute positions, ALiBi and RoPE, on the transduction tasks of
the length-generalization study. The paper's metric: exact match at every test length in
(L, 2L] (pooled_up_to_2x); the protocol's, exact match at 2x, is shown beside it."""
import pandas as pd

from poslab_analysis.claims.rules import combined_verdict, compare, fmt, tally
from poslab_analysis.claims.studies.length_generalization import by_seed, task_rows
from poslab_analysis.statistics import seeds

NAME = "Kazemnejad et al. 2023"
TRANSDUCTION_TASKS = ("copy", "reverse", "sort")
ABSOLUTE = ("sinusoidal", "learned")


def pooled_up_to_2x(summary, task, encoding, kind="length"):
    """Kazemnejad et al.'s range: exact match over every test length in (L, 2L], per seed. The
    study's buckets partition it (1.5x holds the lengths (L, 1.5L], 2x those of (1.5L, 2L],
    instance_batcher.hpp), so the instances of the buckets with factor in (1, 2] are pooled:
    sum(exact match x instances) / sum(instances). Series over seeds."""
    rows = summary[(summary["variant"] == task) & (summary["kind"] == kind)
                   & (summary["factor"] > 1) & (summary["factor"] <= 2)
                   & (summary["encoding.type"] == encoding)]
    rows = rows[seeds.gate_passed(rows)]
    out = {}
    for seed, g in rows.groupby("train.seed"):
        g = g.dropna(subset=["exact_match"])
        if len(g) == 2:  # both buckets evaluated
            out[seed] = float((g["exact_match"] * g["instances"]).sum() / g["instances"].sum())
    return pd.Series(out, dtype=float)


def claim_rows(summary, record=None):
    """NoPE and T5 against the others, on the paper's range (every length in (L, 2L], pooled)
    and on the protocol's (exact match at 2x only)."""
    rows = []
    for better, claim in (("none", "NoPE generalizes better than absolute positions"),
                          ("t5_bias", "T5's bias generalizes better than absolute positions"),
                          ("none", "NoPE generalizes better than ALiBi and RoPE"),
                          ("t5_bias", "T5's bias generalizes better than ALiBi and RoPE")):
        others = ABSOLUTE if "absolute" in claim else ("alibi", "rope")
        for task in TRANSDUCTION_TASKS:
            paper, paper_parts, protocol, protocol_parts = [], [], [], []
            at_2x = task_rows(summary, task, "length", 2.0)
            for other in others:
                m, v = compare(pooled_up_to_2x(summary, task, better),
                               pooled_up_to_2x(summary, task, other), floor=0.0, ceiling=1.0)
                paper.append(f"{better} - {other}: {fmt(*m)}")
                paper_parts.append((other, v))
                m, v = compare(by_seed(at_2x, better), by_seed(at_2x, other), floor=0.0,
                               ceiling=1.0)
                protocol.append(f"{better} - {other}: {fmt(*m)}")
                protocol_parts.append((other, v))
            tally(record, NAME, [v for _, v in paper_parts])
            rows.append(f"| {claim} ({NAME}) | {task} | {'; '.join(paper)} | "
                        f"{combined_verdict(paper_parts)} | {'; '.join(protocol)} | "
                        f"{combined_verdict(protocol_parts)} |")
    return rows


def length_generalization(study, record=None):
    return ["\n**Claims, Kazemnejad et al.** The paper: exact match at every test length in "
            "(L, 2L]. The verdict uses it: the instances of the 1.5x and 2x buckets (token "
            "lengths 33-64, L = 32) pooled, per seed, then paired over the seeds that pass the "
            "gate in both conditions. The protocol's metric, exact match at 2x only (the far "
            "bucket, lengths 49-64), is shown beside it with its verdict. Agree: interval "
            "above 0; disagree: below 0; an interval including 0, or both sides at the floor "
            "(every seed within 0.02 of 0) or at the ceiling, is inconclusive.\n",
            "| published claim | task | measured: exact match over (L, 2L] | verdict | "
            "protocol: exact match at 2x | its verdict |", "|---|---|---|---|---|---|"] \
        + claim_rows(study.summary, record)
