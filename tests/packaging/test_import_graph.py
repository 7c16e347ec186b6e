"""vflpriv's modules import each other without circles, counting imports inside functions too (a circle
hidden in a function-level import is still a circle: it just fails later, at first call)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"vflpriv": "vflpriv", "vflpriv.attacks": "attacks", "vflpriv.defenses": "defenses",
            "vflpriv.auditors": "auditors", "vflpriv.tradeoff": "tradeoff", "vflpriv.reports": "reports"}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """vflpriv modules ``path`` imports anywhere in its body (``from pkg import sub`` counts as ``pkg.sub``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if s in modules] or [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = 1, path.append(node)
        for nxt in sorted(graph[node] - {node}):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node], _ = 2, path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_circles_even_through_function_level_imports():
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_check_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _package(module: str) -> str:
    """The room of a module: ``vflpriv.X`` for everything under ``vflpriv.X``; ``vflpriv`` for the top files."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _declared() -> dict[str, set[str]]:
    """Each package's ``May import:`` line, from the first docstring of its ``__init__``."""
    declared = {}
    for name, path in _modules().items():
        if path.name != "__init__.py" or name.count(".") != 1:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        line = next((ln for ln in doc.splitlines() if ln.startswith("May import:")), None)
        assert line is not None, f"{name}'s docstring does not say what it may import (a 'May import:' line)"
        allowed = line.removeprefix("May import:").strip().rstrip(".")
        if allowed == "every other package of vflpriv":
            declared[name] = {"*"}
        elif allowed == "nothing of vflpriv":
            declared[name] = set()
        else:
            declared[name] = {f"vflpriv.{a.strip()}" for a in allowed.split(",")}
    return declared


def _against_the_order(graph: dict[str, set[str]], declared: dict[str, set[str]]) -> list[str]:
    """Imports from one package into another that the importer's ``May import:`` line does not name."""
    wrong = []
    for module, imported in graph.items():
        room = _package(module)
        allowed = declared.get(room)
        if allowed is None or "*" in allowed:
            continue  # vflpriv/__init__ (the public API) and __main__ sit on top
        wrong += [f"{module} -> {other}" for other in sorted(imported) if _package(other) not in {room, *allowed}]
    return wrong


def test_every_import_follows_the_declared_order_of_the_packages():
    """config -> store -> data -> models -> engine -> methods/attacks/defenses -> runner -> tradeoff -> reports ->
    workflows -> cli: each package imports only the packages its docstring names, and those lines form no circle."""
    declared = _declared()
    assert set(declared) >= {"vflpriv.common", "vflpriv.config", "vflpriv.store", "vflpriv.runner", "vflpriv.cli"}
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    assert not _against_the_order(graph, declared)
    order = {room: {a for a in allowed if a != "*"} for room, allowed in declared.items() if "*" not in allowed}
    assert _cycle({room: order[room] & set(order) for room in order}) is None


def test_the_order_check_finds_an_upward_import():
    declared = {"vflpriv.store": {"vflpriv.common"}, "vflpriv.common": set()}
    graph = {"vflpriv.store.cache": {"vflpriv.common.errors", "vflpriv.store.folders"},
             "vflpriv.common.errors": {"vflpriv.store.cache"}}
    assert _against_the_order(graph, declared) == ["vflpriv.common.errors -> vflpriv.store.cache"]


def test_the_top_of_vflpriv_holds_packages_by_stage_not_a_hall_of_modules():
    top = sorted(p.name for p in (ROOT / "vflpriv").iterdir() if p.name != "__pycache__")
    assert [p for p in top if p.endswith(".py")] == ["__init__.py", "__main__.py"]
    assert len(top) <= 12, top
