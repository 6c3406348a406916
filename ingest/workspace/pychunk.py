"""Python chunking by top-level definitions, via ``ast``.

- the module header (docstring, imports, constants: everything before the first top-level
  ``def``/``class``) is its own unit, titled ``module``;
- each top-level function or class is a unit titled ``def name`` / ``class Name``, starting at
  its first decorator or at the comment lines directly above it;
- top-level statements between definitions (assignments, ``if __name__ == "__main__":``) are
  grouped into one unit per run;
- a class too large for one chunk is split into its header (class line, docstring, class
  attributes) and its methods (``Name.method``).

Returns ``None`` when the source does not parse (the caller then chunks it as plain code).
"""

from __future__ import annotations

import ast
import warnings

from ingest.workspace.units import MAX_CHARS, Unit

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _title(node: ast.AST, prefix: str = "") -> str:
    if isinstance(node, ast.ClassDef):
        return f"class {prefix}{node.name}"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return f"def {prefix}{node.name}"
    return ""


def _start(node: ast.stmt, lines: list[str], floor: int) -> int:
    """0-based first line of a statement: its decorators and the comments right above it."""
    start = node.lineno - 1
    for dec in getattr(node, "decorator_list", []) or []:
        start = min(start, dec.lineno - 1)
    while start - 1 >= floor and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return start


def _runs(body: list[ast.stmt], lines: list[str], floor: int, end: int, prefix: str) -> list[Unit]:
    """Statements -> units: one per definition, one per run of other statements."""
    marks: list[tuple[int, str, bool]] = []  # start, title, is_def
    for node in body:
        is_def = isinstance(node, _DEFS)
        start = max(floor, _start(node, lines, floor))
        if not is_def and marks and not marks[-1][2]:
            continue  # extends the previous run of plain statements
        marks.append((start, _title(node, prefix), is_def))
    units = []
    for i, (start, title, is_def) in enumerate(marks):
        stop = marks[i + 1][0] - 1 if i + 1 < len(marks) else end
        units.append(Unit(start, stop, title if is_def else ""))
    return units


def _size(lines: list[str], unit: Unit) -> int:
    return sum(len(lines[i]) + 1 for i in range(unit.start, unit.end + 1))


def python_units(text: str, lines: list[str], max_chars: int = MAX_CHARS) -> list[Unit] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    body = tree.body
    if not body:
        return [Unit(0, len(lines) - 1, "module")]
    first_def = next((i for i, n in enumerate(body) if isinstance(n, _DEFS)), len(body))
    units: list[Unit] = []
    if first_def == len(body):
        return [Unit(0, len(lines) - 1, "module")]
    head_end = _start(body[first_def], lines, 0) - 1
    if head_end >= 0:
        units.append(Unit(0, head_end, "module", mergeable=False))
    for unit, node in _with_nodes(
        _runs(body[first_def:], lines, head_end + 1, len(lines) - 1, ""), body[first_def:]
    ):
        if isinstance(node, ast.ClassDef) and _size(lines, unit) > max_chars:
            units.extend(_class_units(node, unit, lines))
        else:
            units.append(unit)
    return units


def _with_nodes(units: list[Unit], body: list[ast.stmt]):
    """Pair each definition unit with its node (plain-statement units get None)."""
    defs = iter(n for n in body if isinstance(n, _DEFS))
    for unit in units:
        yield unit, (next(defs) if unit.title else None)


def _class_units(node: ast.ClassDef, unit: Unit, lines: list[str]) -> list[Unit]:
    methods = [i for i, n in enumerate(node.body) if isinstance(n, _DEFS)]
    if not methods:
        return [unit]
    first = node.body[methods[0]]
    head_end = _start(first, lines, unit.start) - 1
    out = [Unit(unit.start, head_end, f"class {node.name}", mergeable=False)]
    inner = _runs(node.body[methods[0] :], lines, head_end + 1, unit.end, f"{node.name}.")
    for u in inner:
        u.title = u.title or f"class {node.name}"
    out.extend(inner)
    return out
