"""The layers, enforced (basic-memory style): imports go one way,
``server -> graph, ingest -> retrieval``; nothing outside ``server/`` imports ``mcp``; the service
never imports ``mcp`` nor a face; and the faces (MCP tools, CLI, daemon, bridge, dashboard)
reach the store only through the service, so every face gets the same rules (limits, secret
policy, visibility, review).

Every import statement of every module is read with ``ast`` (function-level imports too), and
so is every dynamic import (``importlib.import_module``, ``__import__``): a literal name counts
as an import, a computed one is refused (the rules could not be checked)."""

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

# the faces may use these modules below the service (pydantic I/O models, the error tree, and
# the file-lock primitives the daemon and the hook client need before any store is open)
FACE_MAY_IMPORT = {
    "retrieval.locks",
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


DYNAMIC = "<computed>"  # a dynamic import whose module name is not a literal
IMPORTERS = {"import_module", "__import__"}


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


def modules_named(target: str, names: list[str]) -> list[str]:
    """The modules an import may reach: ``target`` itself, and ``target.name`` for each name
    (``from server import auth`` reaches ``server.http.auth``)."""
    return [target, *(f"{target}.{n}" for n in names)]


def violations(module: str, path: Path) -> list[str]:
    """Every layer rule ``module`` breaks (empty: it keeps them all)."""
    top = module.split(".")[0]
    out = []
    for target, names in imports(module, path):
        if target == DYNAMIC:
            out.append(f"{module} imports a module by a computed name: import it by name")
            continue
        head = target.split(".")[0]
        if head in PACKAGES and head not in ALLOWED[top]:
            out.append(f"{module} imports {target}: {top} may not import {head}")
        if head in ("mcp", "mcp_types") and (
            not module.startswith("server.") or module.startswith("server.service")
        ):
            out.append(
                f"{module} imports {target}: only server/ outside the service may import mcp"
            )
        if module.startswith("server.service") and head == "server":
            faces = [
                m
                for m in modules_named(target, names)
                if m != "server" and not (m == "server.service" or m.startswith("server.service."))
            ]
            if faces and not (target == "server" and not names):
                out.append(
                    f"{module} imports {', '.join(faces)}: the service may not import a face "
                    "(MCP tools, CLI, daemon, bridge, auth, dashboard); move the code into the "
                    "service"
                )
    return out


ALL = modules()


def test_the_walk_finds_the_layers():
    names = {m for m, _ in ALL}
    assert {"retrieval.engine", "server.service.memory", "server.mcp.memory_tools"} <= names
    assert len(names) > 60


@pytest.mark.parametrize("module,path", ALL, ids=[m for m, _ in ALL])
def test_imports_go_one_way(module, path):
    assert violations(module, path) == []


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
        allowed = (
            target in FACE_MAY_IMPORT
            or bool(names)
            and all(f"{target}.{n}" in FACE_MAY_IMPORT for n in names)
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


BAD_SERVICE = """
from ..mcp import memory_tools
from ..http import auth
from server.cli import main
import server.http.daemon
"""
BAD_DYNAMIC = """
import importlib
from importlib import import_module
engine = importlib.import_module("retrieval.engine")
walker = import_module("ingest.walker")
tools = importlib.import_module("..mcp.memory_tools", __package__)
bridge = __import__("server.http.bridge")
name = "graph" + ".entities"
computed = importlib.import_module(name)
"""


def _bad(tmp_path, module: str, text: str) -> list[str]:
    path = tmp_path / f"{module.rsplit('.', 1)[-1]}.py"
    path.write_text(text)
    return violations(module, path)


def test_the_service_may_not_import_a_face(tmp_path):
    found = _bad(tmp_path, "server.service.bad", BAD_SERVICE)
    for face in ("server.mcp.memory_tools", "server.http.auth", "server.cli", "server.http.daemon"):
        assert any(face in v for v in found), (face, found)
    ok = "from .errors import InvalidInput\nfrom server.service import ids\nimport server.service\n"
    assert _bad(tmp_path, "server.service.good", ok) == []


def test_a_dynamic_import_is_an_import(tmp_path):
    """``importlib.import_module`` / ``__import__`` of a lower or forbidden layer is caught,
    and a computed module name is refused."""
    found = _bad(tmp_path, "graph.bad", BAD_DYNAMIC)
    assert any("imports ingest.walker: graph may not import ingest" in v for v in found), found
    assert any("imports server.http.bridge: graph may not import server" in v for v in found), found
    assert any("computed name" in v for v in found), found
    assert ("retrieval.engine", []) in imports("server.mcp.bad", tmp_path / "bad.py")
    svc = _bad(tmp_path, "server.service.bad", BAD_DYNAMIC)
    assert any("server.mcp.memory_tools" in v for v in svc), svc


def test_review_policy_lives_in_the_service():
    """Who reviews is a rule of the service, not of a face (the tools, the dashboard and the
    daemon's authenticator all read it from there)."""
    import server.http.auth
    from server.service.review import review_policy

    assert callable(review_policy)
    assert not hasattr(server.http.auth, "review_policy")
