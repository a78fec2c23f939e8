"""bloc97 2023, NTK-aware scaled RoPE (a blog post with a plot): rule 5 of the context-extension
study, NTK-aware scaling beats PI without fine-tuning (s = 4), on the study's runs and, if it has
run, on settling run 6."""
from poslab_analysis.claims.rules import BELOW_ZERO, fmt
from poslab_analysis.statistics.seeds import paired, paired_proportion

NAME = "bloc97 2023"


def context_extension(study, record=None):
    def ntk_vs_pi(read, multiple, gate=True):
        return paired(read("zs_ntk_s4", multiple, gate), read("zs_linear_s4", multiple, gate))

    lines = []
    for read, source, extra in study.readings:
        for multiple in (4, 2):
            lines.append(study.row(
                f"5. NTK-aware scaling beats PI without fine-tuning (s = 4, at {multiple}x"
                f"{source})", NAME, "perplexity of LLaMA without fine-tuning (a blog post's plot)",
                f"zs_ntk_s4 minus zs_linear_s4, loss at {multiple}x", ntk_vs_pi(read, multiple),
                "interval below 0", BELOW_ZERO, record,
                study.ungated(lambda gate: ntk_vs_pi(read, multiple, gate)) if extra else ""))
    return lines


def context_extension_retrieval(study, record=None):
    """Rule 5 of the retrieval study: zs_ntk_s4 against zs_linear_s4 at 4x, passkey beside it."""
    L = 64
    return [study.row(
        "5. NTK-aware scaling beats PI without fine-tuning (s = 4, at 4x)", NAME,
        "perplexity of LLaMA without fine-tuning (a blog post's plot)",
        "zs_ntk_s4 minus zs_linear_s4, loss at 4x",
        paired(study.loss("zs_ntk_s4", 4 * L), study.loss("zs_linear_s4", 4 * L)),
        "interval below 0", BELOW_ZERO, record,
        f"; passkey at 4x, NTK minus PI: "
        f"{fmt(*paired_proportion(study.passkey('zs_ntk_s4', 4 * L), study.passkey('zs_linear_s4', 4 * L)))}")]
