"""Su 2023, ReRoPE (bojone/rerope): distances beyond a window w are clipped to w (leaky: grow by
1/k), with log-n scaling of the queries. Without training it costs almost nothing at L (llama2-
13b: 1.4967 -> 1.4996 at 4k) and the loss of the last 4,096 tokens falls as the context grows
(1.4267 at 8k, 1.4001 at 16k). Rules 4, 5 and the ReRoPE and Self-Extend rows of rule 6 (log-n
scaling helps beyond L: Su's patches and Self-Extend's scale_base apply it) of the second
context-extension study."""
from poslab_analysis.claims.rules import BELOW_ZERO, fmt
from poslab_analysis.statistics.seeds import paired

NAME = "Su 2023"
ALMOST_NOTHING = 0.01   # nats/byte at L
SU_AT_L = (1.4967, 1.4996)   # llama2-13b's loss at 4k, before and after ReRoPE (nats/token)


def in_su_terms(study, L=64):
    """Row 4's qualification: the change at L relative to the loss there, beside Su's (the
    units differ, nats per byte against nats per LLaMA token: a ratio compares them), and what
    the same setting does to retrieval at L."""
    base, rerope = study.loss("rope64", L), study.loss("zs_rerope_w16_logn", L)
    ours = (rerope.mean() - base.mean()) / base.mean()
    su = (SU_AT_L[1] - SU_AT_L[0]) / SU_AT_L[0]
    keys = (study.passkey("rope64", L).mean(), study.passkey("zs_rerope_w16_logn", L).mean())
    return (f"on the loss only: +{100 * ours:.2f}% of rope64's loss at L against Su's "
            f"+{100 * su:.2f}%, and the margin {ALMOST_NOTHING} is "
            f"{100 * ALMOST_NOTHING / base.mean():.2f}% of it; passkey at L falls from "
            f"{keys[0]:.2f} to {keys[1]:.2f}")


def context_extension_methods(study, record=None):
    loss, L = study.loss, 64
    last = study.last_bytes
    cheap = (lambda low, high: high <= ALMOST_NOTHING, lambda low, high: low > ALMOST_NOTHING)
    lines = [study.row(
        "4. ReRoPE costs almost nothing at L (w = 16, with log-n)", NAME,
        "loss at the trained length, 1.4967 -> 1.4996", "zs_rerope_w16_logn minus rope64, loss "
        "at 1x", paired(loss("zs_rerope_w16_logn", L), loss("rope64", L)),
        f"upper end <= {ALMOST_NOTHING} agrees, lower end > {ALMOST_NOTHING} disagrees", cheap,
        record, f"; w = 56: {fmt(*paired(loss('zs_rerope_w56', L), loss('rope64', L)))}; passkey "
        f"at 1x: w = 16 {study.proportion(study.passkey('zs_rerope_w16_logn', L))}, w = 56 "
        f"{study.proportion(study.passkey('zs_rerope_w56', L))}",
        note=in_su_terms(study))]
    shown = "; ".join(f"{m}x: {fmt(*paired(last('zs_rerope_w16_logn', m * L), last('zs_rerope_w16_logn', L)))}"
                      for m in (2, 8, 16))
    w56 = fmt(*paired(last("zs_rerope_w56", 4 * L), last("zs_rerope_w56", L)))
    lines.append(study.row(
        "5. ReRoPE's loss falls with a longer context (w = 16, with log-n)", NAME,
        "loss of the last 4,096 tokens with 4k, 8k, 16k of context (1.4996, 1.4267, 1.4001); "
        "here the last 64 bytes of each chunk",
        "zs_rerope_w16_logn, loss of the last 64 bytes at 4x minus at 1x",
        paired(last("zs_rerope_w16_logn", 4 * L), last("zs_rerope_w16_logn", L)),
        "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record,
        f"; beside it {shown}; w = 56 at 4x: {w56}"))
    for with_logn, without, method in (("zs_rerope_w16_logn", "zs_rerope_w16", "ReRoPE w = 16"),
                                       ("zs_se_w16_g16_logn", "zs_se_w16_g16",
                                        "Self-Extend W = 16, G = 16")):
        lines.append(study.row(
            f"6. log-n scaling helps beyond L, with {method}", NAME,
            "Su's patches (and Self-Extend's scale_base) multiply q by max(1, ln n / ln L); here "
            "the loss at 4x",
            f"{with_logn} minus {without}, loss at 4x",
            paired(loss(with_logn, 4 * L), loss(without, 4 * L)),
            "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record,
            f"; 16x: {fmt(*paired(loss(with_logn, 16 * L), loss(without, 16 * L)))}"))
    return lines
