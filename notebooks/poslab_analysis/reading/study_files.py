"""A study's files as tables: STUDY/summary.csv (one row per run and evaluation setting),
STUDY/loss_by_position.csv[.gz], the RECL values (recl_seed<S>.csv, notebooks/recl.py), the
bootstrap intervals (bootstrap.csv, notebooks/bootstrap.py), the variants of study.toml, and
the studies beside it
(results/state_reuse -> results/state_reuse_conditions; a smoke directory's siblings are smoke
directories too)."""
import glob
import os
import re
import tomllib

import pandas as pd


def read_summary(study_dir):
    return pd.read_csv(os.path.join(study_dir, "summary.csv"))


def read_loss_by_position(study_dir):
    """STUDY/loss_by_position.csv.gz (or the .csv), or None if the study has neither."""
    path = os.path.join(study_dir, "loss_by_position.csv.gz")
    if not os.path.exists(path):
        path = path[:-len(".gz")]
    return pd.read_csv(path) if os.path.exists(path) else None


def sibling_dir(study_dir, name, family):
    """The directory of study `name` beside `study_dir`, a study of `family`, with the same
    suffix: (results/state_reuse-smoke, settle_recl_capped, state_reuse) ->
    results/settle_recl_capped-smoke."""
    suffix = os.path.basename(study_dir)[len(family):]
    return os.path.join(os.path.dirname(study_dir) or ".", name + suffix)


def read_sibling(study_dir, name, family="state_reuse"):
    """The summary of a sibling study (results/state_reuse -> results/state_reuse_conditions,
    results/lm_extrapolation -> results/settle_t5_max_distance with family="lm_extrapolation"),
    or None if it has not run."""
    path = os.path.join(sibling_dir(study_dir, name, family), "summary.csv")
    return pd.read_csv(path) if os.path.exists(path) else None


def read_recl(study_dir):
    """RECL per model, one value per seed group (study_dir/recl_seed<S>.csv, notebooks/recl.py):
    ({model: [(recl, censored), ...]}, number of seed groups), or None without files."""
    files = sorted(glob.glob(os.path.join(study_dir, "recl_seed*.csv")))
    if not files:
        return None
    values = {}
    for path in files:
        for _, row in pd.read_csv(path).iterrows():
            name = re.search(r"\((.*)__train\.seed-\d+\)", row["model"]).group(1)
            values.setdefault(name, []).append((int(row["recl"]),
                                                str(row["censored"]).lower() == "true"))
    return values, len(files)


def read_bootstrap(study_dir):
    """The bootstrap intervals of STUDY/bootstrap.csv as {comparison: ["seed: [low, high]", ...]}
    ({} without the file)."""
    boot = {}
    path = os.path.join(study_dir, "bootstrap.csv")
    if os.path.exists(path):
        for _, b in pd.read_csv(path).iterrows():
            boot.setdefault(b["comparison"], []).append(
                f"{int(b['seed'])}: [{b['ci_low']:+.3f}, {b['ci_high']:+.3f}]")
    return boot


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


def variant_table(study_dir):
    """One row per variant of the committed study file: variant, parent (variant name or ""),
    steps, seq_len (training length), scaling, factor, encoding."""
    with open(os.path.join(study_dir, "study.toml"), "rb") as f:
        study = tomllib.load(f)
    base = study.get("base", {})

    def base_value(key, default):
        section, name = key.split(".")
        return base.get(section, {}).get(name, default)

    rows = []
    for variant in study.get("variant", []):
        values = dict(variant.get("set", {}))
        get = lambda key, default: values.get(key, base_value(key, default))  # noqa: E731
        rows.append({"variant": variant["name"], "parent": variant.get("from", ""),
                     "steps": int(get("train.steps", 0)), "seq_len": int(get("train.seq_len", 0)),
                     "scaling": get("encoding.scaling", "none"),
                     "factor": float(get("encoding.factor", 1.0)),
                     "encoding": get("encoding.type", "")})
    return pd.DataFrame(rows).set_index("variant")
