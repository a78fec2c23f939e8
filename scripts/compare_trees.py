"""Compares two output trees of scripts/compare_refactor.sh file by file; exit 1 on a difference.

Ignored, because they differ between two runs of the same binary: the moment and duration of
things (started, finished, seconds, train_seconds, created, heartbeat...), speeds (tokens per
second), peak resident memory, and the provenance's commit, host and pid fields; in text
(stdout, CSV cells) the numbers right before "tokens/s", " s " and the like are masked.
`poslab bench` measures time and memory: in its logs (logs/bench*) every number is masked (with
the padding before it), and in its CSVs the timed and measured columns are left out (counted
FLOPs, shapes and memory estimates are still compared). A directory name with a time stamp is
not expected (none is written). Everything else is compared byte for byte (after JSON parsing
for .json files, so key order would count as a difference only if the values differ)."""
import csv
import io
import json
import re
import sys
from pathlib import Path

IGNORED_KEYS = {
    "started", "finished", "seconds", "train_seconds", "train_tokens_per_second",
    "tokens_per_second", "peak_memory_mb", "commit", "host", "pid", "created", "heartbeat",
    "time", "elapsed_seconds", "wall_seconds", "search_seconds", "updated", "hostname",
    "started_at", "finished_at", "duration_seconds",
}
IGNORED_COLUMNS = IGNORED_KEYS | {"elapsed_s"}
# bench's CSVs: speeds, GFLOP/s, their ratios, resident memory.
BENCH_COLUMNS = {
    "tokens_per_second_min", "tokens_per_second_max", "gflops", "gflops_best", "gflops_vs_none",
    "gflops_best_vs_none", "vanilla_tokens_per_second", "per_segment_tokens_per_second",
    "reuse_tokens_per_second", "speedup_vs_vanilla", "speedup_vs_per_segment",
    "baseline_rss_mb", "peak_rss_mb",
}
# (with the spaces before it: a table pads a number to its column's width)
BENCH_NUMBER = re.compile(r" *[-+]?\d+(\.\d+)?(e[-+]?\d+)?")
# Text: durations, speeds, moments, commits, scratch paths.
TEXT_PATTERNS = [
    (re.compile(r"\b(\d+h)?\d+m(?=[0-9.]+s)"), ""),  # 1m23s -> 23s (then masked below)
    (re.compile(r"(ETA|elapsed) [0-9hm.]+(<n>)?s?"), r"\1 <n>"),
    (re.compile(r"[0-9.]+(e[-+]?[0-9]+)?( ?)(tokens/s|tok/s|s elapsed|s of|s \(|s\b)"), r"<n>\2\3"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d(\.\d+)?Z?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{7,40}(-dirty)?\b"), "<commit>"),
    (re.compile(r"peak [0-9.]+ ?MiB"), "peak <n> MiB"),
]


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in IGNORED_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def is_bench(path):
    return path.name.startswith("bench")


def text(path):
    t = path.read_text(errors="replace")
    for pattern, replacement in TEXT_PATTERNS:
        t = pattern.sub(replacement, t)
    if is_bench(path):
        t = BENCH_NUMBER.sub(" <n>", t)
    return t


def csv_rows(path):
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if not rows:
        return rows
    ignored = IGNORED_COLUMNS | (BENCH_COLUMNS if is_bench(path) else set())
    keep = [i for i, name in enumerate(rows[0]) if name not in ignored]
    return [[r[i] if i < len(r) else None for i in keep] for r in rows]


def same(a, b):
    name = a.name
    if name.endswith(".json"):
        try:
            return strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))
        except json.JSONDecodeError:
            return a.read_bytes() == b.read_bytes()
    if name.endswith(".csv"):
        return csv_rows(a) == csv_rows(b)
    if name.endswith((".out", ".err", ".log", ".txt", ".sh", ".md", ".html")):
        return text(a) == text(b)
    return a.read_bytes() == b.read_bytes()


def main(a_root, b_root):
    a_root, b_root = Path(a_root), Path(b_root)
    a_files = {p.relative_to(a_root) for p in a_root.rglob("*") if p.is_file()}
    b_files = {p.relative_to(b_root) for p in b_root.rglob("*") if p.is_file()}
    problems = []
    for only, where in ((a_files - b_files, a_root), (b_files - a_files, b_root)):
        problems += [f"only in {where}: {p}" for p in sorted(only)]
    compared = 0
    for rel in sorted(a_files & b_files):
        compared += 1
        if not same(a_root / rel, b_root / rel):
            problems.append(f"differs: {rel}")
    for p in problems:
        print(p)
    print(f"compared {compared} files present in both; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
