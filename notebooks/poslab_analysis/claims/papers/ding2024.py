"""Ding et al. 2024, LongRoPE: per-pair rope factors found by an evolutionary search beat PI (and
the other uniform-rule scalings) without fine-tuning (their ablation, Table 5: LLaMA2-7B on PG19
at 16k/32k with no fine-tuning, PI 14.88/136.30 against searched factors 7.28/13.00). Rule 1 of
the second context-extension study: at the same s = 4, read at 4L."""
from poslab_analysis.claims.rules import BELOW_ZERO
from poslab_analysis.claims.studies.context_extension import best_of
from poslab_analysis.statistics.seeds import paired

NAME = "Ding et al. 2024"


def context_extension_methods(study, record=None):
    loss, L = study.loss, 64
    best = best_of(best_of(loss("zs_linear_s4", 4 * L), loss("zs_ntk_s4", 4 * L)),
                   loss("zs_yarn_s4", 4 * L))
    return [study.row(
        "1. LongRoPE's searched factors beat PI, NTK and YaRN without fine-tuning (s = 4)", NAME,
        "perplexity without fine-tuning at the extended window (PI 14.88 against searched 7.28 "
        "at 16k); here the loss at 4x, factors searched on a sibling model (the pilot)",
        "zs_longrope_s4 minus the best of zs_linear_s4, zs_ntk_s4 and zs_yarn_s4 (per seed), "
        "loss at 4x", paired(loss("zs_longrope_s4", 4 * L), best),
        "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record,
        f"; passkey at 4x: LongRoPE {study.proportion(study.passkey('zs_longrope_s4', 4 * L))}, "
        f"YaRN {study.proportion(study.passkey('zs_yarn_s4', 4 * L))}")]
