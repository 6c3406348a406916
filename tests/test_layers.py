"""The layers, enforced (basic-memory style): imports go one way,
``server -> graph, ingest -> retrieval``; nothing outside ``server/`` imports ``mcp``; the service
never imports ``mcp``; and the faces (MCP tools, CLI, daemon, bridge) reach the store only
through the service, so every face gets the same rules (limits, secret policy, visibility).

Every import statement of every module is read with ``ast`` (function-level imports too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("retrieval", "ingest", "graph", "server")

# what each top-level package may import from the project
ALLOWED = {
    "retrieval": {"retrieval"},
    "ingest": {"ingest", "retrieval"},
    "graph": {"graph", "retrieval"},
    "server": {"server", "graph", "ingest", "retrieval"},
}

# the faces may use these modules below the service (pydantic I/O models, the error tree)
FACE_MAY_IMPORT = {
    "retrieval.errors",
    "retrieval.records",
    "graph.models",
    "graph.lesson_models",
    "ingest.pipeline.IngestReport",
    "ingest.pipeline.Progress",
    "ingest.progress",
}


def modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((".".join(parts), path))
    return out


def imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import statement in ``path``."""
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
    return out


ALL = modules()


def test_the_walk_finds_the_layers():
    names = {m for m, _ in ALL}
    assert {"retrieval.engine", "server.service.memory", "server.tools.memories"} <= names
    assert len(names) > 60


@pytest.mark.parametrize("module,path", ALL, ids=[m for m, _ in ALL])
def test_imports_go_one_way(module, path):
    top = module.split(".")[0]
    for target, _ in imports(module, path):
        head = target.split(".")[0]
        if head in PACKAGES:
            assert head in ALLOWED[top], f"{module} imports {target}: {top} may not import {head}"
        if head == "mcp" or head == "mcp_types":
            assert module.startswith("server.") and not module.startswith("server.service"), (
                f"{module} imports {target}: only server/ outside the service may import mcp"
            )


FACES = [
    (m, p)
    for m, p in ALL
    if m.startswith("server.") and not m.startswith("server.service") and m != "server"
]


@pytest.mark.parametrize("module,path", FACES, ids=[m for m, _ in FACES])
def test_faces_reach_the_store_only_through_the_service(module, path):
    for target, names in imports(module, path):
        head = target.split(".")[0]
        if head not in ("retrieval", "graph", "ingest"):
            continue
        allowed = target in FACE_MAY_IMPORT or all(
            f"{target}.{n}" in FACE_MAY_IMPORT for n in names
        )
        assert allowed, (
            f"{module} imports {names or target} from {target}: a face goes through "
            "server.service (add a service function), or imports only I/O models and errors"
        )


def test_the_checker_catches_a_face_that_opens_the_store(tmp_path):
    """The rule itself can fail: a face importing the engine is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from retrieval.engine import Engine\nfrom .service import memory\n")
    found = imports("server.bad", bad)
    assert ("retrieval.engine", ["Engine"]) in found
    assert ("server.service", ["memory"]) in found
    assert "retrieval.engine" not in FACE_MAY_IMPORT
