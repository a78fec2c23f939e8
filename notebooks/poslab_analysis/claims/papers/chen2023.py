"""Chen et al. 2023, position interpolation (PI): rules 1 to 4 of the context-extension study.
RoPE read beyond L without extension degrades; PI fine-tuned briefly uses the extended window
and keeps the quality inside the original one; fine-tuning without interpolation extends the
context slowly (the paper's metric: passkey accuracy).

The protocol reads rules 2 and 4 on whole chunks and rule 3 against rope64; each row also shows,
as a sensitivity that is never counted, the choice that could change its verdict: rules 2 and 4
context-matched (tokens compared by the context they see, as Press et al.'s Appendix B does),
rule 3 against the plain fine-tune (ft_none: fine-tuned at 4L as PI is, without interpolation),
which separates what interpolation costs at L from what fine-tuning at 4L costs."""
from poslab_analysis.claims.rules import ABOVE_ZERO, BEATS, above, at_least, combined_verdict, \
    compare, fmt, no_skill, sensitivity, tally, unless, verdict
from poslab_analysis.claims.studies.context_extension import CE_BUDGET, CE_WITHIN
from poslab_analysis.statistics import seeds
from poslab_analysis.statistics.seeds import paired

NAME = "Chen et al. 2023"
PPL = "perplexity at the extended window; here the loss at that length"


def context_extension(study, record=None):
    loss, ft, ft_b = study.loss, study.ft, study.ft_b
    lines = []
    # 1. Direct extrapolation of RoPE is catastrophic beyond L.
    for multiple in (2, 4):
        lines.append(study.row("1. RoPE read beyond L without extension degrades", NAME, PPL,
                               f"rope64, loss at {multiple}x minus at 1x",
                               paired(loss("rope64", multiple), loss("rope64", 1)),
                               "interval above 0", ABOVE_ZERO, record))
    # 2. PI fine-tuned briefly reaches good quality at the extended window.
    beside = paired(loss(ft_b["linear"], 4), loss("rope256", 4))
    uses_window = (lambda low, high: high <= 0, lambda low, high: low > 0)
    # Sensitivity: the whole-chunk mean falls from 1x to 4x even for a model that reads no
    # further back than L (fewer tokens with little context); context-matched, the tokens with
    # at least L bytes of context at 4x against the last eighth of the 1x chunks.
    matched_2 = paired(study.beyond_l(ft_b["linear"], 4), study.last_eighth(ft_b["linear"]))
    lines.append(study.row(
        f"2. PI fine-tuned briefly uses the extended window ({CE_BUDGET} steps at 4x)", NAME,
        f"{PPL} falls as the window grows",
        f"ft_linear_{CE_BUDGET}, loss at 4x minus at 1x", paired(loss(ft_b["linear"], 4),
                                                              loss(ft_b["linear"], 1)),
        "upper end <= 0 agrees, lower end > 0 disagrees", uses_window, record,
        f"; beside it, minus rope256 (trained at 4x) at 4x: {fmt(*beside)}; "
        + sensitivity("context-matched (positions >= L of the 4x chunks minus positions "
                      "7L/8..L-1 of the 1x chunks)", matched_2,
                      verdict(matched_2, *uses_window))))
    lines.append(study.reference(
        "2. (each method fine-tuned, against RoPE trained at 4x from scratch)",
        "not a claim of the papers",
        "; ".join(f"ft_{method}_{steps} minus rope256 at 4x: "
                  f"{fmt(*paired(loss(ft[(method, steps)], 4), loss('rope256', 4)))}"
                  for method in ("none", "linear", "ntk", "yarn")
                  for steps in (50, CE_BUDGET))))
    # 3. PI keeps the quality within the original window relatively well.
    within = (lambda low, high: high <= CE_WITHIN, lambda low, high: low > CE_WITHIN)
    # Sensitivity: against the plain fine-tune (the same 400 steps at 4L, no interpolation),
    # what interpolation itself costs at L, apart from what fine-tuning at 4L costs.
    plain_3 = paired(loss(ft_b["linear"], 1), loss(ft_b["none"], 1))
    lines.append(study.row(
        "3. PI keeps the quality inside the original window", NAME,
        "perplexity at the original window, before and after; here the loss at 1x",
        f"ft_linear_{CE_BUDGET} minus rope64, loss at 1x", paired(loss(ft_b["linear"], 1),
                                                               loss("rope64", 1)),
        f"upper end <= {CE_WITHIN} agrees, lower end > {CE_WITHIN} disagrees", within, record,
        "; " + sensitivity(f"against the plain fine-tune (ft_linear_{CE_BUDGET} minus "
                           f"ft_none_{CE_BUDGET}, loss at 1x)", plain_3,
                           verdict(plain_3, *within))))
    # 4. Fine-tuning without interpolation extends the context slowly.
    m_loss = paired(loss(ft_b["none"], 4), loss(ft_b["linear"], 4))
    v_loss = verdict(m_loss, *ABOVE_ZERO)
    # Sensitivity: only the tokens that need the extended window (positions >= L of the 4x
    # chunks); the first L positions of a chunk read no further back than training did.
    matched_4 = paired(study.beyond_l(ft_b["none"], 4), study.beyond_l(ft_b["linear"], 4))
    m_key, v_key = compare(study.passkey(ft_b["linear"], 4), study.passkey(ft_b["none"], 4),
                           BEATS, floor=0.0)
    # The skill rule: each fine-tune is judged on retrieval only if the read it starts from
    # (its positions on the base model, at L) retrieves there. This study's models were trained
    # without passkey rows and never read at L: no skill to keep.
    m_key = seeds.clipped(m_key, -1.0, 1.0)
    v_key = unless([no_skill(f"{start} (where {arm} starts)", study.passkey(start, 1))
                    for arm, start in ((ft_b["linear"], "zs_linear_s4"),
                                       (ft_b["none"], "rope64"))], v_key)
    tally(record, NAME, [v_loss, v_key])
    keys = ", ".join(f"{name} {fmt(*seeds.proportion_interval(study.passkey(v, 4).tolist()))}"
                     for name, v in (("linear", ft_b["linear"]), ("none", ft_b["none"])))
    lines.append(f"| 4. fine-tuning without interpolation extends the context slowly ({NAME}) | "
                 f"passkey accuracy after fine-tuning (the paper's metric); here also the loss | "
                 f"ft_none_{CE_BUDGET} minus ft_linear_{CE_BUDGET}, loss at 4x: {fmt(*m_loss)}; "
                 f"passkey greedy exact match at 4x, mean over depths: {keys}; linear minus none: "
                 f"{fmt(*m_key)}; "
                 + sensitivity("context-matched loss (positions >= L of the 4x chunks only)",
                               matched_4, verdict(matched_4, *ABOVE_ZERO))
                 + " | loss: interval above 0; passkey: linear beats none | "
                 f"{combined_verdict([('loss', v_loss), ('passkey', v_key)])} |")
    return lines


def context_extension_retrieval(study, record=None):
    """Rules 1-4 of the retrieval study (experiments/context_extension_retrieval.protocol.md):
    the models retrieve at L, so the passkey rows have a skill to keep or lose."""
    loss, passkey, L = study.loss, study.passkey, 64
    lines = [study.row(
        "1. RoPE read beyond L without extension degrades", NAME, PPL,
        "rope64, loss at 2x minus at 1x", paired(loss("rope64", 2 * L), loss("rope64", L)),
        "interval above 0", ABOVE_ZERO, record,
        f"; passkey at 1x {study.proportion(passkey('rope64', L))}, at 2x "
        f"{study.proportion(passkey('rope64', 2 * L))}")]
    # 2. PI fine-tuned at 4L retrieves over the whole extended window (the paper: passkey over
    # the whole window after fine-tuning). The skill rule: PI's fine-tune starts from the
    # zero-shot PI read (zs_linear_s4), which must retrieve at L, and must be fine-tuned on data
    # with the skill's signal (passkey rows), as the paper's is on data like its pre-training's.
    at_window = seeds.proportion_interval(passkey("ft_linear_s4", 4 * L).tolist())
    lines.append(study.row(
        "2. PI fine-tuned briefly retrieves over the extended window (400 steps at 4x)", NAME,
        "passkey retrieval at the extended window after fine-tuning",
        "ft_linear_s4, passkey at 4x (mean over depths)", at_window,
        "mean >= 0.9 agrees, upper end < 0.9 disagrees",
        (lambda low, high: at_window[0] >= 0.9, lambda low, high: high < 0.9), record,
        f"; beside it, loss at 4x minus at 1x: "
        f"{fmt(*paired(loss('ft_linear_s4', 4 * L), loss('ft_linear_s4', L)))}; "
        f"zs_linear_s4 at 1x {study.proportion(passkey('zs_linear_s4', L))}",
        reasons=study.skill("ft_linear_s4", start="zs_linear_s4")))
    # 3. PI keeps the quality inside the original window.
    within = (lambda low, high: high <= CE_WITHIN, lambda low, high: low > CE_WITHIN)
    plain = paired(loss("ft_linear_s4", L), loss("ft_none", L))
    lines.append(study.row(
        "3. PI keeps the quality inside the original window", NAME,
        "perplexity at the original window after fine-tuning",
        "ft_linear_s4 minus rope64, loss at 1x",
        paired(loss("ft_linear_s4", L), loss("rope64", L)),
        f"upper end <= {CE_WITHIN} agrees, lower end > {CE_WITHIN} disagrees", within, record,
        "; " + sensitivity("against the plain fine-tune ft_none at 1x", plain,
                           verdict(plain, *within)),
        note=not_converged(study, "ft_linear_s4", "rope64")))
    # 4. Fine-tuning without interpolation extends the usable context slowly (passkey).
    lines.append(study.passkey_row(
        "4. fine-tuning without interpolation extends the context slowly", NAME,
        "passkey at the extended window after fine-tuning",
        "ft_linear_s4 minus ft_none, passkey at 4x", passkey("ft_linear_s4", 4 * L),
        passkey("ft_none", 4 * L), record,
        f"; beside it, loss at 4x: "
        f"{fmt(*paired(loss('ft_linear_s4', 4 * L), loss('ft_none', 4 * L)))}",
        reasons=study.skill("ft_linear_s4", start="zs_linear_s4")
        + study.skill("ft_none", start="rope64")))
    return lines


def not_converged(study, fine_tune, base, L=64):
    """The qualification of a verdict read from a 400-step fine-tune at 4L whose own loss at its
    target length is more than CE_WITHIN above its base's at L (a fine-tune that reached its
    base's quality would be within it): the verdict holds at that budget, not for a converged
    fine-tune. None when the fine-tune is within CE_WITHIN."""
    own, start = study.loss(fine_tune, 4 * L).mean(), study.loss(base, L).mean()
    if not own > start + CE_WITHIN:
        return None
    return (f"at 400 steps, not converged: {fine_tune}'s own loss at 4x {own:.3f} against "
            f"{base}'s {start:.3f} at 1x")


def finetune_budget(study, record=None):
    """Decisions 1 and 2 of experiments/finetune_budget.protocol.md: PI (s = 4) fine-tuned at
    sL = 256 with the passkey mix, read against its steps, from bases that retrieve at L = 64."""
    pi, plain = "ft_pi_s4", "ft_none"
    # 1. "PI final at 256: agree if the interval's low end >= 0.9, disagree if its high end
    # < 0.9, else inconclusive" (the t interval over the passing seeds).
    final = study.final(pi, 256)
    lines = [study.row(
        "1. PI fine-tuned briefly retrieves the passkey over the whole extended window", NAME,
        study.regime(pi),
        "passkey retrieval up to the extended window after at most 1,000 steps (LLaMA 7B-65B); "
        "here the test read at sL = 256 after the budget",
        f"{pi}, final greedy exact match at 256, mean over depths (per seed "
        f"{study.per_seed(final)})", seeds.t_interval(final.tolist()),
        "low end >= 0.9 agrees, high end < 0.9 disagrees", at_least(0.9), record,
        f"; first validation read >= 0.9 at 256 (per seed): "
        f"{study.per_seed(study.first_at_gate(pi), 0)}",
        shown=seeds.proportion_interval(final.tolist()))]
    # 2. "area(PI) - area(none): agree if the interval is above 0, disagree if below 0, else
    # inconclusive" (paired by base seed).
    a_pi, a_plain = study.area(pi), study.area(plain)
    lines.append(study.row(
        "2. fine-tuning without interpolation extends the context slowly: PI retrieves at sL "
        "sooner than plain fine-tuning", NAME,
        f"{study.regime(pi)}; against {study.regime(plain)}",
        "passkey: 2048 -> 2560 after 10,000 steps without interpolation, PI the whole window "
        "within a few hundred; here the area under the validation curve at 256 per step",
        f"area({pi}) - area({plain}) at 256, paired by seed", seeds.paired(a_pi, a_plain),
        "interval above 0 agrees, below 0 disagrees", above(0.0), record,
        f"; area per seed, PI {study.per_seed(a_pi)}, none {study.per_seed(a_plain)}; first "
        f"read >= 0.9, PI {study.per_seed(study.first_at_gate(pi), 0)}, none "
        f"{study.per_seed(study.first_at_gate(plain), 0)}",
        shown=seeds.paired_proportion(a_pi, a_plain)))
    return lines
