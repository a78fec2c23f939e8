"""Who calls the products: reads `perf script -F ip,sym` of a run recorded with call stacks
(stdin; bench/profile_step/run.sh with BY_CALLER=1) and prints the share of the CPU samples per
caller and part.

The caller is the innermost frame of the sample's stack that names one of poslab's passes:
attention's forward or backward (the per-head products Q K^T and A V and their gradients, and
the softmax), a linear layer's forward or backward (the projections and the feed-forward), any
other forward or backward (products the compiler inlined without a linear_* frame, the output
layer, layer norm, GELU, the loss), else "other" (Adam, start-up, the evaluation). A sample whose
stack stops inside OpenBLAS (perf could not unwind it) is counted as "no stack".
The part is the sampled function: OpenBLAS's kernel, its packing copies, its zeroing of C
(sgemm_beta and memset), or poslab's own code and the rest."""
import collections
import re
import sys

CALLERS = [("attention backward", r"Attention<float>::backward"),
           ("attention forward", r"Attention<float>::forward"),
           ("linear backward", r"linear_backward"),
           ("linear forward", r"linear_forward"),
           ("other forward (inlined products, output layer, layer norm, GELU, loss)",
            r"::forward"),
           ("other backward (inlined products, layer norm, GELU, loss)", r"::backward")]
PARTS = [("OpenBLAS kernel", r"sgemm_kernel"), ("OpenBLAS packing", r"sgemm_\w*copy"),
         ("OpenBLAS zeroing C", r"sgemm_beta|memset"), ("OpenBLAS other", r"sgemm")]


def part_of(leaf):
    return next((name for name, rx in PARTS if re.search(rx, leaf)), "poslab and the rest")


def caller_of(frames):
    name = next((name for frame in frames for name, rx in CALLERS if re.search(rx, frame)), None)
    if name is not None:
        return name
    if all(re.search(r"sgemm|memset|^\[unknown\]$|^$", f) for f in frames):
        return "no stack (unwinding stopped inside OpenBLAS)"
    return "other (Adam, start-up, evaluation)"


def main():
    counts, total = collections.Counter(), 0
    for sample in sys.stdin.read().split("\n\n"):
        frames = [line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
                  for line in sample.strip().splitlines() if line.strip()]
        if not frames:
            continue
        total += 1
        counts[(caller_of(frames), part_of(frames[0]))] += 1
    callers = [name for name, _ in CALLERS] + ["other (Adam, start-up, evaluation)",
                                               "no stack (unwinding stopped inside OpenBLAS)"]
    print(f"by caller ({total} samples with call stacks):")
    for caller in callers:
        parts = {part: n for (c, part), n in counts.items() if c == caller}
        if not parts:
            continue
        detail = ", ".join(f"{part} {100 * n / total:.1f}%"
                           for part, n in sorted(parts.items(), key=lambda kv: -kv[1]))
        print(f"  {100 * sum(parts.values()) / total:5.1f}%  {caller}: {detail}")


if __name__ == "__main__":
    main()
