"""Loss and retrieval side by side for a context-extension study: for every base model and
zero-shot read of it, the loss against the evaluation length (left) and the passkey greedy exact
match, averaged over the depths, against the same lengths (right); mean over the seeds the
protocol's gate keeps (reading/protocol_gates.py), the loss with its 95% t interval as a band,
retrieval with every seed's own value as a dot (the seed spread: with 3 seeds a t interval of a
0-or-1 skill spans most of the axis). Each variant in its style of the study's other figures
(plots_extension.variant_style). The one figure that shows what the loss hides: a method can
keep the loss down and lose the copy.

    /usr/bin/python3 notebooks/loss_and_retrieval.py results/context_extension_methods \
        docs/figures/loss_and_retrieval.png [VARIANT ...]

Without VARIANTs: rope64 and every zero-shot read of it (train.steps = 0) that has both rows.
Writes the PNG, an SVG and a CSV of what it draws (variant, seq_len, passkey_mean, loss_mean,
and the seeds' spread: n_seeds, passkey_seed_min, passkey_seed_max) beside it; prints what it
drew. tests/figures/check_plot_sets.py lints the figure (draw()) with the others.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from poslab_analysis.figures import plots  # noqa: E402
from poslab_analysis.figures import plots_extension  # noqa: E402
from poslab_analysis.reading import study_files  # noqa: E402
from poslab_analysis.statistics import seeds  # noqa: E402


def passkey_by_length(summary):
    """Passkey rows averaged over the depths: one row per (run, length), column 'passkey'."""
    rows = summary[summary["kind"] == "passkey"]
    keys = ["run", "train.seed", "variant", "seq_len", "in_distribution_ok"]
    return (rows.groupby(keys, dropna=False)["passkey_greedy_exact_match"].mean()
            .rename("passkey").reset_index())


def chosen(summary, info, wanted):
    """The variants to draw: `wanted`, or the first stage-1 RoPE model and its zero-shot reads."""
    if wanted:
        return wanted
    stage1 = [v for v in info.index if not info.loc[v, "parent"]
              and info.loc[v, "encoding"] == "rope"]
    base = stage1[0]
    zero = [v for v in info.index if info.loc[v, "parent"] == base
            and info.loc[v, "steps"] == 0]
    with_rows = set(summary.loc[summary["kind"] == "passkey", "variant"])
    lengths = summary[summary["kind"] == "length"].groupby("variant")["seq_len"].nunique()
    return [base] + [v for v in zero if v in with_rows and lengths.get(v, 0) >= 3]


def draw(study_dir, wanted):
    """(figure, table of what it draws)."""
    summary = study_files.read_summary(study_dir)
    info = study_files.variant_table(study_dir)
    variants = chosen(summary, info, wanted)
    losses = summary[summary["kind"] == "length"]
    keys = passkey_by_length(summary)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    table = []  # what the figure draws: the means and the seeds' spread, for the docs to quote
    for k, variant in enumerate(variants):
        label = plots_extension.scaling_label(info, variant)
        style = plots_extension.variant_style(info, variant)
        plots.mean_band(left, losses[losses["variant"] == variant], "seq_len", "loss", label,
                        markersize=3, **style)
        # Retrieval: the mean over the seeds, and each seed's own value as a small dot, a little
        # to the side of the mean (each variant to its own side) so that the dots of one length
        # do not hide each other. With 3 seeds the t interval (4.3 standard errors) of a 0-or-1
        # skill spans most of the axis; the claims table has it.
        drawn = keys[(keys["variant"] == variant) & seeds.gate_passed(keys)]
        at = drawn.groupby("seq_len")["passkey"].mean()
        right.plot(at.index, at.values, markersize=3, lw=1.4, label=label, **style)
        shift = 2 ** (0.035 * (k - (len(variants) - 1) / 2))  # on the log 2 axis
        right.plot(drawn["seq_len"] * shift, drawn["passkey"], ls="none", marker="o",
                   markersize=2.5, alpha=0.55, color=style["color"], label="_seed")
        spread = drawn.groupby("seq_len")["passkey"].agg(["count", "min", "max"]).rename(
            columns={"count": "n_seeds", "min": "passkey_seed_min", "max": "passkey_seed_max"})
        kept = losses[(losses["variant"] == variant) & seeds.gate_passed(losses)]
        table.append(pd.DataFrame({"variant": variant, "seq_len": at.index,
                                   "passkey_mean": at.values}).merge(
            kept.groupby("seq_len")["loss"].mean().rename("loss_mean").reset_index(),
            on="seq_len", how="outer").merge(spread.reset_index(), on="seq_len", how="left"))
        print(f"{variant}: passkey by length {dict(at.round(2))}")
    lengths = sorted(losses["seq_len"].unique())
    for ax, what in ((left, "loss (nats per byte), test split"),
                     (right, "passkey greedy exact match\n(mean over 5 depths)")):
        plots_extension.lengths_axis(ax, lengths)
        ax.axvline(64, color="0.6", ls=":", lw=1)
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
    right.set_ylim(-0.03, 1.03)
    left.set_title("what the loss says", fontsize=10)
    right.set_title("what retrieval says (line: mean of the seeds; dots: each seed)",
                    fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False,
               fontsize=7)
    note = seeds_note(summary, variants)
    fig.suptitle(f"RoPE trained at 64 bytes, read zero-shot at 64 to 1,024 ({note})",
                 fontsize=10)
    fig.tight_layout()
    return fig, pd.concat(table)


def main(study_dir, png_path, wanted):
    fig, table = draw(study_dir, wanted)
    fig.savefig(png_path, dpi=150, bbox_inches="tight")
    fig.savefig(os.path.splitext(png_path)[0] + ".svg", bbox_inches="tight",
                metadata={"Date": None})
    table["n_seeds"] = table["n_seeds"].astype("Int64")
    table.to_csv(os.path.splitext(png_path)[0] + ".csv", index=False, float_format="%.6g")
    print(png_path)


def seeds_note(summary, variants):
    """'mean of 3 seeds (the gate's), band: ...' or 'mean of 2 to 3 seeds ...'."""
    rows = summary[summary["variant"].isin(variants) & (summary["kind"] == "main")
                   & seeds.gate_passed(summary)]
    counts = sorted(set(rows.groupby("variant")["train.seed"].nunique()))
    n = (f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}") \
        if counts else "no"
    return f"mean of {n} seeds; loss band: 95% t interval"


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: loss_and_retrieval.py STUDY_DIR OUT_PNG [VARIANT ...]")
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
