"""Standard figures of poslab's studies, from the tidy CSVs `poslab run` writes.

    /usr/bin/python3 notebooks/poslab_plots.py results/state_reuse        # -> results/state_reuse/figures/
    build/poslab plot results/state_reuse                                 # the same

Every figure is saved as PNG and SVG. Curves show the mean over seeds with a band of +- one
standard deviation (no band when there is a single seed). Uses Debian's python3-pandas and
python3-matplotlib (the `python3` on PATH may be another interpreter: call /usr/bin/python3).
"""
import os
import sys

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

plt.rcParams["svg.hashsalt"] = "poslab"  # the same figure gives the same SVG file
plt.rcParams["axes.prop_cycle"] = plt.cycler(color=plt.get_cmap("tab20").colors)

ENCODING_ORDER = ["none", "sinusoidal", "learned", "shaw", "transformer_xl", "t5_bias", "alibi",
                  "rope", "kerple", "fire", "deberta", "example_distance_bias"]


def load(study_dir):
    """summary.csv (one row per run and evaluation setting) and loss_by_position.csv, if any."""
    summary = pd.read_csv(os.path.join(study_dir, "summary.csv"))
    positions = None
    for name in ("loss_by_position.csv", "loss_by_position.csv.gz"):  # large ones are committed gzipped
        path = os.path.join(study_dir, name)
        if os.path.exists(path):
            positions = pd.read_csv(path)
            break
    return summary, positions


def ordered(values):
    values = list(dict.fromkeys(values))
    known = [v for v in ENCODING_ORDER if v in values]
    return known + sorted(v for v in values if v not in known)


def series_column(frame):
    """What distinguishes the curves: the encoding, or else the study's variant."""
    if "encoding.type" in frame and frame["encoding.type"].nunique() > 1:
        return "encoding.type"
    if "variant" in frame:
        return "variant"
    return "encoding.type"


def mean_band(ax, frame, x, y, label, **style):
    """Mean of y over seeds at each x, with a +- 1 std band."""
    stats = frame.groupby(x)[y].agg(["mean", "std", "count"]).reset_index().sort_values(x)
    line, = ax.plot(stats[x], stats["mean"], marker="o", label=label, **style)
    if (stats["count"] > 1).any():
        ax.fill_between(stats[x], stats["mean"] - stats["std"].fillna(0),
                        stats["mean"] + stats["std"].fillna(0), alpha=0.2,
                        color=line.get_color())
    return line


def save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        path = os.path.join(out_dir, f"{name}.{ext}")
        metadata = {"Date": None} if ext == "svg" else {}
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


def panels(keys):
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), squeeze=False)
    return fig, axes[0]


def length_generalization(summary, out_dir, metric="accuracy"):
    """Accuracy (or loss) vs evaluation length, one panel per task, one curve per encoding."""
    rows = summary[summary["kind"] == "length"].dropna(subset=[metric])
    tasks = ordered(rows["task.name"]) if "task.name" in rows else [None]
    fig, axes = panels(tasks)
    for ax, task in zip(axes, tasks):
        sub = rows if task is None else rows[rows["task.name"] == task]
        for enc in ordered(sub["encoding.type"]):
            mean_band(ax, sub[sub["encoding.type"] == enc], "factor", metric, enc)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("evaluation length / training length")
        ax.set_ylabel(metric.replace("_", " "))
        ax.set_title(task or "")
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, out_dir, f"length_generalization_{metric}")


def memory_curves(summary, out_dir, figure_name="loss_vs_memory"):
    """Loss vs evaluation memory length, one panel per (task, trained memory)."""
    rows = summary[summary["kind"] == "memory"].dropna(subset=["loss"])
    groups = [(t, m) for t in (ordered(rows["task.name"]) if "task.name" in rows else [None])
              for m in (sorted(rows["memory.mem_len"].unique()) if "memory.mem_len" in rows
                        else [None])]
    fig, axes = panels(groups)
    for ax, (task, trained_mem) in zip(axes, groups):
        sub = rows
        if task is not None:
            sub = sub[sub["task.name"] == task]
        if trained_mem is not None:
            sub = sub[sub["memory.mem_len"] == trained_mem]
        col = series_column(sub)
        for name in ordered(sub[col]):
            mean_band(ax, sub[sub[col] == name], "mem_len", "loss", name)
        ax.set_xlabel("evaluation memory length")
        ax.set_ylabel("loss (nats per scored token)")
        title = task or ""
        if trained_mem is not None:
            title += f", trained with memory {trained_mem}"
        ax.set_title(title)
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, out_dir, figure_name)


def loss_by_position(positions, out_dir):
    """Loss at each position inside a segment: one panel per task and evaluation memory (none,
    and the largest), one curve per encoding (or variant). Memory helps the early positions."""
    rows = positions[positions["kind"] == "memory"]
    if rows.empty:
        return []
    if "memory.mem_len" in rows:  # the models trained with memory
        rows = rows[rows["memory.mem_len"] == rows["memory.mem_len"].max()]
    task_col = "task.name" if "task.name" in rows else None
    tasks = ordered(rows[task_col]) if task_col else [None]
    memories = sorted({rows["mem_len"].min(), rows["mem_len"].max()})
    fig, axes = panels([(t, m) for t in tasks for m in memories])
    for ax, (task, mem) in zip(axes, [(t, m) for t in tasks for m in memories]):
        sub = rows[rows["mem_len"] == mem]
        if task is not None:
            sub = sub[sub[task_col] == task]
        col = series_column(sub)
        for name in ordered(sub[col]):
            mean_band(ax, sub[sub[col] == name], "position", "loss", name, markersize=3)
        ax.set_xlabel("position inside the segment")
        ax.set_ylabel("loss")
        ax.set_title(f"{task + ', ' if task else ''}evaluation memory {mem}")
    top = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(top=top)
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, out_dir, "loss_by_position")


def shaw_clip(summary, out_dir):
    """Loss vs Shaw's clipping distance k, one curve per table choice."""
    rows = summary[summary["kind"] == "main"].dropna(subset=["loss"])
    fig, axes = panels([None])
    ax = axes[0]
    for variant in ordered(rows["variant"]) if "variant" in rows else [None]:
        part = rows if variant is None else rows[rows["variant"] == variant]
        mean_band(ax, part, "encoding.clip_k", "loss", variant or "")
    ax.set_xscale("symlog", base=2, linthresh=1)
    ax.set_xlabel("clip distance k")
    ax.set_ylabel("validation loss (nats per byte)")
    ax.legend(fontsize=8)
    return save(fig, out_dir, "shaw_clip")


def xl_terms(summary, out_dir):
    """Transformer-XL term ablation: loss of each variant, with and without long memory."""
    rows = summary.dropna(subset=["loss"])
    fig, axes = panels([None])
    ax = axes[0]
    variants = list(dict.fromkeys(rows["variant"]))
    settings = [("main", None, "trained memory")]
    mem_rows = rows[rows["kind"] == "memory"]
    if not mem_rows.empty:
        settings = [("memory", mem_rows["mem_len"].min(), None),
                    ("memory", mem_rows["mem_len"].max(), None)]
    width = 0.8 / len(settings)
    for s, (kind, mem, label) in enumerate(settings):
        sub = rows[rows["kind"] == kind]
        if mem is not None:
            sub = sub[sub["mem_len"] == mem]
            label = f"evaluation memory {mem}"
        stats = sub.groupby("variant")["loss"].agg(["mean", "std"]).reindex(variants)
        xs = [i + (s - (len(settings) - 1) / 2) * width for i in range(len(variants))]
        ax.bar(xs, stats["mean"], width, yerr=stats["std"].fillna(0), label=label, capsize=3)
    ax.set_xticks(range(len(variants)), variants, rotation=30, ha="right")
    ax.set_ylabel("validation loss (nats per byte)")
    lo = rows["loss"].min()
    ax.set_ylim(bottom=max(0.0, lo - 0.3))
    ax.legend(fontsize=8)
    return save(fig, out_dir, "xl_terms")


def standard_figures(study_dir, out_dir=None):
    """Every figure that fits the study's columns; returns the written paths."""
    summary, positions = load(study_dir)
    out_dir = out_dir or os.path.join(study_dir, "figures")
    written = []
    kinds = set(summary["kind"])
    if "length" in kinds:
        written += length_generalization(summary, out_dir, "accuracy")
        written += length_generalization(summary, out_dir, "loss")
        if "exact_match" in summary:
            written += length_generalization(summary, out_dir, "exact_match")
    if "variant" in summary and "encoding.clip_k" in summary:
        written += shaw_clip(summary, out_dir)
    elif "variant" in summary and summary["variant"].notna().any():
        written += xl_terms(summary, out_dir)
    if "memory" in kinds:
        written += memory_curves(summary, out_dir)
        if "task.name" in summary and summary["task.name"].nunique() > 1:
            for task in ordered(summary["task.name"]):  # one figure per task as well
                written += memory_curves(summary[summary["task.name"] == task], out_dir,
                                         f"loss_vs_memory_{task}")
        if positions is not None:
            written += loss_by_position(positions, out_dir)
    return written


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    for study_dir in argv[1:]:
        if not os.path.exists(os.path.join(study_dir, "summary.csv")):
            print(f"poslab plot: error: {study_dir}/summary.csv not found "
                  f"(run the study first: build/poslab run experiments/NAME.toml)",
                  file=sys.stderr)
            return 1
        for path in standard_figures(study_dir):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
