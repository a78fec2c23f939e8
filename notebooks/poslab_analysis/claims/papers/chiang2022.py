"""Chiang & Cholak 2022 (Overcoming a theoretical limitation of self-attention), the log-n remedy:
multiplying the attention logits by log n (n = the number of keys) keeps attention sharp at
lengths beyond training. Rule 6 of the second context-extension study, alone (RoPE with log-n at
evaluation, Qwen's use_logn_attn, base L = 64); its rows with ReRoPE and Self-Extend are Su's
(su2023.py)."""
from poslab_analysis.claims.rules import BELOW_ZERO, fmt, outside_paper
from poslab_analysis.statistics.seeds import paired

NAME = "Chiang & Cholak 2022"


def context_extension_methods(study, record=None):
    """Rule 6 alone. Chiang & Cholak train their models with the log n factor; here it is applied
    at evaluation only, to a model trained without it: outside the paper's setting, whatever the
    interval says (shown), until a model is trained with it."""
    loss, L = study.loss, 64
    base_at_4x = loss("rope64", 4 * L).mean()
    unigram = study.unigram
    reason = (f"the paper trains with the log n factor, here it is applied at evaluation only, "
              f"to a read whose loss at 4x is already broken (rope64 {base_at_4x:.3f}; the "
              f"bigram baseline {study.bigram:.3f}, the unigram {unigram:.3f})")
    return [study.row(
        "6. log-n scaling helps beyond L (RoPE, log-n at evaluation only)", NAME,
        "cross-entropy at test lengths beyond training (parity, first, 50 -> 1,000); here the "
        "loss at 4x", "zs_logn minus rope64, loss at 4x",
        paired(loss("zs_logn", 4 * L), loss("rope64", 4 * L)),
        "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record,
        f"; 16x: {fmt(*paired(loss('zs_logn', 16 * L), loss('rope64', 16 * L)))}; 1x (log-n is "
        f"the identity there): {fmt(*paired(loss('zs_logn', L), loss('rope64', L)))}",
        reasons=[outside_paper(reason)])]
