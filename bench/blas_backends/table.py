"""Markdown tables for docs/09 ("Which BLAS") from results/bench/blas_backends.csv, every number
with its <!--= ... --> marker (tests/docs/check_docs.py checks them against the CSV).

    /usr/bin/python3 bench/blas_backends/table.py [results/bench/blas_backends.csv]
"""
import sys

import pandas as pd

PATH = sys.argv[1] if len(sys.argv) > 1 else "results/bench/blas_backends.csv"
BACKENDS = ["openblas", "blis", "libxsmm", "libxsmm_jit"]
frame = pd.read_csv(PATH)


def cell(config, id_, backend, column, fmt):
    row = frame[(frame.config == config) & (frame.id == id_) & (frame.backend == backend)]
    assert len(row) == 1, (config, id_, backend)
    value = row[column].iloc[0]
    return (f"{value:{fmt}}<!--= {PATH} config={config} id={id_} backend={backend} {column} -->")


def products(config):
    print(f"| product ({config}) | m x n x k | calls per step | " +
          " | ".join(f"{b} GFLOP/s" for b in BACKENDS) + " |")
    print("|---|---|---|" + "---|" * len(BACKENDS))
    rows = frame[(frame.config == config) & (frame.backend == "openblas") &
                 (frame.id != "step_total")]
    for _, r in rows.iterrows():
        calls = int(r.calls_per_instance * r.instances_per_step)
        print(f"| {r['product']} (`{r['call']}`) | {int(r.m)} x {int(r.n)} x {int(r.k)} | {calls} | " +
              " | ".join(cell(config, r.id, b, "gflops_median", ".0f") for b in BACKENDS) + " |")


def totals():
    print("| configuration | backend | step time, ms: median (min, max) | GFLOP/s | "
          "speedup over OpenBLAS: median (min, max) | FLOPs in JIT kernels | max rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for config in frame.config.unique():
        for b in BACKENDS:
            c = lambda col, fmt: cell(config, "step_total", b, col, fmt)
            print(f"| {config} | {b} | {c('ms_median', '.2f')} ({c('ms_min', '.2f')}, "
                  f"{c('ms_max', '.2f')}) | {c('gflops_median', '.0f')} | "
                  f"{c('speedup_median', '.2f')} ({c('speedup_min', '.2f')}, "
                  f"{c('speedup_max', '.2f')}) | {c('jit_flop_fraction', '.2f')} | "
                  f"{c('max_rel_diff', '.7f')} |")


totals()
print()
for config in frame.config.unique():
    products(config)
    print()
