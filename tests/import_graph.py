"""The project's imports read with ``ast``: every module of a set of folders, every import
statement of a module (function-level ones too) and every dynamic import, and the graph of
which module imports which (for the architecture tests)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"__pycache__", ".venv"}

DYNAMIC = "<computed>"  # a dynamic import whose module name is not a literal
IMPORTERS = {"import_module", "__import__"}


def modules(packages: Iterable[str], root: Path = ROOT) -> list[tuple[str, Path]]:
    """(dotted name, path) of every module under the folders ``packages`` of ``root``."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if SKIP & set(path.relative_to(root).parts):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((".".join(parts), path))
    return out


def _relative(base: list[str], name: str) -> str:
    """``name`` (``.x``, ``..x``) relative to the package ``base``."""
    level = len(name) - len(name.lstrip("."))
    anchor = base[: len(base) - level + 1]
    rest = name[level:]
    return ".".join([*anchor, rest] if rest else anchor)


def _dynamic(node: ast.Call, base: list[str]) -> str | None:
    """The module a dynamic import call names, :data:`DYNAMIC` when computed, None when the
    call is not an import."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in IMPORTERS:
        return None
    arg = node.args[0] if node.args else next((k.value for k in node.keywords), None)
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return DYNAMIC
    return _relative(base, arg.value) if arg.value.startswith(".") else arg.value


def imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import statement and every dynamic import
    in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                target = node.module or ""
            out.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Call) and (target := _dynamic(node, base)) is not None:
            out.append((target, []))
    return out


def import_graph(mods: list[tuple[str, Path]]) -> dict[str, set[str]]:
    """Which module of ``mods`` imports which: ``from a import b`` reaches the module ``a.b``
    when there is one, else ``a``; ``import a.b.c`` reaches the longest module of its name."""
    known = {m for m, _ in mods}

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in mods:
        reached = set()
        for target, names in imports(module, path):
            found = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
            if len(found) < len(names) or not names:
                found.append(owner(target))
            reached.update(m for m in found if m and m != module)
        graph[module] = reached
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: every strongly connected component of more than one module
    (Tarjan's algorithm, R. Tarjan, "Depth-first search and linear graph algorithms", SIAM J.
    Comput. 1(2), 1972), iterative so that no recursion limit applies."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w in graph), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found
