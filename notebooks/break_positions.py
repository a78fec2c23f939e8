"""Where each zero-shot RoPE scaling breaks, predicted from its wavelength table and observed in
the context-extension study (docs/11-extending-context.md, "What the study found").

    /usr/bin/python3 notebooks/break_positions.py results/context_extension build/poslab
    /usr/bin/python3 notebooks/break_positions.py --check results/context_extension build/poslab
                                                                 (CTest: docs_break_positions)

Predicted. A pair whose wavelength exceeds the trained length L never completed a turn in
training: its angles stayed below (L - 1) theta_i. Scaled to theta'_i, the pair reaches that
angle at position (L - 1) theta_i / theta'_i. The first such position, over the pairs that never
turned, is where the model first sees an angle it never saw:

    predicted = min over pairs with L theta_i < 2 pi of (L - 1) theta_i / theta'_i

(the columns theta, theta_scaled and rotations_L of `poslab encodings --describe rope --csv`, one
command per variant, printed as it runs; dynamic NTK at the keys of the read, K = 1,024). This
ignores YaRN's attention temperature and everything the model does with the angles.

Observed. The test loss at each position of the 1,024-byte chunks (loss_by_position), in bins of
8 bytes as in extension_loss_by_position, averaged over the seeds whose rope64 parent passed the
gate (a zero-shot read trains nothing: settling run 6's rule); the break is the first bin whose
loss exceeds the bigram baseline of the test split (the model is then worse than counting byte
pairs) and the bin after it too. Per seed as well, for the spread.

Writes STUDY_DIR/break_positions.csv (one row per variant) and prints it as a Markdown table.
--check writes nothing and fails unless the committed CSV is what this computes today.
"""
import os
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from poslab_analysis.statistics import seeds as poslab_stats  # noqa: E402
import rope_wavelengths  # noqa: E402
from poslab_analysis.reading.study_files import variant_table  # noqa: E402

LONGEST = 1024  # the bytes of the longest read
BIN = 8         # bytes per bin (extension_loss_by_position: 8 bins per L = 64)


def predicted_break(table, train_len):
    """The first position where a pair that never turned in training leaves its trained angles
    (None when every pair turned: no angle is new)."""
    never_turned = table[table["rotations_L"] < 1.0]
    if never_turned.empty:
        return None
    return float(((train_len - 1) * never_turned["theta"] / never_turned["theta_scaled"]).min())


def describe_arguments(study_dir, info, variant):
    """The `--describe rope` arguments of a variant: the study's model and the variant's scaling."""
    import tomllib
    with open(os.path.join(study_dir, "study.toml"), "rb") as f:
        model = tomllib.load(f)["base"]["model"]
    parent = info.loc[variant, "parent"] or variant
    arguments = (f"--set model.d_model={model['d_model']} --set model.n_heads={model['n_heads']} "
                 f"--set encoding.original_len={int(info.loc[parent, 'seq_len'])}")
    scaling = info.loc[variant, "scaling"]
    if scaling != "none":
        arguments += f" --set encoding.scaling={scaling} --set encoding.factor={info.loc[variant, 'factor']:g}"
    return arguments + f" --length {LONGEST}"


def first_break(curve, bigram):
    """The first bin start whose loss, and the next bin's, exceed the bigram baseline."""
    curve = curve.sort_index()
    above = (curve > bigram).tolist()
    for i, position in enumerate(curve.index):
        if above[i] and (i + 1 == len(above) or above[i + 1]):
            return int(position)
    return None


def main(study_dir, poslab, check=False):
    info = variant_table(study_dir)
    summary = pd.read_csv(os.path.join(study_dir, "summary.csv"))
    positions = pd.read_csv(os.path.join(study_dir, "loss_by_position.csv.gz"))
    bigram = float(summary["bigram_loss"].dropna().iloc[0])
    main_rows = summary[summary["kind"] == "main"].drop_duplicates("run")
    parent = next(v for v in info.index if not info.loc[v, "parent"] and
                  any(info.loc[z, "parent"] == v for z in info.index))
    passed = set(main_rows[(main_rows["variant"] == parent)
                           & poslab_stats.gate_passed(main_rows)]["train.seed"])
    reads = positions[(positions["kind"] == "length") & (positions["seq_len"] == LONGEST)
                      & positions["train.seed"].isin(passed)]
    variants = [parent] + [v for v in info.index if info.loc[v, "parent"] == parent
                           and info.loc[v, "steps"] == 0 and (reads["variant"] == v).any()]
    rows = []
    for v in variants:
        table = rope_wavelengths.describe(poslab, describe_arguments(study_dir, info, v))
        part = reads[reads["variant"] == v].assign(bin=lambda f: (f["position"] // BIN) * BIN)
        per_seed = part.groupby(["train.seed", "bin"])["loss"].mean()
        seeds = sorted(part["train.seed"].unique())
        seed_breaks = [first_break(per_seed.loc[s], bigram) for s in seeds]
        train_len = int(info.loc[parent, "seq_len"])
        rows.append({
            "variant": v, "scaling": info.loc[v, "scaling"], "factor": info.loc[v, "factor"],
            "predicted_break": predicted_break(table, train_len),
            "observed_break": first_break(part.groupby("bin")["loss"].mean(), bigram),
            "observed_break_seeds": " ".join("none" if b is None else str(b)
                                             for b in seed_breaks),
            "seeds": len(seeds), "bigram_loss": bigram})
    frame = pd.DataFrame(rows)
    text = frame.to_csv(index=False, float_format="%.6g")
    path = os.path.join(study_dir, "break_positions.csv")
    if check:
        committed = open(path).read() if os.path.exists(path) else ""
        if committed != text:
            print(f"break_positions: {path} is not what the script computes today; rerun "
                  f"/usr/bin/python3 notebooks/break_positions.py {study_dir} build/poslab")
            return 1
        print(f"break_positions: {path} is up to date ({len(frame)} variants)")
        return 0
    with open(path, "w") as f:
        f.write(text)
    print("| variant | predicted break (position) | observed break (first 8-byte bin above the "
          "bigram baseline; mean curve) | per seed |")
    print("|---|---|---|---|")
    for r in rows:
        predicted = "none (every pair turned)" if r["predicted_break"] is None \
            else f"{r['predicted_break']:.0f}"
        observed = "none" if r["observed_break"] is None else str(r["observed_break"])
        print(f"| {r['variant']} | {predicted} | {observed} | {r['observed_break_seeds']} |")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if len(args) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(args[0], args[1], check))
