"""Sun et al. 2023, xPos: rule 12 of the context-extension study, xPos extrapolates better than
RoPE (the paper with blockwise causal attention; poslab reads it with plain attention)."""
from poslab_analysis.claims.rules import BELOW_ZERO, fmt
from poslab_analysis.statistics.seeds import paired, paired_proportion

NAME = "Sun et al. 2023"


def context_extension(study, record=None):
    loss = study.loss
    return [study.row(
        "12. xPos extrapolates better than RoPE", NAME,
        "perplexity at longer inputs (blockwise causal attention in the paper; poslab: plain)",
        "xpos64 minus rope64, loss at 4x", paired(loss("xpos64", 4), loss("rope64", 4)),
        "interval below 0", BELOW_ZERO, record,
        f"; at 1x: {fmt(*paired(loss('xpos64', 1), loss('rope64', 1)))}")]


def context_extension_retrieval(study, record=None):
    """Rule 12 of the retrieval study: xPos in its paper's regime (scale_base = L/2 = 32)."""
    loss, L = study.loss, 64
    return [study.row(
        "12. xPos extrapolates better than RoPE (scale_base = L/2, the paper's regime)", NAME,
        "perplexity at longer inputs (blockwise causal attention in the paper; poslab: plain)",
        "xpos64 minus rope64, loss at 4x", paired(loss("xpos64", 4 * L), loss("rope64", 4 * L)),
        "interval below 0", BELOW_ZERO, record,
        f"; at 1x: {fmt(*paired(loss('xpos64', L), loss('rope64', L)))}; passkey at 4x, xPos "
        f"minus RoPE: {fmt(*paired_proportion(study.passkey('xpos64', 4 * L), study.passkey('rope64', 4 * L)))}")]
