"""The analysis code's import graph has no upward import and no circle.

    /usr/bin/python3 tests/notebooks/check_imports.py        (CTest: analysis_imports, < 1 s)

Reads every .py file of notebooks/ (the package notebooks/poslab_analysis/ and the entry points
beside it) with `ast`, without importing anything, and collects every import of another module
of that code (at the top or inside a function). A module's floor is given by where it lives
(FLOORS; ORDER lists them from the lowest up); it may import modules of its own floor or below.
(claims/tables.py imports the registered papers by name, with importlib: those imports go down
a floor and are not read here.) Fails, naming the file,
its line and the import, on
  - an upward import: a module importing one on a higher floor;
  - a circle: modules that import each other, directly or through others (printed as the chain
    of imports that closes it).
"""
import ast
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = os.path.join(REPO, "notebooks")
PACKAGE = "poslab_analysis"

UNPLACED = "not on a floor (add it to FLOORS)"
# (path prefix inside notebooks/, floor name). The first prefix a file starts
# with gives its floor; a file matching none is an entry point (the top floor).
FLOORS = [
    ("poslab_analysis/__init__.py", "package"),
    ("poslab_analysis/reading/", "reading"),
    ("poslab_analysis/statistics/", "statistics"),
    ("poslab_analysis/claims/__init__.py", "claims: rules"),
    ("poslab_analysis/claims/rules.py", "claims: rules"),
    ("poslab_analysis/claims/studies/", "claims: studies"),
    ("poslab_analysis/claims/papers/", "claims: papers"),
    ("poslab_analysis/claims/", "claims: tables"),
    ("poslab_analysis/figures/__init__.py", "figures: style"),
    ("poslab_analysis/figures/style.py", "figures: style"),
    ("poslab_analysis/figures/figure_sets.py", "figures: which figures a study gets"),
    ("poslab_analysis/figures/plots_backend.py", "figures: backends"),
    ("poslab_analysis/figures/charts_backend.py", "figures: backends"),
    ("poslab_analysis/figures/plots", "figures: static"),
    ("poslab_analysis/figures/charts", "figures: interactive"),
    ("poslab_analysis/figures/", UNPLACED),
]
ENTRY = "entry points"
# The floors from the lowest up (FLOORS is in matching order: a longer prefix first).
ORDER = ["package", "reading", "statistics", "claims: rules", "claims: studies", "claims: papers",
         "claims: tables", "figures: style", "figures: which figures a study gets",
         "figures: static", "figures: interactive", "figures: backends", ENTRY]


def module_files():
    """{module name: path relative to notebooks/} of every .py file of the analysis code."""
    found = {}
    for root, dirs, files in os.walk(NOTEBOOKS):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(root, name), NOTEBOOKS)
            parts = rel[:-len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = rel
    return found


def floor_of(rel):
    for prefix, name in FLOORS:
        if rel.replace(os.sep, "/").startswith(prefix):
            return name
    return ENTRY


def imports_of(path, modules):
    """[(line, imported module)] of the analysis modules `path` imports. `from P import x`
    counts as importing P.x when P.x is a module, else P."""
    tree = ast.parse(open(path).read(), filename=path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    out.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                name = candidate if candidate in modules else node.module
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    out.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            out.append((node.lineno, "(relative import: write it absolute)"))
    return out


def graph():
    modules = module_files()
    edges = {}
    for module, rel in modules.items():
        edges[module] = [(line, target) for line, target in
                         imports_of(os.path.join(NOTEBOOKS, rel), modules) if target != module]
    return modules, edges


def upward_imports(modules, edges):
    problems = []
    for module, targets in edges.items():
        rel = modules[module]
        for line, target in targets:
            if target not in modules:
                problems.append(f"notebooks/{rel}:{line}: {target}")
                continue
            mine, theirs = floor_of(rel), floor_of(modules[target])
            if UNPLACED in (mine, theirs):
                problems.append(f"notebooks/{rel}:{line}: imports {target}: one of them is "
                                f"{UNPLACED}")
            elif ORDER.index(theirs) > ORDER.index(mine):
                problems.append(f"notebooks/{rel}:{line}: imports {target} (floor '{theirs}') "
                                f"from floor '{mine}': an upward import")
    return problems


def circles(modules, edges):
    """Every circle, as the chain of imports that closes it (Tarjan's strongly connected
    components; one chain per component)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for _, w in edges.get(v, []):
            if w not in modules:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    problems = []
    for component in components:
        # A chain through the component: follow imports inside it until one comes back.
        chain, seen, v = [], set(), component[0]
        while v not in seen:
            seen.add(v)
            line, w = next((line, w) for line, w in edges[v] if w in component)
            chain.append(f"notebooks/{modules[v]}:{line} imports {w}")
            v = w
        start = next(i for i, link in enumerate(chain)
                     if link.startswith(f"notebooks/{modules[v]}:"))
        problems.append("a circle: " + "; ".join(chain[start:]))
    return problems


def main():
    modules, edges = graph()
    problems = upward_imports(modules, edges) + circles(modules, edges)
    for problem in problems:
        print(problem)
    count = sum(len(t) for t in edges.values())
    print(f"check_imports: {len(modules)} modules, {count} imports between them, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
