"""The paper-metric values the docs quote, one row per (variant, encoding, kind, metric): mean
and 95% t interval over gated seeds, for STUDY/paper_metrics.csv (the docs check requires the
committed file to equal what this prints)."""
import os

import pandas as pd

from poslab_analysis.claims.papers.kazemnejad2023 import pooled_up_to_2x
from poslab_analysis.claims.papers.press2022 import T5_FAR_FACTORS, context_matched
from poslab_analysis.claims.papers.ruoss2023 import length_averaged
from poslab_analysis.claims.studies.length_generalization import encodings_of
from poslab_analysis.claims.studies.lm_extrapolation import growth
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds


def metrics_csv(study_dir):
    """STUDY/paper_metrics.csv as text; SystemExit for a study without paper metrics."""
    name = os.path.basename(study_dir)
    rows = []

    def add(variant, encoding, kind, metric, series_or_interval):
        m = series_or_interval if isinstance(series_or_interval, tuple) else \
            seeds.t_interval(series_or_interval.tolist())
        rows.append({"variant": variant, "encoding.type": encoding, "kind": kind,
                     "metric": metric, "mean": m[0], "ci_low": m[1], "ci_high": m[2], "n": m[3]})

    summary = study_files.read_summary(study_dir)
    if name.startswith("length_generalization"):
        randomized_path = os.path.join(study_dir + "_randomized", "summary.csv")
        randomized = pd.read_csv(randomized_path) if os.path.exists(randomized_path) else None
        for task in dict.fromkeys(summary["variant"]):
            for encoding in encodings_of(summary):
                if task != "parity":
                    add(task, encoding, "length", "exact_match_L_to_2L",
                        pooled_up_to_2x(summary, task, encoding))
                add(task, encoding, "length", "accuracy_unseen_lengths",
                    length_averaged(summary, task, encoding))
        if randomized is not None:
            for task in dict.fromkeys(randomized["variant"]):
                for encoding in encodings_of(randomized):
                    for kind in ("length_sampled", "length"):
                        add(task, encoding, f"randomized_{kind}", "accuracy_unseen_lengths",
                            length_averaged(randomized, task, encoding, kind))
    elif name.startswith("lm_extrapolation"):
        position_path = os.path.join(study_dir, "loss_by_position.csv.gz")
        by_position = pd.read_csv(position_path)
        top = summary[summary["kind"] == "length"]["factor"].max()
        train_len = int(summary[(summary["kind"] == "length") & (summary["factor"] == 1)]
                        ["seq_len"].iloc[0])
        for corpus in dict.fromkeys(summary["variant"]):
            for encoding in encodings_of(summary):
                add(corpus, encoding, "length", "context_matched_growth",
                    context_matched(by_position, summary, encoding, corpus, top, train_len))
                add(corpus, encoding, "length", "growth_2x", growth(summary, encoding, corpus, 2.0))
                add(corpus, encoding, "length", f"growth_{top:g}x",
                    growth(summary, encoding, corpus, top))
    elif name.startswith("settle_t5_max_distance"):
        summary["encoding.type"] = "t5_bias"  # fixed by the study ([base.encoding])
        for corpus in dict.fromkeys(summary["variant"]):
            for factor in (2.0,) + T5_FAR_FACTORS:
                add(corpus, "t5_bias", "length", f"growth_{factor:g}x",
                    growth(summary, "t5_bias", corpus, factor))
    else:
        raise SystemExit(f"claims.py: no paper metrics are defined for {name}")
    return pd.DataFrame(rows).to_csv(index=False, float_format="%.6g")
