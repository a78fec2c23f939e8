"""Peng et al. 2023, YaRN (and dynamic NTK scaling): rules 6 to 10 of the context-extension
study. Dynamic scaling avoids the blow-up beyond s x L; YaRN beats PI and NTK without and after
fine-tuning, needs fewer fine-tuning steps, and reads beyond its fine-tuning length."""
from poslab_analysis.claims.papers.jin2024 import every
from poslab_analysis.claims.rules import AT_MOST_005, BELOW_ZERO, above, fmt, qualified, tally, \
    verdict
from poslab_analysis.claims.studies.context_extension import CE_BUDGET, CE_BUDGETS, \
    CE_WITHIN, best_of
from poslab_analysis.statistics import seeds
from poslab_analysis.statistics.seeds import paired

NAME = "Peng et al. 2023"


def context_extension(study, record=None):
    loss, ft, ft_b = study.loss, study.ft, study.ft_b

    def yarn_vs_best(read, gate=True):
        return paired(read("zs_yarn_s4", 4, gate), best_of(read("zs_linear_s4", 4, gate),
                                                           read("zs_ntk_s4", 4, gate)))

    lines = []
    # 6. Dynamic scaling avoids the blow-up beyond s x L.
    lines.append(study.row("6. dynamic scaling avoids the blow-up beyond s x L", NAME,
                           "perplexity without fine-tuning beyond the scaled window",
                           "zs_dynamic_ntk_s1 minus zs_ntk_s4, loss at 16x",
                           paired(loss("zs_dynamic_ntk_s1", 16), loss("zs_ntk_s4", 16)),
                           "interval below 0", BELOW_ZERO, record))
    # 7, 8. YaRN beats PI and NTK, without and after fine-tuning.
    for read, source, extra in study.readings:
        lines.append(study.row(
            f"7. YaRN beats PI and NTK without fine-tuning (s = 4{source})", NAME,
            "perplexity at the extended window",
            "zs_yarn_s4 minus the better of zs_linear_s4 and zs_ntk_s4 (per seed), loss at 4x",
            yarn_vs_best(read), "interval below 0", BELOW_ZERO, record,
            study.ungated(lambda gate: yarn_vs_best(read, gate)) if extra else ""))
    lines.append(study.row(
        f"8. YaRN beats PI and NTK after fine-tuning ({CE_BUDGET} steps)", NAME,
        "perplexity at the extended window after fine-tuning",
        f"ft_yarn_{CE_BUDGET} minus the better of ft_linear_{CE_BUDGET} and ft_ntk_{CE_BUDGET}, "
        "loss at 4x",
        paired(loss(ft_b["yarn"], 4), best_of(loss(ft_b["linear"], 4), loss(ft_b["ntk"], 4))),
        "interval below 0", BELOW_ZERO, record))
    # 9. YaRN needs fewer fine-tuning steps.
    for steps in (50, 100):
        lines.append(study.row(
            f"9. YaRN needs fewer fine-tuning steps ({steps} steps)", NAME,
            "steps of fine-tuning to reach a perplexity",
            f"ft_yarn_{steps} minus ft_linear_{steps}, loss at 4x",
            paired(loss(ft[("yarn", steps)], 4), loss(ft[("linear", steps)], 4)),
            "interval below 0", BELOW_ZERO, record))
    target = loss("rope256", 4).mean()
    reached = []
    for method in ("none", "linear", "ntk", "yarn"):
        first = next((steps for steps in CE_BUDGETS
                      if loss(ft[(method, steps)], 4).mean() <= target + CE_WITHIN), None)
        reached.append(f"{method} {first if first is not None else f'> {CE_BUDGETS[-1]}'}")
    lines.append(study.reference(
        "9. (the budget curve)", "not the paper's measure",
        f"smallest budget whose mean loss at 4x is within {CE_WITHIN} of rope256's "
        f"({target:.3f}): {', '.join(reached)}"))
    # 10. YaRN extrapolates beyond its fine-tuning length.
    lines.append(study.row(
        "10. fine-tuned YaRN reads beyond its fine-tuning length", NAME,
        "perplexity beyond the fine-tuning length (s x L)",
        f"ft_yarn_{CE_BUDGET}, loss at 16x minus at 4x",
        paired(loss(ft_b["yarn"], 16), loss(ft_b["yarn"], 4)),
        f"upper end <= {CE_WITHIN} agrees, lower end > {CE_WITHIN} disagrees", AT_MOST_005,
        record,
        f"; beside it, the paper's range (2x the fine-tuning length: 64k -> 128k), 8x minus "
        f"4x: {fmt(*paired(loss(ft_b['yarn'], 8), loss(ft_b['yarn'], 4)))}"))
    return lines


def context_extension_retrieval(study, record=None):
    """Rules 6, 7, 8 and 10 of the retrieval study; 6 and 10 in the papers' regime."""
    loss, L = study.loss, 64
    lines = []
    # 6. Dynamic scaling against no scaling at every length beyond L; the bigram criterion beside.
    parts, shown, evidence = [], [], []
    for multiple in (2, 4, 8, 16):
        interval = paired(loss("zs_dynamic_ntk_s1", multiple * L), loss("rope64", multiple * L))
        parts.append(verdict(interval, *BELOW_ZERO))
        evidence.append((interval, BELOW_ZERO))
        dynamic = loss("zs_dynamic_ntk_s1", multiple * L)
        below = "no runs" if dynamic.empty else "yes" if (dynamic < study.bigram).all() else "no"
        shown.append(f"{multiple}x: {fmt(*interval)} (below bigram in every seed: {below})")
    v = ("agree" if all(p == "agree" for p in parts) else
         "disagree" if any(p == "disagree" for p in parts) else "inconclusive")
    # The verdict is against no scaling only: say where the loss still blows up against the
    # baselines (above the bigram's, above the unigram's), seed by seed.
    if v == "agree":
        v = qualified(v, "against no scaling only: " + baselines_beyond(study, "zs_dynamic_ntk_s1"))
    tally(record, NAME, [v], row=f"6. {NAME}", evidence=evidence, combine=every)
    lines.append(f"| 6. dynamic scaling avoids the blow-up beyond L, against no scaling "
                 f"({NAME}) | perplexity without fine-tuning beyond L | zs_dynamic_ntk_s1 minus "
                 f"rope64, loss at {'; '.join(shown)} | below 0 at every length agrees, above 0 "
                 f"at any disagrees | {v} |")
    # 7, 8. YaRN beats PI and NTK, without and after fine-tuning.
    lines.append(study.row(
        "7. YaRN beats PI and NTK without fine-tuning (s = 4)", NAME,
        "perplexity at the extended window",
        "zs_yarn_s4 minus the better of zs_linear_s4 and zs_ntk_s4 (per seed), loss at 4x",
        paired(loss("zs_yarn_s4", 4 * L),
               best_of(loss("zs_linear_s4", 4 * L), loss("zs_ntk_s4", 4 * L))),
        "interval below 0", BELOW_ZERO, record))
    lines.append(study.row(
        "8. YaRN beats PI and NTK after fine-tuning (400 steps)", NAME,
        "perplexity at the extended window after fine-tuning",
        "ft_yarn_s4 minus the better of ft_linear_s4 and ft_ntk_s4, loss at 4x",
        paired(loss("ft_yarn_s4", 4 * L),
               best_of(loss("ft_linear_s4", 4 * L), loss("ft_ntk_s4", 4 * L))),
        "interval below 0", BELOW_ZERO, record))
    # 10. In the paper's regime: s = 8 fine-tuned at sL/2 = 256, read at sL = 512.
    lines.append(study.row(
        "10. fine-tuned YaRN reads beyond its fine-tuning length (s = 8, fine-tuned at sL/2)",
        NAME, "perplexity from the fine-tuning length to s x L",
        "ft_yarn_s8, loss at 512 minus at 256",
        paired(loss("ft_yarn_s8", 8 * L), loss("ft_yarn_s8", 4 * L)),
        f"upper end <= {CE_WITHIN} agrees, lower end > {CE_WITHIN} disagrees", AT_MOST_005,
        record,
        f"; control, ft_yarn_s4 (its sL is 256): "
        f"{fmt(*paired(loss('ft_yarn_s4', 8 * L), loss('ft_yarn_s4', 4 * L)))}; passkey at 512, "
        f"s = 8: {study.proportion(study.passkey('ft_yarn_s8', 8 * L))}, s = 4: "
        f"{study.proportion(study.passkey('ft_yarn_s4', 8 * L))}"))
    return lines


def baselines_beyond(study, variant, L=64):
    """Where `variant`'s loss is above the bigram and the unigram baselines of the test split,
    at 2x..16x, in how many of its seeds: 'above the bigram at 8x (2 of 3 seeds), 16x (3 of 3);
    above the unigram at 16x (2 of 3)'."""
    unigram = study.unigram
    said = []
    for name, baseline in (("bigram", study.bigram), ("unigram", unigram)):
        where = []
        for multiple in (2, 4, 8, 16):
            losses = study.loss(variant, multiple * L)
            above = int((losses > baseline).sum())
            if above:
                where.append(f"{multiple}x ({above} of {len(losses)} seeds)")
        said.append(f"above the {name} ({baseline:.3f}) at {', '.join(where)}" if where
                    else f"below the {name} at every length")
    return "; ".join(said)


def finetune_budget(study, record=None):
    """Decisions 3 and 4 of experiments/finetune_budget.protocol.md: YaRN against PI in steps
    (the area under the retrieval curve at 256), and YaRN s = 8 fine-tuned at sL/2 = 256 read
    at sL = 512."""
    yarn, pi, yarn8 = "ft_yarn_s4", "ft_pi_s4", "ft_yarn_s8"
    # 3. "area(YaRN s = 4) - area(PI): agree if the interval is above 0, disagree if below 0,
    # else inconclusive" (paired by base seed).
    a_yarn, a_pi = study.area(yarn), study.area(pi)
    lines = [study.row(
        "3. YaRN needs fewer fine-tuning steps than PI (s = 4)", NAME,
        f"{study.regime(yarn)}; against {study.regime(pi)}",
        "about 2.5x fewer steps (10x fewer tokens) than earlier methods to a perplexity; here "
        "the area under the validation retrieval curve at 256 per step",
        f"area({yarn}) - area({pi}) at 256, paired by seed", seeds.paired(a_yarn, a_pi),
        "interval above 0 agrees, below 0 disagrees", above(0.0), record,
        f"; area per seed, YaRN {study.per_seed(a_yarn)}, PI {study.per_seed(a_pi)}; first "
        f"read >= 0.9, YaRN {study.per_seed(study.first_at_gate(yarn), 0)}, PI "
        f"{study.per_seed(study.first_at_gate(pi), 0)}",
        shown=seeds.paired_proportion(a_yarn, a_pi))]
    # 4. "YaRN s = 8, final at 512 minus final at 256: agree if the interval is above -0.1,
    # disagree if it is below -0.1, else inconclusive" (paired within each seed's run).
    at_512, at_256 = study.final(yarn8, 512), study.final(yarn8, 256)
    lines.append(study.row(
        "4. YaRN s = 8 fine-tuned at sL/2 = 256 still retrieves at sL = 512", NAME,
        study.regime(yarn8) + ", read at 256 and 512",
        "trained on 64k (s = 32, sL/2), usable to 128k = sL; here the test read at 512 against "
        "the one at 256",
        f"{yarn8}, final at 512 minus final at 256, mean over depths, paired by seed",
        seeds.paired(at_512, at_256), "interval above -0.1 agrees, below -0.1 disagrees",
        above(-0.1), record,
        f"; at 512 per seed {study.per_seed(at_512)}, at 256 {study.per_seed(at_256)}; its "
        f"curve at 512 (validation, mean over depths and seeds): "
        f"{curve_points(study.curve_means(yarn8, 512))}",
        shown=seeds.paired_proportion(at_512, at_256)))
    return lines


def curve_points(means, every=500):
    """A curve in a few reads: the first, one every `every` steps, the last ("step 100 0.72,
    500 0.40, ..., 2,500 0.00"); "no reads" when empty."""
    if means.empty:
        return "no reads"
    steps = list(means.index)
    keep = [s for i, s in enumerate(steps)
            if i == 0 or i == len(steps) - 1 or s % every == 0]
    return ", ".join(f"step {int(s):,} {means[s]:.2f}" for s in keep)
