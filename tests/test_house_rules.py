"""House rules (docs: CONTRIBUTING.md): no import cycles inside hf_jepa, no module past 600 lines outside modeling/.

The import graph is read with `ast`, so nothing is imported; imports inside functions count (a cycle that only
works because one side imports lazily is still a tangle). A module depends on the modules it names: `from a.b import
c` depends on `a.b.c` when that is a module, else on `a.b`. The implicit import of a module's parent packages is not
an edge: `pkg/__init__` importing its own `pkg.sub` is no cycle by itself. As in the house-rules hook, a cycle made of
package `__init__`s only is not reported.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hf_jepa"
MAX_LINES = 600


def _modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (`pkg/__init__.py` is `pkg`)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module that `name` (a module or a name inside one) lives in; None outside the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in the file)."""
    modules = _modules(package)
    graph = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        current_package = module if is_package else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {_resolve(alias.name, modules) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = current_package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    # `from a.b import c`: the submodule a.b.c if there is one, else a name defined in a.b.
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in modules else _resolve(base, modules))
        # The parents of a module are imported before it, whatever it says: an edge to one is no dependency.
        parents = {module.rsplit(".", depth)[0] for depth in range(1, module.count(".") + 1)}
        graph[module] = {t for t in targets if t and t != module and t not in parents}
    return graph


def find_cycles(graph: dict[str, set[str]], packages: set[str]) -> list[list[str]]:
    """One shortest cycle per strongly connected group of modules (Tarjan), skipping groups of packages only."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)

    cycles = []
    for group in groups:
        if len(group) < 2 or group <= packages:
            continue
        best = None
        for start in sorted(group - packages):
            path = _shortest_path_back(graph, group, start)
            if path and (best is None or len(path) < len(best)):
                best = path
        cycles.append(best)
    return sorted(cycles)


def _shortest_path_back(graph, group, start):
    """start -> ... -> start inside `group` (breadth first), or None."""
    previous, frontier = {start: None}, [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    path = [node]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return None


def test_find_cycles_on_a_small_graph():
    graph = {
        "p": {"p.a"},  # a package importing its own submodule: no cycle
        "p.a": {"p.b"},
        "p.b": {"p.c", "p.a"},  # p.a <-> p.b
        "p.c": {"p.d"},
        "p.d": {"p.e"},
        "p.e": {"p.c"},  # p.c -> p.d -> p.e -> p.c
        "q": {"r"},
        "r": {"q"},  # packages only: not reported
    }
    assert find_cycles(graph, packages={"p", "q", "r"}) == [["p.a", "p.b", "p.a"], ["p.c", "p.d", "p.e", "p.c"]]


def test_import_graph_resolution(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from .a import x\nfrom . import sub\n")
    (root / "a.py").write_text("import os\n\ndef f():\n    from .sub.b import y\n    from pkg import sub\n")
    (root / "sub" / "__init__.py").write_text("from .b import y\nfrom .. import a\n")
    (root / "sub" / "b.py").write_text("from ..a import x\nfrom . import c\nimport pkg.sub.c\n")
    (root / "sub" / "c.py").write_text("")
    assert import_graph(root) == {
        "pkg": {"pkg.a", "pkg.sub"},
        "pkg.a": {"pkg.sub.b", "pkg.sub"},
        "pkg.sub": {"pkg.sub.b", "pkg.a"},
        "pkg.sub.b": {"pkg.a", "pkg.sub.c"},
        "pkg.sub.c": set(),
    }
    # pkg.a -> pkg.sub -> pkg.a and pkg.a -> pkg.sub.b -> pkg.a.
    assert find_cycles(import_graph(root), packages={"pkg", "pkg.sub"}) == [["pkg.a", "pkg.sub", "pkg.a"]]


def test_no_import_cycles():
    graph = import_graph(PACKAGE)
    packages = {name for name, path in _modules(PACKAGE).items() if path.name == "__init__.py"}
    cycles = find_cycles(graph, packages)
    assert not cycles, "import cycles (imports inside functions count):\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_modules_outside_modeling_stay_small():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and "modeling" not in path.relative_to(PACKAGE).parts:
            too_long.append(f"{path.relative_to(PACKAGE.parent)}: {lines} lines")
    assert not too_long, f"modules past {MAX_LINES} lines (doing two jobs?):\n" + "\n".join(too_long)
