"""The PoSE study (experiments/pose.toml; docs/conventions.md, "PoSE" and "The
miniature"): RoPE trained at L = 64 bytes (rope64), then fine-tuned 200 steps for L' = 256 with
linear PI (s = 4): at 64 bytes with PoSE's skipping position ids (pose_pi, pose_paper), at 64
bytes with RandPos' sorted random ids from [0, L') (randpos_pi), and at the full 256 bytes
(ft256_pi). Every run is read at 64, 128, 192 and 256 bytes with plain positions 0..n-1. Loss in
nats per byte on the split summary.csv names (the study reads the whole validation split); every
difference paired over seeds. The committed study has one seed: its rows show the difference
without an interval and the shared rules keep their verdicts inconclusive (rules.verdict needs
2 seeds). Its table: the gate line, then the papers' rows."""
from poslab_analysis.claims.rules import combined_verdict, fmt, table_head, tally, verdict
from poslab_analysis.claims.studies.context_extension import ce_gate_line, ce_loss
from poslab_analysis.reading import study_files

TRAIN_LEN = 64    # L: rope64's chunks, and the rows PoSE and RandPos fine-tune on
TARGET_LEN = 256  # L' = s L with s = 4: the length every fine-tune extends to


class Study:
    """What the papers' rows read: the gated loss of a variant at a length, the lengths from L to
    L' the study reads (the paper's range, 2k to 16k, scaled), and the table's row format."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary = study_files.read_summary(study_dir)
        read = self.summary[self.summary["kind"] == "length"]["seq_len"].unique()
        self.lengths = sorted(int(n) for n in read if TRAIN_LEN <= n <= TARGET_LEN)

    def loss(self, variant, length):
        """Loss of every gated seed of `variant` on chunks of `length` bytes (Series over
        seeds)."""
        return ce_loss(self.summary, variant, length)

    @staticmethod
    def row(claim, source, paper, measured, by_length, rule_text, judged, record):
        """A claims row of `source` (a paper's name) judged at every length: by_length is
        [(length, interval)], each interval judged by `judged` = (agrees, disagrees); the row's
        verdict is theirs if they all give the same, else each length's. Each length is one
        comparison in `record`."""
        parts = [(f"{length}", verdict(interval, *judged)) for length, interval in by_length]
        tally(record, source, [v for _, v in parts])
        shown = "; ".join(f"{length}: {fmt(*interval)}" for length, interval in by_length)
        return (f"| {claim} ({source}) | {paper} | {measured}, loss at {shown} | {rule_text} | "
                f"{combined_verdict(parts) if parts else 'not measured'} |")


def table(study_dir, papers, record=None):
    """The claims table: the gate line (with the split and the seeds) and the papers' rows
    (paper.pose(study, record) -> lines)."""
    study = Study(study_dir)
    summary = study.summary
    split = ", ".join(sorted(summary["split"].astype(str).unique()))
    n_seeds = summary["train.seed"].nunique()
    seeds_text = (f"{n_seeds} seeds" if n_seeds != 1 else
                  "one seed, so no interval and every verdict inconclusive")
    intro = (f"{ce_gate_line(summary)}. Loss in nats per byte on the {split} split (the paper: "
             "perplexity of LLaMA-7B on GovReport); L = 64 bytes, L' = 256, read at "
             f"{', '.join(str(n) for n in study.lengths)} bytes; {seeds_text}; every "
             "difference paired over seeds.")
    lines = table_head(intro)
    for paper in papers:
        lines += paper.pose(study, record)
    return "\n".join(lines)
