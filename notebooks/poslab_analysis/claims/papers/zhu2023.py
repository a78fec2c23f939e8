"""Zhu et al. 2023, PoSE: fine-tuning at L with skipping position ids extends a RoPE model to L'
as well as fine-tuning at L' does, and far better than random position ids (RandPos). Table 1:
LLaMA-7B, 2k -> 16k with linear PI, perplexity on GovReport at 2k, 4k, 8k and 16k (every length
from L to L'); the PoSE study reads 64 -> 256 bytes at 64, 128, 192 and 256."""
from poslab_analysis.claims.papers.chen2023 import not_converged
from poslab_analysis.claims.rules import AT_MOST_005, BELOW_ZERO, above, at_least, fmt
from poslab_analysis.statistics import seeds
from poslab_analysis.statistics.seeds import paired

NAME = "Zhu et al. 2023"


def pose(study, record=None):
    def minus(a, b):  # [(length, interval of a - b over seeds)] from L to L'
        return [(n, paired(study.loss(a, n), study.loss(b, n))) for n in study.lengths]

    return [
        study.row("PoSE fine-tuned at L reaches the quality of fine-tuning at L' (s = 4)", NAME,
                  "perplexity from L to L' (PoSE 4.84 to 4.60, full length 4.87 to 4.59); "
                  "here the loss at every length read", "pose_pi minus ft256_pi",
                  minus("pose_pi", "ft256_pi"),
                  "at every length, upper end <= 0.05 agrees, lower end > 0.05 disagrees",
                  AT_MOST_005, record),
        study.row("PoSE beats RandPos (s = 4)", NAME,
                  "perplexity from L to L' (PoSE 4.60 to 4.84, RandPos 11.63 to 15.16); here the "
                  "loss at every length read, plain positions", "pose_pi minus randpos_pi",
                  minus("pose_pi", "randpos_pi"), "at every length, interval below 0",
                  BELOW_ZERO, record),
    ]


def context_extension_methods(study, record=None):
    """Rules 9-11 of the second context-extension study: from retrieval-trained RoPE models, 400
    steps at batch 16 on plain text, PI s = 4, read at 4x of 64 = 256 (the target)."""
    loss, passkey, L = study.loss, study.passkey, 64
    costs = "; ".join(
        f"{variant}: {study.trained_tokens(variant).mean():,.0f} tokens, "
        f"{study.interval(study.train_seconds(variant))} s"
        for variant in ("pose_pi", "randpos_pi", "ft256_pi"))
    lines = [study.row(
        "9. PoSE fine-tuned at L reaches the quality of fine-tuning at L' (s = 4)", NAME,
        "perplexity at L' after 1,000 steps (PoSE 4.60, full length 4.59 at 16k); here the loss at "
        "4x = L' after 400 steps", "pose_pi minus ft256_pi, loss at 4x",
        paired(loss("pose_pi", 4 * L), loss("ft256_pi", 4 * L)),
        "upper end <= 0.05 agrees, lower end > 0.05 disagrees", AT_MOST_005, record,
        f"; 2x: {fmt(*paired(loss('pose_pi', 2 * L), loss('ft256_pi', 2 * L)))}; cost "
        f"(train_seconds: one thread beside another run): {costs}",
        note=not_converged(study, "ft256_pi", "rope64"))]
    lines.append(study.row(
        "10. PoSE beats RandPos (s = 4)", NAME,
        "perplexity at L' (PoSE 4.60, RandPos 15.16 at 16k); here the loss at 4x, plain positions",
        "pose_pi minus randpos_pi, loss at 4x",
        paired(loss("pose_pi", 4 * L), loss("randpos_pi", 4 * L)),
        "interval below 0 agrees, above 0 disagrees", BELOW_ZERO, record))
    # 11. The skill rule: PoSE's fine-tune starts from the zero-shot PI read (zs_linear_s4),
    # which must retrieve at L, and is fine-tuned on plain text (no passkey rows).
    at_target = seeds.proportion_interval(passkey("pose_pi", 4 * L).tolist())
    lines.append(study.row(
        "11. PoSE retrieves within its target (s = 4)", NAME,
        "passkey >= 90% inside the target length (Fig. 2b)", "pose_pi, passkey at 4x (mean over "
        "depths)", at_target, "lower end >= 0.9 agrees, upper end < 0.9 disagrees",
        (lambda low, high: low >= 0.9, lambda low, high: high < 0.9), record,
        f"; at 1x {study.proportion(passkey('pose_pi', L))}; ft256_pi at 4x "
        f"{study.proportion(passkey('ft256_pi', 4 * L))}; zs_linear_s4 at 1x "
        f"{study.proportion(passkey('zs_linear_s4', L))}",
        reasons=study.skill("pose_pi", start="zs_linear_s4")))
    return lines


def finetune_budget(study, record=None):
    """Decisions 5 and 6 of experiments/finetune_budget.protocol.md: PoSE (trained at L = 64 with
    position ids covering the target 256, linear s = 4) read at 256, alone and against PI
    fine-tuned at the full 256 for the same steps."""
    pose, pi = "pose_pi_s4", "ft_pi_s4"
    # 5. "PoSE final at 256: as 1" (low end >= 0.9 agrees, high end < 0.9 disagrees).
    final = study.final(pose, 256)
    lines = [study.row(
        "5. PoSE retrieves within its target window (256)", NAME, study.regime(pose),
        "passkey >= 90% inside the 16k / 32k targets (Fig. 2b); here the test read at 256",
        f"{pose}, final greedy exact match at 256, mean over depths (per seed "
        f"{study.per_seed(final)})", seeds.t_interval(final.tolist()),
        "low end >= 0.9 agrees, high end < 0.9 disagrees", at_least(0.9), record,
        f"; at 64 {fmt(*seeds.proportion_interval(study.final(pose, 64).tolist()))}",
        shown=seeds.proportion_interval(final.tolist()))]
    # 6. "PoSE final at 256 minus PI final at 256: agree ("matches") if the interval's low end
    # is above -0.05, disagree if its high end is below -0.05, else inconclusive".
    p, f = study.final(pose, 256), study.final(pi, 256)
    lines.append(study.row(
        "6. PoSE matches full-length fine-tuning at the target (256)", NAME,
        f"{study.regime(pose)}; against {study.regime(pi)}",
        "perplexity within 0.03 of full-length fine-tuning at every length from 2k to 16k "
        "(0.01 at the 16k target; Table 1); here the test retrieval at 256",
        f"{pose} minus {pi}, final at 256, paired by seed", seeds.paired(p, f),
        "low end above -0.05 agrees, high end below -0.05 disagrees", above(-0.05), record,
        f"; PoSE per seed {study.per_seed(p)}, PI {study.per_seed(f)}",
        shown=seeds.paired_proportion(p, f)))
    return lines
