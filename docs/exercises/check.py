"""Checks your answer to one exercise of docs/exercises/.

    /usr/bin/python3 docs/exercises/check.py 2                  # reads docs/exercises/answers/02.toml
    /usr/bin/python3 docs/exercises/check.py 2 --answers DIR    # reads DIR/02.toml
    /usr/bin/python3 docs/exercises/check.py --self-test        # the checkers can fail and pass

Prints one line per part (ok / wrong, and why) and exits 0 only if every part is right.
The answer files are TOML; docs/exercises/answers/ holds them with the values left blank.
Where poslab can compute the answer (exercises 4 to 6), the checker runs poslab or reads what
poslab wrote; elsewhere it applies the formula of the chapter the exercise belongs to.
--self-test also runs exercise 9's formula against a brute force and, if $POSLAB (default
build/poslab) exists, against what `poslab encodings --describe rope` prints for Self-Extend.
"""
import json
import math
import os
import re
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
POSLAB = os.environ.get("POSLAB", os.path.join(REPO, "build", "poslab"))


class Parts:
    """Collects the verdict of each part of an exercise."""

    def __init__(self):
        self.lines, self.wrong = [], 0

    def check(self, name, ok, why=""):
        self.lines.append(f"  {'ok   ' if ok else 'WRONG'} {name}{'' if ok else ': ' + why}")
        self.wrong += not ok

    def close(self, a, b, tol):
        try:
            return len(a) == len(b) and all(abs(float(x) - y) <= tol for x, y in zip(a, b))
        except (TypeError, ValueError):
            return False


def blank(value):
    return value in ("", None, []) or value == [""]


# --- 1. The sinusoid by hand (chapter 2) --------------------------------------------------------
def sinusoid(p, d):
    """PE[p, 2k] = sin(p / 10000^(2k/d)), PE[p, 2k+1] = cos(same): poslab's interleaved order."""
    row = []
    for k in range(d // 2):
        angle = p / 10000 ** (2 * k / d)
        row += [math.sin(angle), math.cos(angle)]
    return row


def exercise_1(a, parts):
    for p in (1, 2):
        key = f"pe_{p}"
        parts.check(f"{key} (PE({p}) with d = 4, 3 decimals)",
                    parts.close(a.get(key, []), sinusoid(p, 4), 6e-4),
                    "PE[p, 2k] = sin(p / 10000^(2k/d)), PE[p, 2k+1] = cos(...), interleaved")
    c, s = math.cos(1), math.sin(1)
    parts.check("rotation (the 2x2 matrix taking pair 0 of PE(p) to pair 0 of PE(p + 1))",
                parts.close(sum(a.get("rotation", []), []) if a.get("rotation") else [],
                            [c, s, -s, c], 6e-4),
                "chapter 2: [sin w(p+D), cos w(p+D)] = [[cos wD, sin wD], [-sin wD, cos wD]] [sin wp, cos wp]")


# --- 2. The rel-shift by hand (chapter 4) -------------------------------------------------------
def rel_shift_labels(L, M):
    """Runs the four steps of the rel-shift on labels 'i:d' (query i, distance d)."""
    K = M + L
    x = [[f"{i}:{K - 1 - c}" for c in range(K)] for i in range(L)]  # column c = distance K-1-c
    padded = [["0"] + row for row in x]                               # step 1: [L, K+1]
    flat = [v for row in padded for v in row]                         # steps 2-3: drop L numbers
    rest = flat[L:]
    return [rest[i * K:(i + 1) * K] for i in range(L)]                # step 4: [L, K]


def exercise_2(a, parts):
    L, M = 3, 2
    out = rel_shift_labels(L, M)
    given = a.get("out", [])
    parts.check("out (every cell of the shifted [3, 5] matrix)",
                [[str(v) for v in row] for row in given] == out,
                "pad a zero column on the left, read as [K+1, L], drop the first row, read as [L, K]")
    masked = sorted([i, j] for i in range(L) for j in range(M + L) if j > i + M)
    parts.check("masked (the cells the causal mask hides)",
                sorted(list(map(int, c)) for c in a.get("masked", [])) == masked,
                "key j is visible to query i iff j <= i + M")
    garbage = sorted([i, j] for i, j in masked if out[i][j] != "0")
    parts.check("garbage (the masked cells holding another query's score)",
                sorted(list(map(int, c)) for c in a.get("garbage", [])) == garbage,
                "a masked cell holds 0 (the padding) or a score of query i + 1")


# --- 3. ALiBi's slopes (chapter 5) --------------------------------------------------------------
def alibi_slopes(H):
    """The paper's rule: the power-of-two set for H' <= H, then every other slope of 2H'."""
    p = 1
    while 2 * p <= H:
        p *= 2
    m = [2 ** (-8 * h / p) for h in range(1, p + 1)]
    twice = [2 ** (-8 * h / (2 * p)) for h in range(1, 2 * p + 1)]
    m += twice[0::2][:H - p]
    return m


def exercise_3(a, parts):
    for H in (4, 5, 10):
        key = f"slopes_{H}"
        parts.check(f"{key} (in head order, 4 decimals)",
                    parts.close(a.get(key, []), alibi_slopes(H), 1e-4),
                    "chapter 5: m_h = 2^(-8h/H) for a power of two; otherwise the table's rule")
    parts.check("penalty (head 0 of 4 heads, key 10 tokens back)",
                parts.close([a.get("penalty", "")], [alibi_slopes(4)[0] * 10], 5e-4),
                "the logit drops by m_h (i - j)")


# --- 4. Find a planted bug with the conformance kit (chapters 3, 7) -----------------------------
def exercise_4(a, parts):
    patch = os.path.join(HERE, "bugs", "04-planted.patch")
    applies = subprocess.run(["git", "-C", REPO, "apply", "--check", patch],
                             capture_output=True).returncode == 0
    parts.check("the tree is clean of the planted bug (git apply --check succeeds)", applies,
                "undo the patch when you are done: git apply -R docs/exercises/bugs/04-planted.patch")
    with open(os.path.join(HERE, "solutions", "04.toml"), "rb") as f:
        truth = tomllib.load(f)
    for key in ("encoding", "file", "failing_test", "parameter"):
        parts.check(key, str(a.get(key, "")).strip() == truth[key],
                    "run the kit with the patch applied and read its failure message")


# --- 5. Add an encoding (chapter 7) -------------------------------------------------------------
def exercise_5(a, parts):
    name = str(a.get("name", "")).strip()
    if not name:
        parts.check("name", False, "write the name of your encoding in the answer file")
        return
    listed = subprocess.run([POSLAB, "encodings"], capture_output=True, text=True)
    parts.check(f"'{name}' is listed by poslab encodings", name in listed.stdout.split(),
                f"register it (chapter 7, step 3) and rebuild; {POSLAB} encodings does not list it")
    # The kit runs over every registered encoding: listed above means tested here.
    tests = os.path.join(os.path.dirname(POSLAB), "poslab_tests")
    kit = subprocess.run([tests, "[conformance]"], capture_output=True, text=True)
    parts.check("the conformance kit passes with it", kit.returncode == 0,
                "build/poslab_tests \"[conformance]\" fails:\n" + kit.stdout[-800:])
    # The family poslab lists it under ("name  (family)  paper"): what the kit holds it to.
    family = str(a.get("family", "")).strip()
    listed_family = next((line.split()[1].strip("()") for line in listed.stdout.splitlines()
                          if line.split()[:1] == [name] and len(line.split()) > 1), "")
    parts.check("family", family != "" and family == listed_family,
                f"poslab encodings lists '{name}' as '{listed_family}': the family the kit "
                f"checks it against (none, absolute or relative)")


# --- 6. Predict, then measure (chapter 6) -------------------------------------------------------
def exercise_6(a, parts):
    run = os.path.join(REPO, str(a.get("run", "runs/ex06")))
    prediction = str(a.get("prediction", "")).strip()
    parts.check("prediction (better or worse, written before the run)",
                prediction in ("better", "worse"), "write better or worse")
    try:
        with open(os.path.join(run, "eval.json")) as f:
            at_0 = json.load(f)
        with open(os.path.join(run, "eval_L64_M64.json")) as f:
            at_64 = json.load(f)
    except OSError as e:
        parts.check("the run and its second evaluation exist", False,
                    f"{e.filename} is missing: run the two commands of the exercise")
        return
    main0, main64 = at_0["loss"], at_64["loss"]  # the main setting of each file
    parts.check("loss_memory_0 (from eval.json, 3 decimals)",
                parts.close([a.get("loss_memory_0", "")], [main0], 5e-4), f"eval.json says {main0:.3f}")
    parts.check("loss_memory_64 (from eval_L64_M64.json, 3 decimals)",
                parts.close([a.get("loss_memory_64", "")], [main64], 5e-4),
                f"eval_L64_M64.json says {main64:.3f}")
    measured = "better" if main64 < main0 else "worse"
    parts.check("explanation (one sentence: why)", len(str(a.get("why", "")).split()) >= 5,
                "say in a sentence why the loss moved as it did (chapter 2, 'Why they break')")
    parts.lines.append(f"  note  you predicted '{prediction}', the measurement says '{measured}'")


# --- 7. YaRN's ramp by hand (chapter 11) ---------------------------------------------------------
# The running example of chapter 11: a head of d = 16 rotated dimensions (d_model 64, 4 heads),
# trained at L = 64, extended s = 4 times, base 10000.
D, L, S, BASE = 16, 64, 4, 10000.0


def rope_theta(i, d=D, base=BASE):
    """theta_i = b^(-2i/d), pair i = 0 .. d/2 - 1."""
    return base ** (-2 * i / d)


def yarn_ramp(d=D, length=L, base=BASE, beta_fast=32.0, beta_slow=1.0):
    """The official YaRN code's bounds and ramp (docs/conventions.md, "RoPE scalings"), written
    here from the formulas, not from poslab: (low_exact, high_exact, low, high, g per pair)."""
    def dimension(rotations):  # the pair index at which a pair makes `rotations` turns over L
        return d * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low_exact, high_exact = dimension(beta_fast), dimension(beta_slow)
    low = max(math.floor(low_exact), 0)
    high = min(math.ceil(high_exact), d - 1)
    span = high - low if high != low else 0.001
    g = [min(max((i - low) / span, 0.0), 1.0) for i in range(d // 2)]
    return low_exact, high_exact, low, high, g


def pair_list(value):
    """A list of pair indices from the answer file, or None if it is not one."""
    if not isinstance(value, list):
        return None
    try:
        return sorted(int(v) for v in value)
    except (TypeError, ValueError):
        return None


def exercise_7(a, parts):
    low_exact, high_exact, low, high, g = yarn_ramp()
    parts.check("low_exact, high_exact (2 decimals)",
                parts.close([a.get("low_exact", ""), a.get("high_exact", "")],
                            [low_exact, high_exact], 6e-3),
                "d ln(L / (2 pi beta)) / (2 ln b) with beta = 32 and beta = 1: the (fractional) "
                "pair index at which a pair makes beta turns over L")
    parts.check("low, high (after floor / ceiling and clipping)",
                parts.close([a.get("low", ""), a.get("high", "")], [low, high], 0),
                "floor the low bound, ceil the high one, then clip both to [0, d - 1]")
    parts.check("g (the interpolation weight of pairs 0..7, 3 decimals)",
                parts.close(a.get("g", []), g, 6e-4), "g_i = clamp((i - low) / (high - low), 0, 1)")
    for key, want in (("extrapolated", [i for i, w in enumerate(g) if w == 0]),
                      ("interpolated", [i for i, w in enumerate(g) if w == 1]),
                      ("mixed", [i for i, w in enumerate(g) if 0 < w < 1])):
        parts.check(f"{key} (a list of pairs)", pair_list(a.get(key)) == want,
                    "g = 0: kept as trained (extrapolated); g = 1: divided by s (interpolated)")
    parts.check("attention_factor (4 decimals)",
                parts.close([a.get("attention_factor", "")], [0.1 * math.log(S) + 1], 6e-5),
                "a = 0.1 ln s + 1 (natural logarithm)")


# --- 8. Which pairs do PI and NTK change? (chapter 11) ------------------------------------------
def ntk_base(d=D, s=S, base=BASE):
    """NTK-aware: b -> b s^(d / (d - 2))."""
    return base * s ** (d / (d - 2))


def wavelength(theta):
    return 2 * math.pi / theta


def unseen_pairs(scaled_theta, d=D, length=L, s=S):
    """The pairs that did not complete a turn over L in training (lambda_i > L) and whose new
    wavelength is shorter than s lambda_i: at s L they reach angles training never showed."""
    return [i for i in range(d // 2)
            if wavelength(rope_theta(i)) > length
            and wavelength(scaled_theta(i)) < s * wavelength(rope_theta(i)) * (1 - 1e-9)]


def exercise_8(a, parts):
    linear = lambda i: rope_theta(i) / S                       # noqa: E731  PI
    ntk = lambda i: rope_theta(i, base=ntk_base())             # noqa: E731  NTK-aware
    none = rope_theta
    linear_ratio = [wavelength(linear(i)) / wavelength(none(i)) for i in range(D // 2)]
    ntk_ratio = [wavelength(ntk(i)) / wavelength(none(i)) for i in range(D // 2)]
    parts.check("linear_ratio", parts.close([a.get("linear_ratio", "")], [linear_ratio[0]], 5e-4),
                "theta / s: every wavelength 2 pi / theta grows by the same factor")
    most = [i for i, r in enumerate(linear_ratio) if r > max(linear_ratio) * (1 - 1e-9)]
    parts.check("linear_most (a list of pairs)", pair_list(a.get("linear_most")) == most,
                "PI changes every pair by the same factor: they all tie")
    parts.check("ntk_most", parts.close([a.get("ntk_most", "")],
                                        [max(range(D // 2), key=ntk_ratio.__getitem__)], 0),
                "theta'_i / theta_i = s^(-2i/(d-2)): which i moves it furthest from 1?")
    parts.check("ntk_least", parts.close([a.get("ntk_least", "")],
                                         [min(range(D // 2), key=ntk_ratio.__getitem__)], 0),
                "pair 0 has theta = b^0 = 1 whatever the base")
    parts.check("ntk_base (nearest integer)", parts.close([a.get("ntk_base", "")], [ntk_base()], 0.5),
                "b s^(d/(d-2)) = 10000 * 4^(16/14)")
    parts.check("ntk_ratio (pairs 0..7, 3 decimals)", parts.close(a.get("ntk_ratio", []), ntk_ratio, 6e-4),
                "divide the wavelength column of the ntk table by that of the plain table")
    for key, theta in (("unseen_none", none), ("unseen_linear", linear), ("unseen_ntk", ntk)):
        parts.check(f"{key} (a list of pairs, [] if none)",
                    pair_list(a.get(key)) == unseen_pairs(theta),
                    "lambda_i > L = 64 in training, and lambda'_i < s lambda_i")


# --- 9. Self-Extend's position map by hand (chapter 11) ------------------------------------------
# The exercise's setting: trained at L = 64, neighbour window W = 8, group size G = 4 (G | W).
SE_L, SE_W, SE_G = 64, 8, 4
SE_KEYS = {20: [19, 13, 12, 11, 0], 100: [95, 92, 91, 88, 60, 0]}


def self_extend_distance(i, j, W=SE_W, G=SE_G):
    """The distance a query at i sees to a key at j <= i, in poslab's convention
    (src/encodings/rope_position_maps.hpp; docs/conventions.md, "Self-Extend"):
      r = i - j < W   neighbour map, plain RoPE:  r
      r >= W          group map, query at i // G + W - W // G, key at j // G:
                      (i // G + W - W // G) - j // G
    Integer (floor) division throughout, as the `//` of LongLM's self_extend_forward. The
    official code adds the shift only once the largest query position reaches W; a pair on the
    group map has i >= r >= W, so for every such pair the shift is on (self_extend_row below
    builds it the official way, and the self-test compares the two)."""
    r = i - j
    if r < W:
        return r
    return (i // G + W - W // G) - j // G


def self_extend_row(i, N, W=SE_W, G=SE_G):
    """The distances query i sees to keys 0 .. i in one prefill over N tokens, written the way
    LongLM's self_extend_forward (self_extend_patch/Llama.py, q_len == kv_seq_len) builds them,
    not from the closed form above: the shift only once the largest query position N - 1
    reaches W (its `_re_group_size_2`), group positions by `//` (Llama_4_40.py's W // G), and the
    neighbour mask tril(ones) minus, from row W and column 0 on, a second tril: cell (i, j) is
    on the group map iff i >= W and j <= i - W."""
    shift = 0 if N - 1 < W else W - W // G  # W - W / G; G | W makes true and integer division agree
    group_query = i // G + shift
    return [group_query - j // G if (i >= W and j <= i - W) else i - j for j in range(i + 1)]


def self_extend_longest(L=SE_L, W=SE_W, G=SE_G):
    """Brute force over prefills of N = 1, 2, ... tokens: the largest N whose every (query, key)
    distance stays inside the trained 0 .. L - 1, and the largest distance of each N on the way
    ({N: max distance}, up to the first N beyond)."""
    row_max, largest, N = {}, {}, 1
    while True:
        for i in range(N):  # a row depends on N only through the shift: keep each row's maximum
            if (i, N - 1 < W) not in row_max:
                row_max[(i, N - 1 < W)] = max(self_extend_row(i, N, W, G))
        largest[N] = max(row_max[(i, N - 1 < W)] for i in range(N))
        if largest[N] > L - 1:
            return N - 1, largest
        N += 1


def expression_of_n(text, N):
    """Evaluates the answer's expression in N (L, W, G and floor, ceil also defined), or None."""
    names = {"N": N, "L": SE_L, "W": SE_W, "G": SE_G, "floor": math.floor, "ceil": math.ceil}
    try:
        return eval(compile(str(text), "max_distance", "eval"), {"__builtins__": {}}, names)
    except Exception:  # noqa: BLE001  a malformed answer is a wrong answer, said in the hint
        return None


def exercise_9(a, parts):
    for i, keys in SE_KEYS.items():
        want = [self_extend_distance(i, j) for j in keys]
        parts.check(f"distance_{i} (query {i}, keys {', '.join(map(str, keys))}: integers)",
                    parts.close(a.get(f"distance_{i}", []), want, 0),
                    "r < W: r itself; r >= W: (i // G + W - W // G) - j // G, integer division "
                    "of each position, with the shift W - W / G = 6 on the query")
        parts.check(f"neighbour_{i} (the keys read on the neighbour map)",
                    pair_list(a.get(f"neighbour_{i}")) == sorted(j for j in keys if i - j < SE_W),
                    "neighbour iff r = i - j < W = 8; the group map starts AT r = W")
    longest, largest = self_extend_longest()
    sample = range(SE_W + 1, longest + 2)  # every N > W up to the first N beyond the longest
    formula = a.get("max_distance", "")
    disagree = [N for N in sample if blank(formula) or expression_of_n(formula, N) != largest[N]]
    parts.check("max_distance (the largest distance in N tokens, an expression in N, N > W)",
                not disagree,
                "the farthest pair is the last query, N - 1, and the first key, 0; write a Python "
                "expression such as \"N - 1\" (plain RoPE's); it is not the brute force's at N = "
                + ", ".join(map(str, disagree[:4])) + (", ..." if len(disagree) > 4 else ""))
    parts.check("longest_n (the longest N inside the trained distances 0 .. L - 1)",
                parts.close([a.get("longest_n", "")], [longest], 0),
                "solve max_distance(N) <= L - 1 = 63 for N")
    rule = (SE_L - SE_W) * SE_G + SE_W
    verdict = {0: "exact", 1: "one too many", -1: "one too few"}.get(rule - longest, "off")
    parts.check("readme_rule (exact, one too many or one too few)",
                str(a.get("readme_rule", "")).strip() == verdict,
                "compare (L - W) G + W with your longest_n")
    parts.check("monotone (A, B, C or D)", str(a.get("monotone", "")).strip().upper() == "C",
                "where does key j = 12 land for query 20 without the shift, next to the "
                "neighbours at r = 2 .. 7? And is it one softmax or two?")


def self_extend_cross_checks():
    """The closed form against the prefill written like LongLM's code, the README's rule against
    the brute force over a grid of (L, W, G), and both against what poslab prints
    (`encodings --describe rope`, its last line). Returns (problems, what was compared)."""
    problems, grids = [], 0
    N = 140
    for i in range(N):
        row = self_extend_row(i, N)
        bad = [j for j in range(i + 1) if self_extend_distance(i, j) != row[j]]
        if bad:
            problems.append(f"self_extend_distance({i}, {bad[0]}) = "
                            f"{self_extend_distance(i, bad[0])}, the prefill says {row[bad[0]]}")
            break
    for L_, G_ in ((16, 1), (16, 2), (16, 4), (24, 2), (24, 4), (32, 4), (32, 8)):
        for W_ in range(G_, L_, G_):
            longest, _ = self_extend_longest(L_, W_, G_)
            grids += 1
            if longest != (L_ - W_) * G_ + W_:
                problems.append(f"L = {L_}, W = {W_}, G = {G_}: the brute force reaches "
                                f"{longest}, (L - W) G + W = {(L_ - W_) * G_ + W_}")
    done = f"exercise 9's map against a prefill built like LongLM's, {grids} (L, W, G) brute forces"
    if not os.path.exists(POSLAB):
        return problems, done + f", NOT poslab ({POSLAB} does not exist)"
    longest, largest = self_extend_longest()
    lengths = (3, SE_W, SE_W + 1, 21, 64, 101, longest, longest + 1, 256)
    for N in lengths:
        out = subprocess.run(
            [POSLAB, "encodings", "--describe", "rope", "--set", "model.d_model=64",
             "--set", "model.n_heads=4", "--set", "encoding.scaling=self_extend",
             "--set", f"encoding.original_len={SE_L}", "--set", f"encoding.neighbor_window={SE_W}",
             "--set", f"encoding.group_size={SE_G}", "--length", str(N)],
            capture_output=True, text=True).stdout
        # "largest position used at K = N: X (...); the map stays inside L up to K = ... = Y keys."
        used = re.search(r"largest position used at K = (\d+): (\d+).*= (\d+) keys", out)
        want = self_extend_distance(N - 1, 0) if N - 1 >= SE_W else N - 1
        agree = used and (int(used[2]), int(used[3])) == (want, longest)
        if not agree or want != largest.get(N, want):
            problems.append(f"poslab --describe rope, self_extend, --length {N}: "
                            f"{used[0] if used else 'no self_extend line'}; the checker: largest "
                            f"{want}, inside L up to {longest}")
    return problems, done + f" and {len(lengths)} poslab describes"


EXERCISES = {1: exercise_1, 2: exercise_2, 3: exercise_3, 4: exercise_4, 5: exercise_5,
             6: exercise_6, 7: exercise_7, 8: exercise_8, 9: exercise_9}


# Exercises whose solution file alone passes (5 needs your encoding built in, 6 your run).
SELF_CONTAINED = (1, 2, 3, 4, 7, 8, 9)

# Planted wrong answers: the solution with one classic mistake, which must fail on exactly the
# part named (a checker that passes anything near the answer is no checker).
PLANTED = {
    7: [({"low": -1}, "low, high"),                       # floored but not clipped at 0
        ({"high": 2}, "low, high"),                       # floored instead of ceiled
        ({"mixed": [1, 2, 3]}, "mixed"),                  # pair 3 has g = 1: interpolated
        ({"attention_factor": 1.0602}, "attention_factor")],  # 0.1 log10(4) + 1
    8: [({"ntk_most": 0}, "ntk_most"),                    # the fastest pair is the one kept
        ({"unseen_ntk": []}, "unseen_ntk"),               # NTK is not PI on the middle pairs
        ({"ntk_ratio": [1.000, 1.189, 1.414, 1.682, 2.000, 2.378, 2.828, 3.364]},
         "ntk_ratio")],                                   # s^(i/8): d/2 in place of d - 2
    9: [({"distance_20": [1, 7, 2, 3, 5]}, "distance_20"),            # no shift W - W / G
        ({"distance_100": [5, 8, 8.25, 9, 16, 31]}, "distance_100"),  # true division: i/G - j/G
        ({"distance_100": [8, 8, 9, 9, 16, 31]}, "distance_100"),     # group map inside the window
        ({"longest_n": 231}, "longest_n"),                    # N // G + 6 <= 63: N for N - 1
        ({"max_distance": "(N - 1) / 4 + 6"}, "max_distance")],  # true division again
}


def self_test():
    """Every checker fails on the blank answers, and passes on the solutions where those are
    complete: a checker that cannot fail, or cannot pass, is a broken exercise. Each planted
    wrong answer fails on exactly its part, and exercise 9's formula agrees with its brute force
    and with poslab (self_extend_cross_checks)."""
    failures = []
    for number, run in EXERCISES.items():
        for folder, should_pass in (("answers", False), ("solutions", True)):
            if should_pass and number not in SELF_CONTAINED:
                continue
            with open(os.path.join(HERE, folder, f"{number:02d}.toml"), "rb") as f:
                a = tomllib.load(f)
            parts = Parts()
            run(a, parts)
            if (parts.wrong == 0) != should_pass:
                failures.append(f"exercise {number}, {folder}: "
                                f"{'should pass' if should_pass else 'should fail'}:\n"
                                + "\n".join(parts.lines))
    planted = 0
    for number, mistakes in PLANTED.items():
        with open(os.path.join(HERE, "solutions", f"{number:02d}.toml"), "rb") as f:
            solution = tomllib.load(f)
        for change, part in mistakes:
            parts = Parts()
            EXERCISES[number]({**solution, **change}, parts)
            wrong = [line for line in parts.lines if line.lstrip().startswith("WRONG")]
            planted += 1
            if len(wrong) != 1 or not wrong[0].split(None, 1)[1].startswith(part):
                failures.append(f"exercise {number}, planted {change}: should fail on '{part}' "
                                f"only:\n" + "\n".join(parts.lines))
    problems, compared = self_extend_cross_checks()
    failures += [f"exercise 9, cross-check: {p}" for p in problems]
    for f in failures:
        print(f)
    print(f"self-test: {len(failures)} broken checker(s) of {len(EXERCISES)} "
          f"(blank answers, solutions and {planted} planted wrong answers; {compared})")
    return 1 if failures else 0


def main(argv):
    args = argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    if args[0] == "--self-test":
        return self_test()
    answers = os.path.join(HERE, "answers")
    if "--answers" in args:
        i = args.index("--answers")
        answers = args[i + 1]
        del args[i:i + 2]
    try:
        number = int(args[0])
        run = EXERCISES[number]
    except (ValueError, KeyError):
        print(f"check.py: error: no exercise '{args[0]}' (there are {sorted(EXERCISES)})",
              file=sys.stderr)
        return 2
    path = os.path.join(answers, f"{number:02d}.toml")
    try:
        with open(path, "rb") as f:
            a = tomllib.load(f)
    except OSError:
        print(f"check.py: error: cannot read {path}", file=sys.stderr)
        return 2
    except tomllib.TOMLDecodeError as e:
        print(f"check.py: error: {path}: {e}", file=sys.stderr)
        return 2
    parts = Parts()
    run(a, parts)
    print(f"exercise {number} ({path}):")
    print("\n".join(parts.lines))
    print("all parts right" if not parts.wrong else f"{parts.wrong} part(s) wrong")
    return 0 if not parts.wrong else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
