"""The fitness curve of `poslab longrope-search`: the best validation loss at the target length
(and the parents' mean) after each iteration of LongRoPE's evolutionary search.

    /usr/bin/python3 notebooks/longrope_fitness.py OUT/fitness.csv OUT/fitness.png
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def main(csv_path, png_path):
    curve = pd.read_csv(csv_path)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot(curve["iteration"], curve["best_loss"], marker="o", markersize=3,
            label="best so far")
    ax.plot(curve["iteration"], curve["mean_parent_loss"], ls="--", label="parents' mean")
    ax.set_xlabel("iteration (0 = the seeds and their mutants)")
    ax.set_ylabel("validation loss at the target length\n(nats per token)")
    ax.set_title("LongRoPE search: fitness by iteration", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(png_path, dpi=150)
    print(png_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: longrope_fitness.py FITNESS_CSV OUT_PNG")
    main(sys.argv[1], sys.argv[2])
