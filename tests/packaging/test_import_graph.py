"""vflpriv's modules import each other without circles, counting imports inside functions too (a circle
hidden in a function-level import is still a circle: it just fails later, at first call)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"vflpriv": "vflpriv", "vflpriv.attacks": "attacks", "vflpriv.defenses": "defenses",
            "vflpriv.tradeoff": "tradeoff", "vflpriv.reports": "reports"}


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
