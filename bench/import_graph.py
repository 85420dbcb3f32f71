"""The shape of the toolkit's code: its import graph, and the modules a command really crosses.

    python3 bench/import_graph.py            # static graph only (needs nothing but Python)
    .venv/bin/python bench/import_graph.py --trace    # also follow `import` and `report` on the demo data

Why: a tree is pleasant to live in when a reader can follow one journey through it without
returning to files already read, and when no package reaches up into a package built on top of it.
Those properties rot quietly; this script puts numbers on them so a change can show before/after:

- **cycles**: strongly connected groups of modules that import each other (directly or through
  others), counting only imports made at module level; a function-level import is a deliberate
  late binding and is listed separately;
- **upward imports**: an import from a package into one that sits above it in ``LAYERS`` (lowest
  first), i.e. a floor reaching into the storey built on it;
- **crossed** (with ``--trace``): the toolkit modules whose functions run while importing the
  bundled samples and while building their report, how many module-to-module call edges that
  takes, how many module pairs call each other in both directions (a journey that goes back
  and forth between two files), and how many times the journey **returns** to a module already
  visited: the call edges, in the order first taken, that enter a module some earlier edge (or
  the journey's start) had entered already. A conveyor, each module handing its work to the
  next, has none; every module reached from a second place adds one (edges - modules + starts).

tests/test_import_graph.py runs the static part and holds the limits.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "toolkit"

# Lowest first: a package may import from any package before it in this list, never after it.
# Modules directly under toolkit/ are their own "package" named by the module.
LAYERS = (
    "__init__", "_paths", "_process", "resources", "_endings", "inputs", "schema", "store", "view_copies", "queries", "filters", "enginestate",
    "importers", "ingest", "hints", "engines", "terminal", "charts", "whatif", "report", "compare", "history", "collect",
    "replay", "sql_prompt", "docs", "demo", "cli", "__main__",
)


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The known module an imported name refers to: the name itself, or its longest known prefix
    (``from toolkit.inputs.sources import Source`` → ``toolkit.inputs.sources``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(known: dict[str, Path]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, function-level imports): module → the toolkit modules it imports."""
    top: dict[str, set[str]] = defaultdict(set)
    late: dict[str, set[str]] = defaultdict(set)
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node, in_function in _import_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                base = _absolute(mod, node, is_pkg)
                # ``from toolkit import queries`` imports the module toolkit.queries, not toolkit
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            targets = {t for t in (_resolve(n, known) for n in names) if t and t != mod}
            (late if in_function else top)[mod] |= targets
    return top, late


def _import_nodes(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it runs later than the module's own import: inside a
    function, or under ``if TYPE_CHECKING`` (never at run time)."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, in_function = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, in_function
            else:
                inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) or (
                    isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
                todo.append((child, inner))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def package_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module's package sits above the importer's."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for mod, targets in graph.items():
        for t in targets:
            a, b = package_of(mod), package_of(t)
            if a != b and rank.get(b, -1) > rank.get(a, -1):
                bad.append((mod, t))
    return sorted(bad)


def static_summary() -> dict:
    known = modules()
    top, late = imports(known)
    unranked = sorted({package_of(m) for m in known} - set(LAYERS))
    return {
        "modules": len(known),
        "cycles": cycles(top),
        "cycles_any": cycles({m: top.get(m, set()) | late.get(m, set()) for m in known}),
        "upward": [f"{a} -> {b}" for a, b in upward(top)],
        "upward_late": [f"{a} -> {b}" for a, b in upward(late)],
        "unranked_packages": unranked,
    }


def trace_summary() -> dict:
    """Run the demo data's import and report under a profiler: which toolkit modules run."""
    import tempfile

    sys.path.insert(0, str(ROOT))
    from toolkit.demo import SAMPLES
    from toolkit.ingest import import_traces
    try:
        from toolkit.inputs.sources import is_data_file
    except ImportError:  # a tree from before toolkit/inputs/ existed, measured for a before/after
        from toolkit.ingest.sources import is_data_file
    from toolkit.report.build import build_report

    files = sorted(str(f) for f in SAMPLES.rglob("*") if is_data_file(f) and not f.name.startswith("golden_"))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        out["import"] = _crossing(lambda: import_traces(files, ds))
        out["report"] = _crossing(lambda: build_report(ds, filters={"service": "chat-assistant"}))
    return out


def _crossing(run) -> dict:
    edges: dict[tuple[str, str], None] = {}  # in the order first taken
    seen: set[str] = set()
    returns: list[str] = []

    def prof(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith(PACKAGE):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller.startswith(PACKAGE) and caller != callee and (caller, callee) not in edges:
            edges[(caller, callee)] = None
            if callee in seen:
                returns.append(f"{caller} -> {callee}")
        seen.add(callee)

    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    both = {tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges}
    return {
        "modules": len(seen),
        "packages": len({package_of(m) for m in seen}),
        "call_edges": len(edges),
        "back_and_forth": sorted(f"{a} <-> {b}" for a, b in both),
        "returns": returns,
        "returns_within": {pkg: sum(r.split(" -> ")[1].startswith(f"{PACKAGE}.{pkg}") for r in returns)
                           for pkg in ("ingest", "inputs")},
    }


def _print(summary: dict, lines: Iterable[str] = ()) -> None:
    print(f"modules: {summary['modules']}")
    print(f"import cycles (module level): {len(summary['cycles'])}")
    for c in summary["cycles"]:
        print("  " + " -> ".join(m.removeprefix('toolkit.') for m in c))
    print(f"import cycles (counting imports inside functions and for type checking): {len(summary['cycles_any'])}")
    for c in summary["cycles_any"]:
        print("  " + " -> ".join(m.removeprefix('toolkit.') for m in c))
    print(f"upward imports (module level): {len(summary['upward'])}")
    for u in summary["upward"]:
        print("  " + u)
    print(f"upward imports (inside functions): {len(summary['upward_late'])}")
    for name, t in summary.get("trace", {}).items():
        print(f"`{name}` crosses {t['modules']} modules in {t['packages']} packages, "
              f"{t['call_edges']} module-to-module call edges, {len(t['back_and_forth'])} pairs calling both ways, "
              f"{len(t['returns'])} returns to a module already visited ("
              + ", ".join(f"{n} into {pkg}/" for pkg, n in t["returns_within"].items()) + ")")
        for p in t["back_and_forth"]:
            print("  " + p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", action="store_true", help="also run import and report on the demo data")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    summary = static_summary()
    if args.trace:
        summary["trace"] = trace_summary()
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
