"""Docs that stay true: checks the README and docs/ against the code and the committed results.

    /usr/bin/python3 tests/docs/check_docs.py build/poslab          (CTest: docs_true)
    /usr/bin/python3 tests/docs/check_docs.py --self-test           (the checks can fail)

1. Claims tables. A block
       <!-- claims: results/lm_extrapolation -->
       ...
       <!-- /claims -->
   must hold exactly what `notebooks/claims.py results/lm_extrapolation` prints today from the
   committed summary.csv. Editing a number by hand, or a result changing under the text, fails.
2. Quoted numbers. A number followed by a marker
       1.414<!--= results/lm_extrapolation/summary_ci.csv variant=python encoding.type=alibi
                  kind=length factor=16 loss_mean -->
   must equal that cell (the one row the key=value filters select) rounded to the decimals the
   text shows. The marker is an HTML comment: invisible in the rendered page. Inside a block
       <!-- results -->  ...  <!-- /results -->
   every decimal number must carry a marker (or sit in a claims block).
   A marker may name a poslab command that prints CSV instead of a file, with the filters and
   the column after a '|':
       10.19<!--= build/poslab encodings --describe rope --csv --set encoding.scaling=yarn ...
                  | pair=0 rotations_L -->
   the number must equal that cell of what the command prints today (chapter 11 quotes the
   describe table this way).
3. Commands. Every `build/poslab SUBCOMMAND ...` line in a code block or inline code names an
   existing subcommand, and every --option it uses is in that subcommand's --help.
4. Links and paths. Every relative Markdown link, and every experiments/*.toml or results/...
   path written in inline code, exists in the repository (unless the text marks it as a file the
   reader writes: `experiments/mine.toml`<!-- a file you write -->).
5. Excerpts. A code block right after
       <!-- excerpt: src/encodings/example_distance_bias.cpp tests/test_example_distance_bias.cpp -->
   quotes those files: each of its lines (stripped; in a diff block without its + or space
   prefix; blank lines and lines with "..." skipped) must be a line of one of them. Chapter 7
   walks through the example encoding with such excerpts, so it cannot drift from the code.
6. Registry. Every encoding `poslab encodings` lists has its row in the README's table of
   encodings (chapter 7, step 3: what a new encoding needs beyond its file).
8. Paper metrics. Every committed results/STUDY/paper_metrics.csv (the values of the claims
   tables' paper metrics that the text quotes with markers) is exactly what
   `notebooks/claims.py --metrics results/STUDY` prints today.
7. Help texts. Every `poslab SUBCOMMAND ... --option` example inside any command's --help names
   an existing subcommand and options it has (the help must not drift from the options either).
8. Outputs. A code block right after
       <!-- output: build/poslab encodings --describe rope --set encoding.scaling=yarn ... -->
   must be exactly what that command prints today (stdout), so a table quoted from poslab
   cannot drift from the code that prints it.
9. Stands alone. Nothing in the repository points outside it: in every text file it holds (git
   ls-files; code, tests, study files, docs, results), (a) a relative path that climbs out with
   ../ must land on something inside the repository, from the file's own folder (the build
   folder, build/, counts: the reader makes it); (b) no absolute path into the folder that holds
   the checkout (here: the parent of the repository); (c) no note named in capitals (the
   name of a Markdown file written all in capitals) that the repository does not hold: a
   reader of the repository has none of the notes kept beside a checkout; the papers'
   conventions and regimes are docs/conventions.md.
Every problem is printed as FILE:LINE: what is wrong; the exit code is 1 if there is any.
"""
import os
import re
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3"

NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
MARKED = re.compile(rf"({NUMBER})<!--=\s*(.+?)\s*-->", re.S)
CLAIMS = re.compile(r"<!-- claims: (\S+) -->\n(.*?)<!-- /claims -->", re.S)
RESULTS = re.compile(r"<!-- results -->(.*?)<!-- /results -->", re.S)
DECIMAL = re.compile(r"(?<![\w.\-/])[-+]?\d+\.\d+(?!\w|\.\d)")
COMMAND = re.compile(r"build/poslab ([a-z][a-z-]*)((?:[^\n`]|\\\n)*)")
NEW_FILE = "<!-- a file you write -->"
OUTPUT = re.compile(r"<!-- output: build/poslab ([^>]+?) -->\n```(\w*)\n(.*?)```", re.S)
EXCERPT = re.compile(r"<!-- excerpt: ([^>]+?) -->\n```(\w*)\n(.*?)```", re.S)
ENCODING_LINE = re.compile(r"^([a-z0-9_]+)  \(", re.M)  # `poslab encodings`: "NAME  (family)"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CODE_PATH = re.compile(r"`((?:experiments|results|notebooks|scripts|src|tests|bench)/[^`\s*<>]+)`")


def documents():
    yield os.path.join(REPO, "README.md")
    for name in sorted(os.listdir(os.path.join(REPO, "docs"))):
        if name.endswith(".md"):
            yield os.path.join(REPO, "docs", name)
    exercises = os.path.join(REPO, "docs", "exercises")
    if os.path.isdir(exercises):
        for name in sorted(os.listdir(exercises)):
            if name.endswith(".md"):
                yield os.path.join(exercises, name)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def command_csv(poslab, arguments, cache={}):
    """What `poslab ARGUMENTS` prints, read as CSV -> (frame, error); each command runs once."""
    import io
    import shlex
    import pandas as pd
    if arguments not in cache:
        if poslab is None:
            cache[arguments] = (None, "a marker naming a poslab command needs the poslab binary")
        else:
            done = subprocess.run([poslab] + shlex.split(arguments), capture_output=True,
                                  text=True)
            if done.returncode != 0:
                cache[arguments] = (None, f"'poslab {arguments}' failed: {done.stderr.strip()}")
            else:
                try:
                    cache[arguments] = (pd.read_csv(io.StringIO(done.stdout)), None)
                except Exception as e:  # not CSV: pandas says why
                    cache[arguments] = (None, f"'poslab {arguments}' does not print CSV: {e}")
    return cache[arguments]


def lookup(spec, poslab=None):
    """The value a marker names: 'PATH key=value ... COLUMN', or
    'build/poslab ARGUMENTS | key=value ... COLUMN' -> (value, error)."""
    import pandas as pd
    if spec.startswith("build/poslab "):
        if " | " not in spec:
            return None, f"marker '{spec}' needs '| key=value ... COLUMN' after the command"
        command, rest = spec.split(" | ", 1)
        frame, error = command_csv(poslab, command[len("build/poslab "):].strip())
        if error:
            return None, error
        path = command
        parts = [path] + rest.split()
    else:
        parts = spec.split()
        path = parts[0] if parts else ""
        frame = None
    if len(parts) < 2:
        return None, f"marker '{spec}' needs a file and a column"
    filters, column = parts[1:-1], parts[-1]
    if frame is None:
        full = os.path.join(REPO, path)
        if not os.path.exists(full):
            return None, f"marker names {path}, which does not exist"
        frame = pd.read_csv(full)
    if column not in frame:
        return None, f"{path} has no column '{column}'"
    for f in filters:
        if "=" not in f:
            return None, f"marker filter '{f}' is not key=value"
        key, value = f.split("=", 1)
        if key not in frame:
            return None, f"{path} has no column '{key}'"
        try:
            frame = frame[frame[key].astype(float) == float(value)]
        except ValueError:
            frame = frame[frame[key].astype(str) == value]
    if len(frame) != 1:
        return None, f"marker '{spec}' selects {len(frame)} rows of {path}, not 1"
    return frame[column].iloc[0], None


def decimals(shown):
    return len(shown.split(".")[1]) if "." in shown else 0


def check_numbers(path, text, problems, poslab=None):
    for m in MARKED.finditer(text):
        shown, spec = m.group(1), " ".join(m.group(2).split())
        value, error = lookup(spec, poslab)
        where = f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}"
        if error:
            problems.append(f"{where}: {error}")
            continue
        number = float(shown.replace(",", ""))
        expected = round(float(value), decimals(shown))
        if abs(number - expected) > 1e-9 * max(1.0, abs(expected)):
            problems.append(f"{where}: the text says {shown}, {spec} is {float(value):.6g} "
                            f"(rounded: {expected:.{decimals(shown)}f})")
    claims_spans = [(m.start(), m.end()) for m in CLAIMS.finditer(text)]
    for block in RESULTS.finditer(text):
        body_start = block.start(1)
        body = block.group(1)
        marked = {body_start + m.start(1) for m in MARKED.finditer(body)}
        # The markers' own text (factor=1.5 ...) is not prose: blank it, keeping offsets.
        body = re.sub(r"<!--.*?-->", lambda c: " " * len(c.group(0)), body, flags=re.S)
        for d in DECIMAL.finditer(body):
            at = body_start + d.start()
            if at in marked or any(a <= at < b for a, b in claims_spans):
                continue
            problems.append(f"{os.path.relpath(path, REPO)}:{line_of(text, at)}: the number "
                            f"{d.group(0)} in a results block has no <!--= source --> marker")


def check_claims(path, text, problems):
    for m in CLAIMS.finditer(text):
        study = m.group(1)
        where = f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}"
        done = subprocess.run([PYTHON, os.path.join(REPO, "notebooks", "claims.py"),
                               os.path.join(REPO, study)], capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"{where}: claims.py {study} failed: {done.stderr.strip()[-300:]}")
            continue
        if done.stdout.strip() != m.group(2).strip():
            written = m.group(2).strip().splitlines()
            printed = done.stdout.strip().splitlines()
            first = next((i for i, (a, b) in enumerate(zip(written, printed)) if a != b),
                         min(len(written), len(printed)))
            problems.append(f"{where}: the claims table of {study} is not what claims.py prints "
                            f"(first difference at block line {first + 1}:\n"
                            f"    written: {written[first] if first < len(written) else '(end)'}\n"
                            f"    printed: {printed[first] if first < len(printed) else '(end)'})")


def check_paper_metrics(problems, written_override=None):
    """Every results/*/paper_metrics.csv equals what claims.py --metrics prints now.
    written_override: {study: text} to check instead of the committed files (the self-test)."""
    results = os.path.join(REPO, "results")
    for study in sorted(os.listdir(results)):
        path = os.path.join(results, study, "paper_metrics.csv")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            written = f.read()
        if written_override is not None:
            written = written_override.get(study, written)
        done = subprocess.run([PYTHON, os.path.join(REPO, "notebooks", "claims.py"), "--metrics",
                               os.path.join(results, study)], capture_output=True, text=True)
        where = os.path.relpath(path, REPO)
        if done.returncode != 0:
            problems.append(f"{where}: claims.py --metrics failed: {done.stderr.strip()[-300:]}")
        elif done.stdout != written:
            problems.append(f"{where}: is not what `notebooks/claims.py --metrics "
                            f"results/{study}` prints (regenerate it with that command)")


def help_text(poslab, command, cache={}):
    if command not in cache:
        args = [poslab] + ([command] if command else []) + ["--help"]
        done = subprocess.run(args, capture_output=True, text=True)
        cache[command] = done.stdout if done.returncode == 0 else None
    return cache[command]


def check_commands(path, text, poslab, problems):
    top = help_text(poslab, "")
    for m in COMMAND.finditer(text):
        command, rest = m.group(1), m.group(2)
        where = f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}"
        if top is None or not re.search(rf"^\s+{command}\b", top, re.M):
            problems.append(f"{where}: 'poslab {command}' is not a subcommand of poslab")
            continue
        sub = help_text(poslab, command) or ""
        rest = rest.split("#")[0]  # a shell comment may mention anything
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
            if option not in sub:
                problems.append(f"{where}: 'poslab {command}' has no option {option}")


def check_paths(path, text, problems):
    here = os.path.dirname(path)
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        if not os.path.exists(os.path.normpath(os.path.join(here, target))):
            problems.append(f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}: the link "
                            f"{target} points to nothing")
    for m in CODE_PATH.finditer(text):
        target = m.group(1).rstrip(".,:;")
        if text.startswith(NEW_FILE, m.end()):
            continue  # a file the reader is asked to write
        if "NAME" in target or "STUDY" in target or "..." in target or "<" in target:
            continue  # a pattern, not a path
        if not os.path.exists(os.path.join(REPO, target)):
            # runs/ and configs/ are written by a study and not committed
            if "/runs/" in target or "/configs/" in target or target.endswith("/runs"):
                continue
            problems.append(f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}: the path "
                            f"{target} does not exist")


def check_excerpts(path, text, problems):
    for m in EXCERPT.finditer(text):
        where = f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}"
        sources = m.group(1).split()
        lines = set()
        for source in sources:
            full = os.path.join(REPO, source)
            if not os.path.exists(full):
                problems.append(f"{where}: the excerpt quotes {source}, which does not exist")
                continue
            with open(full, encoding="utf-8") as f:
                lines.update(line.strip() for line in f)
        for number, line in enumerate(m.group(3).splitlines(), start=1):
            if m.group(2) == "diff" and line[:1] in "+ -":
                line = line[1:]
            line = line.strip()
            if not line or "..." in line or line in lines:
                continue
            problems.append(f"{where}: line {number} of the excerpt is not in "
                            f"{' or '.join(sources)}: {line}")


def check_outputs(path, text, poslab, problems):
    import shlex
    for m in OUTPUT.finditer(text):
        where = f"{os.path.relpath(path, REPO)}:{line_of(text, m.start())}"
        done = subprocess.run([poslab] + shlex.split(m.group(1)), capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"{where}: 'poslab {m.group(1)}' failed: {done.stderr.strip()}")
            continue
        quoted, printed = m.group(3).splitlines(), done.stdout.splitlines()
        for number, (a, b) in enumerate(zip(quoted, printed), start=1):
            if a != b:
                problems.append(f"{where}: line {number} of the quoted output differs from what "
                                f"'poslab {m.group(1)}' prints: {a!r} vs {b!r}")
                break
        else:
            if len(quoted) != len(printed):
                problems.append(f"{where}: the quoted output has {len(quoted)} lines, "
                                f"'poslab {m.group(1)}' prints {len(printed)}")


def check_registry(readme, text, poslab, problems):
    done = subprocess.run([poslab, "encodings"], capture_output=True, text=True)
    for name in ENCODING_LINE.findall(done.stdout):
        if f"| `{name}` |" not in text:
            problems.append(f"{os.path.relpath(readme, REPO)}: the encoding {name} (poslab "
                            f"encodings) has no row in the table of encodings")


HELP_EXAMPLE = re.compile(r"^\s*poslab ([a-z][a-z-]*)\b([^\n]*)", re.M)


def check_help_examples(helps, problems):
    """helps: {"": top-level --help, "train": train --help, ...}."""
    for shown_in, text in helps.items():
        for m in HELP_EXAMPLE.finditer(text or ""):
            command, rest = m.group(1), m.group(2).split("#")[0]
            where = f"poslab {shown_in + ' ' if shown_in else ''}--help"
            if command not in helps:
                problems.append(f"{where}: the example 'poslab {command}' names no subcommand")
                continue
            # The options the command defines: its --help's option lines, not its examples.
            defined = set(re.findall(r"^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)", helps[command] or "",
                                     re.M))
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                if option not in defined:
                    problems.append(f"{where}: the example 'poslab {command} ...' uses {option}, "
                                    f"which 'poslab {command}' does not have")


def all_help_texts(poslab):
    top = help_text(poslab, "") or ""
    helps = {"": top}
    for command in re.findall(r"^  ([a-z]+)\s{2,}", top.split("Subcommands:")[-1], re.M):
        helps[command] = help_text(poslab, command)
    return helps


UP_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w.\-/]*)")
CAPS_NOTE = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_]+\.md)\b")
SCRATCH_ROOTS = ("/", "/tmp/", "/var/tmp/", "/dev/shm/")
SKIP_SUFFIXES = (".png", ".svg", ".gz", ".jpg", ".jpeg", ".pdf", ".ico", ".woff", ".woff2")


def repository_files():
    """The files the repository holds: git ls-files, or (no git) every file outside .git and
    build folders."""
    done = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True)
    if done.returncode == 0 and done.stdout:
        return [name for name in done.stdout.decode().split("\0") if name]
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
        found += [os.path.relpath(os.path.join(root, f), REPO) for f in files]
    return found


def check_stands_alone(problems, texts=None, names=None, outside_root=None):
    """Check 9: (relative path, text) of every text file; names: the basenames the repository
    holds (for the rule on notes named in capitals); outside_root: the folder the checkout sits
    in (default: the real one; the self-test gives one, as CI's checkout sits in /tmp)."""
    if texts is None:
        files = repository_files()
        names = {os.path.basename(f) for f in files}
        texts = []
        for rel in files:
            path = os.path.join(REPO, rel)
            if rel.endswith(SKIP_SUFFIXES) or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    texts.append((rel, f.read()))
            except UnicodeDecodeError:
                continue  # not text
    outside_root = outside_root or os.path.dirname(REPO) + os.sep
    for rel, text in texts:
        here = os.path.dirname(os.path.join(REPO, rel))
        for m in UP_PATH.finditer(text):
            target = m.group(1).rstrip(".,:;)")
            resolved = os.path.normpath(os.path.join(here, target))
            inside = resolved.startswith(REPO + os.sep)
            made = resolved.startswith(os.path.join(REPO, "build") + os.sep)
            if not inside or not (made or os.path.exists(resolved)):
                problems.append(f"{rel}:{line_of(text, m.start())}: {target} points outside the "
                                f"repository" + ("" if not inside else " (to nothing in it)"))
        # A checkout inside a scratch folder (CI clones into /tmp) would make every scratch path
        # of a command (`--out /tmp/qc`) a "path into the parent": that rule is for checkouts
        # beside other folders (a workspace), not for /tmp.
        parent_paths = [] if outside_root in SCRATCH_ROOTS else \
            re.finditer(re.escape(outside_root) + r"[\w.\-/]*", text)
        for m in parent_paths:
            if m.group(0).startswith(REPO + os.sep) or m.group(0) == REPO:
                continue
            problems.append(f"{rel}:{line_of(text, m.start())}: {m.group(0)} is a path outside "
                            f"the repository")
        for m in CAPS_NOTE.finditer(text):
            if m.group(1) not in names:
                problems.append(f"{rel}:{line_of(text, m.start())}: {m.group(1)} is not a file "
                                f"of the repository (cite docs/conventions.md, the paper or its "
                                f"code instead)")


def check(poslab, paths=None):
    problems = []
    for path in paths or documents():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        check_claims(path, text, problems)
        check_numbers(path, text, problems, poslab)
        check_commands(path, text, poslab, problems)
        check_paths(path, text, problems)
        check_excerpts(path, text, problems)
        check_outputs(path, text, poslab, problems)
        if paths is None and os.path.basename(path) == "README.md" and \
                os.path.dirname(path) == REPO:
            check_registry(path, text, poslab, problems)
    if paths is None:
        check_help_examples(all_help_texts(poslab), problems)
        check_paper_metrics(problems)
        check_stands_alone(problems)
    return problems


def self_test(poslab):
    """Plants one mistake of each kind in a scratch document and requires the check to see it."""
    import tempfile
    summary = "results/lm_extrapolation/summary_ci.csv"
    spec = f"{summary} variant=python encoding.type=alibi kind=length factor=16 loss_mean"
    value, error = lookup(spec)
    assert error is None, error
    right = f"{value:.3f}"
    wrong = f"{value + 0.01:.3f}"
    cases = {
        "right number": (f"ALiBi reaches {right}<!--= {spec} --> at 16x.\n", 0),
        "wrong number": (f"ALiBi reaches {wrong}<!--= {spec} --> at 16x.\n", 1),
        "unmarked number in results": (f"<!-- results -->\nALiBi reaches {right}.\n"
                                       f"<!-- /results -->\n", 1),
        "unknown subcommand": ("```bash\nbuild/poslab trian --config x.toml\n```\n", 1),
        "unknown option": ("```bash\nbuild/poslab run experiments/quickstart.toml --jbos 2\n```\n", 1),
        "dead link": ("See [the chapter](no-such-chapter.md).\n", 1),
        "missing path": ("Run `experiments/no_such_study.toml`.\n", 1),
        "edited claims table": ("<!-- claims: results/lm_extrapolation -->\n| made up |\n"
                                "<!-- /claims -->\n", 1),
        "true excerpt": ("<!-- excerpt: src/nn/linear.hpp -->\n```cpp\n"
                         "template <class T>\n  ...\n  if (b == nullptr) return;\n```\n", 0),
        "drifted excerpt": ("<!-- excerpt: src/nn/linear.hpp -->\n```diff\n"
                            "+  if (b != nullptr) return;\n```\n", 1),
    }
    describe = "encodings --describe rope --set model.d_model=8 --set model.n_heads=2"
    printed = subprocess.run([poslab] + describe.split(), capture_output=True, text=True).stdout
    cases["true output"] = (f"<!-- output: build/poslab {describe} -->\n```text\n{printed}```\n", 0)
    cases["drifted output"] = (f"<!-- output: build/poslab {describe} -->\n```text\n"
                               f"{printed.replace('0.01', '0.02')}```\n", 1)
    # A number quoted from a command's CSV (the describe table of chapter 11): yarn's pair 1.
    table = ("build/poslab encodings --describe rope --csv --set model.d_model=64 "
             "--set model.n_heads=4 --set encoding.scaling=yarn --set encoding.factor=4 "
             "--set encoding.original_len=64")
    cell = f"{table} | pair=1 interpolation"
    value, error = lookup(cell, poslab)
    assert error is None, error
    cases["right number from a command"] = (f"Pair 1 is {value:.3f}<!--= {cell} --> "
                                            f"interpolated.\n", 0)
    cases["wrong number from a command"] = (f"Pair 1 is {value + 0.01:.3f}<!--= {cell} --> "
                                            f"interpolated.\n", 1)
    cases["command marker without a column"] = (f"Pair 1 is 0.333<!--= {table} --> "
                                                f"interpolated.\n", 1)
    failures = []
    with tempfile.TemporaryDirectory(dir=os.path.join(REPO, "docs")) as scratch:
        for name, (text, expected) in cases.items():
            path = os.path.join(scratch, "case.md")
            with open(path, "w") as f:
                f.write(text)
            found = check(poslab, [path])
            if len(found) != expected:
                failures.append(f"{name}: expected {expected} problem(s), found {found}")
    # The registry check: a README without one encoding's row.
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    found = []
    check_registry(os.path.join(REPO, "README.md"), readme.replace("| `alibi` |", "| alibi |"),
                   poslab, found)
    cases["encoding without a README row"] = None
    # The help check: a planted example with an option its command lacks.
    helps = all_help_texts(poslab)
    planted = dict(helps)
    planted["bench"] = (helps["bench"] or "") + "\n  poslab bench --no-such-option 3\n"
    clean, dirty = [], []
    check_help_examples(helps, clean)
    check_help_examples(planted, dirty)
    cases["help example with a missing option"] = None
    if clean or len(dirty) != 1:
        failures.append(f"help examples: expected 0 problems in the real help and 1 with the "
                        f"planted example, found {clean} and {dirty}")
    if len(found) != 1:
        failures.append(f"encoding without a README row: expected 1 problem, found {found}")
    # The paper-metrics check: a committed file with one value changed.
    metrics_path = os.path.join(REPO, "results", "length_generalization", "paper_metrics.csv")
    if os.path.exists(metrics_path):
        with open(metrics_path, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
        edited = lines[:1] + [lines[1].replace(",1,", ",0.9,", 1) if ",1," in lines[1]
                              else lines[1].replace(",", ",9", 1)] + lines[2:]
        clean, dirty = [], []
        check_paper_metrics(clean)
        check_paper_metrics(dirty, {"length_generalization": "".join(edited)})
        cases["edited paper_metrics.csv"] = None
        if clean or len(dirty) != 1:
            failures.append(f"paper metrics: expected 0 problems as committed and 1 with an "
                            f"edited value, found {clean} and {dirty}")
    # The stands-alone check: planted files, each pointing outside once, and a clean one.
    # (written in pieces, so that this file itself holds no path that points outside)
    up = ".." + "/"
    workspace = os.sep + "srv" + os.sep + "workspace" + os.sep  # a checkout beside other folders
    outside = workspace + "shared" + os.sep + "notes.md"
    planted = {
        "src/x.hpp": (f"// the formulas of {up}shared/notes.txt, section 2\n", 1),
        "tests/x.cpp": ("// checked against " + "REFERENC" + "E.md, \"LongRoPE\"\n", 1),
        "experiments/x.toml": (f"# see {outside}\n", 1),
        "docs/x.md": (f"[the code]({up}src/nn/linear.hpp), `{up}build/poslab`, README.md\n", 0),
    }
    # In a checkout that sits in /tmp (as CI's does), a command's scratch path is no problem.
    found = []
    check_stands_alone(found, [("docs/y.md", "`poslab run s.toml --out /tmp/qc`\n")], set(), "/tmp/")
    cases["stands alone: a scratch path when the checkout is in /tmp"] = None
    if found:
        failures.append(f"stands alone, a scratch path in a /tmp checkout: expected 0, found {found}")
    names = {os.path.basename(f) for f in repository_files()}
    for rel, (text, expected) in planted.items():
        found = []
        check_stands_alone(found, [(rel, text)], names, workspace)
        cases[f"stands alone: {rel}"] = None
        if len(found) != expected:
            failures.append(f"stands alone, {rel}: expected {expected} problem(s), found {found}")
    for f in failures:
        print("self-test:", f)
    print(f"self-test: {len(cases) - len(failures)} of {len(cases)} planted cases behave")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return self_test(os.path.abspath(argv[2]))
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    problems = check(os.path.abspath(argv[1]))
    for p in problems:
        print(p)
    print(f"check_docs: {len(problems)} problem(s) in README.md, docs/ and (check 9) every file of the repository")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
