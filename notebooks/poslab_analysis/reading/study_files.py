"""A study's files as tables: STUDY/summary.csv (one row per run and evaluation setting),
STUDY/loss_by_position.csv[.gz], the RECL values (recl_seed<S>.csv, notebooks/recl.py), the
bootstrap intervals (bootstrap.csv, notebooks/bootstrap.py), the variants of study.toml, and
the studies beside it
(results/state_reuse -> results/state_reuse_conditions; a smoke directory's siblings are smoke
directories too)."""
import csv
import glob
import io
import os
import re
import tomllib

import pandas as pd

from poslab_analysis.reading import protocol_gates


class StudyFileError(ValueError):
    """A study's file that poslab cannot read, said in one line (the file and the problem)."""


SUMMARY_COLUMNS = ("run", "kind")  # what every summary.csv `poslab run` writes holds
SUMMARY_LIMIT = 1 << 30            # bytes; a summary of 100,000 runs is far below this


def read_checked_summary(path):
    """The summary.csv at `path` as a DataFrame, or a StudyFileError that says in one line what is
    wrong with the file (missing, not a regular file, too large, not UTF-8, NUL bytes, empty,
    ragged rows, no run or kind column): what `poslab report` and `poslab plot` say instead of a
    traceback."""
    if not os.path.exists(path):
        raise StudyFileError(f"{path} not found (run the study first: build/poslab run experiments/NAME.toml)")
    if not os.path.isfile(path):  # a directory, a device (/dev/zero), a pipe
        raise StudyFileError(f"{path} is not a regular file")
    if os.path.getsize(path) > SUMMARY_LIMIT:
        raise StudyFileError(f"{path} holds {os.path.getsize(path)} bytes, more than a summary can "
             f"({SUMMARY_LIMIT}); is it the study's summary.csv?")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StudyFileError(f"{path} is not UTF-8 text (byte {e.start}); `poslab run --summary-only` "
             f"writes it again from the run directories")
    if "\0" in text:
        raise StudyFileError(f"{path} holds NUL bytes: not a CSV table")
    if not text.strip():
        raise StudyFileError(f"{path} is empty; `poslab run STUDY --summary-only` writes it again")
    rows = csv.reader(io.StringIO(text))
    width = len(next(rows))
    for line, row in enumerate(rows, start=2):
        if row and len(row) != width:  # pandas would take the extra fields as an index
            raise StudyFileError(f"{path} is not a CSV table poslab wrote: line {line} has {len(row)} fields, "
                 f"the header {width}")
    try:
        summary = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise StudyFileError(f"{path} is not a CSV table poslab wrote: {str(e).strip().splitlines()[-1]}")
    missing = [c for c in SUMMARY_COLUMNS if c not in summary.columns]
    if missing:
        raise StudyFileError(f"{path} has no column {', '.join(repr(c) for c in missing)} (its columns: "
             f"{', '.join(map(str, summary.columns[:6]))}{', ...' if len(summary.columns) > 6 else ''})"
             f"; is it the summary.csv of a poslab study?")
    return summary


def read_summary(study_dir):
    """STUDY/summary.csv with the protocol's gate applied (protocol_gates: in_distribution_ok
    false for every run the study's protocol drops, beyond the runner's loss gate)."""
    return read_gated_summary(study_dir)[0]


def read_gated_summary(study_dir):
    """(read_summary's table, {run: why} of the runs the protocol's gate drops; empty for a
    study without a registered gate)."""
    return protocol_gates.apply(pd.read_csv(os.path.join(study_dir, "summary.csv")), study_dir)


def protocol_dropped(study_dir):
    """The runs the study's protocol gate drops: the tables per run beside summary.csv leave
    them out, as read_summary marks them."""
    if not os.path.exists(os.path.join(study_dir, "summary.csv")):
        return set()
    return set(read_gated_summary(study_dir)[1])


def read_run_table(study_dir, *names, dropped_by=None):
    """The first of STUDY/NAME that exists, without the runs the protocol's gate drops, or
    None. dropped_by(summary, study_dir) -> runs: another reading of the gate (streaming
    rows)."""
    for name in names:
        path = os.path.join(study_dir, name)
        if os.path.exists(path):
            table = pd.read_csv(path)
            summary_path = os.path.join(study_dir, "summary.csv")
            dropped = (protocol_dropped(study_dir) if dropped_by is None
                       else dropped_by(pd.read_csv(summary_path), study_dir)
                       if os.path.exists(summary_path) else set())
            return table[~table["run"].isin(dropped)] if dropped else table
    return None


def read_loss_by_position(study_dir):
    """STUDY/loss_by_position.csv.gz (or the .csv), or None if the study has neither (the
    protocol's gate applied, as to every table per run)."""
    return read_run_table(study_dir, "loss_by_position.csv.gz", "loss_by_position.csv")


def read_loss_by_copy_distance(study_dir):
    """STUDY/loss_by_copy_distance.csv (eval.copy_distance), or None if the study has none."""
    return read_run_table(study_dir, "loss_by_copy_distance.csv")


def read_loss_by_stream_position(study_dir):
    """STUDY/loss_by_stream_position.csv (eval.stream_length), or None if the study has none."""
    return read_run_table(study_dir, "loss_by_stream_position.csv",
                          dropped_by=protocol_gates.stream_dropped)


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
    """summary.csv (one row per run and evaluation setting; the protocol's gate applied, as by
    read_summary) and loss_by_position.csv, if any."""
    return read_summary(study_dir), read_loss_by_position(study_dir)


def variant_table(study_dir):
    """One row per variant of the committed study file: variant, parent (variant name or ""),
    steps, seq_len (training length), scaling, factor, encoding, log_n (off, eval, always),
    passkey_fraction (the share of training rows that are passkey instances)."""
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
                     "encoding": get("encoding.type", ""),
                     "log_n": get("encoding.log_n", "off"),
                     "passkey_fraction": float(get("train.passkey_fraction", 0.0))})
    return pd.DataFrame(rows).set_index("variant")
