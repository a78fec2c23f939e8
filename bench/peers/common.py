"""What the two peers share: the reference shapes of `poslab bench`, the timing protocol, and
the printout (median, min and max tokens/s over repetitions, as `poslab bench` prints them)."""
import argparse
import statistics
import time

import torch

# The reference configuration of `poslab bench` (its --help and docs/09).
D_MODEL, N_LAYERS, N_HEADS, D_INNER, VOCAB = 128, 4, 4, 512, 256
SEGMENT, BATCH = 64, 16


def arguments(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per repetition (20)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed repetitions (5)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    return parser


def time_training(step, steps, repetitions, tokens_per_step, warmup=3):
    """Runs `step()` 3 times (warm-up), then `repetitions` x `steps` times; returns tokens/s of
    each repetition."""
    for _ in range(warmup):
        step()
    rates = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(steps * tokens_per_step / (time.perf_counter() - start))
    return rates


def report(name, rates, threads):
    print(f"{name}: {statistics.median(rates):.0f} (min {min(rates):.0f}, max {max(rates):.0f}) "
          f"tokens/s, {len(rates)} repetitions; torch {torch.__version__}, {threads} threads, "
          f"d_model {D_MODEL}, {N_LAYERS} layers, {N_HEADS} heads, d_inner {D_INNER}, "
          f"segment {SEGMENT}, batch {BATCH}")
