"""The layers, enforced (basic-memory style): imports go one way,
``server -> graph, ingest -> retrieval`` (:data:`ALLOWED`). Inside ``server/``, every module is
the service or one of the faces (``server/mcp``, ``server/http``, ``server/hooks``, ``server/ui``,
``server/cli``), and each part imports only the parts :data:`SERVER` allows: the service
imports no face, a face imports the service and the faces it mounts or starts. Only the faces
import ``mcp``; and the faces reach the store only through the service
(:data:`FACE_MAY_IMPORT`), so every face gets the same rules (limits, secret policy,
visibility, review). docs/architecture.md states the same tables.

Every import statement of every module is read with ``ast`` (function-level imports too), and
so is every dynamic import (``importlib.import_module``, ``__import__``): a literal name counts
as an import, a computed one is refused (the rules could not be checked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import DYNAMIC, imports, modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retrieval", "ingest", "graph", "server")

# what each top-level package may import from the project
ALLOWED = {
    "retrieval": {"retrieval"},
    "ingest": {"ingest", "retrieval"},
    "graph": {"graph", "retrieval"},
    "server": {"server", "graph", "ingest", "retrieval"},
}

# inside server/: what each part may import besides itself (the faces are every part but the
# service; the daemon mounts the MCP app, the dashboard and the hook routes; the hook client
# finds the daemon by its files; the CLI starts or calls all of them)
SERVICE = "server.service"
SERVER = {
    SERVICE: set(),
    "server.mcp": {SERVICE},
    "server.ui": {SERVICE},
    "server.hooks": {SERVICE, "server.http"},
    "server.http": {SERVICE, "server.mcp", "server.ui", "server.hooks"},
    "server.cli": {SERVICE, "server.mcp", "server.ui", "server.hooks", "server.http"},
}
FACE_PARTS = tuple(part for part in SERVER if part != SERVICE)
# files kept at a former path for what users installed (hooks run a file by its path): each
# forwards to its face by path and imports nothing of the project
FORWARDERS = {"server.hookclient"}

# the faces may use these modules below the service (pydantic I/O models, the error tree, and
# the file primitives the daemon and the hook client need before any store is open: locks, and
# folders and files created private)
FACE_MAY_IMPORT = {
    "retrieval.storage.locks",
    "retrieval.storage.private",
    "retrieval.regexes.derived",
    "retrieval.errors",
    "retrieval.records",
    "graph.models",
    "graph.lesson_models",
    "ingest.workspace.pipeline.IngestReport",
    "ingest.workspace.pipeline.Progress",
    "ingest.workspace.progress",
}


def modules_named(target: str, names: list[str]) -> list[str]:
    """The modules an import may reach: ``target`` itself, and ``target.name`` for each name
    (``from server.http import auth`` reaches ``server.http.auth``)."""
    return [target, *(f"{target}.{n}" for n in names)]


def part_of(module: str) -> str | None:
    """The part of ``server/`` (a key of :data:`SERVER`) that ``module`` belongs to; None for
    ``server`` itself and for modules outside ``server/``."""
    return next((p for p in SERVER if module == p or module.startswith(p + ".")), None)


def violations(module: str, path: Path) -> list[str]:
    """Every layer rule ``module`` breaks (empty: it keeps them all)."""
    top = module.split(".")[0]
    mine = part_of(module)
    out = []
    for target, names in imports(module, path):
        if target == DYNAMIC:
            out.append(f"{module} imports a module by a computed name: import it by name")
            continue
        head = target.split(".")[0]
        if head in PACKAGES and head not in ALLOWED[top]:
            out.append(f"{module} imports {target}: {top} may not import {head}")
        if head in ("mcp", "mcp_types") and mine not in FACE_PARTS:
            out.append(f"{module} imports {target}: only the faces may import mcp")
        if head != "server" or mine is None:
            continue
        for reached in modules_named(target, names):
            other = part_of(reached)
            if other is None or other == mine or other in SERVER[mine]:
                continue
            if mine == SERVICE:
                out.append(
                    f"{module} imports {reached}: the service may not import a face "
                    "(MCP tools, CLI, daemon, bridge, auth, hooks, dashboard); move the code "
                    "into the service"
                )
            else:
                out.append(f"{module} imports {reached}: {mine} may not import {other}")
    return out


ALL = modules(PACKAGES)


def test_the_walk_finds_the_layers():
    names = {m for m, _ in ALL}
    assert {
        "retrieval.engine",
        "server.service.memories.memory",
        "server.mcp.memory_tools",
        "server.http.daemon",
        "server.hooks.hookclient",
        "server.ui.dashboard",
        "server.cli",
    } <= names
    assert len(names) > 60


def test_every_server_module_is_the_service_or_a_face():
    """Nothing loose at the top of ``server/``: a new module goes into the service or a face,
    and so falls under that part's rules."""
    loose = [m for m, _ in ALL if m.startswith("server.") and part_of(m) is None]
    assert sorted(set(loose) - FORWARDERS) == []
    for module, path in ALL:
        if module in FORWARDERS:
            assert [t for t, _ in imports(module, path) if t.split(".")[0] in PACKAGES] == []
    assert {part_of(m) for m, _ in ALL} >= set(SERVER)


@pytest.mark.parametrize("module,path", ALL, ids=[m for m, _ in ALL])
def test_imports_go_one_way(module, path):
    assert violations(module, path) == []


FACES = [(m, p) for m, p in ALL if part_of(m) in FACE_PARTS]


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
walker = import_module("ingest.workspace.walker")
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


def test_a_face_imports_only_the_parts_it_may(tmp_path):
    """The table inside server/ is enforced both ways: the MCP tools may not reach into the
    daemon, the dashboard not into the CLI, the hook face not into the MCP app, and only the
    faces import ``mcp``; the arrows the table allows pass."""
    assert any(
        "server.mcp.bad imports server.http.daemon: server.mcp may not import server.http" in v
        for v in _bad(tmp_path, "server.mcp.bad", "from ..http import daemon\n")
    )
    assert _bad(tmp_path, "server.ui.bad", "from server.cli import main\n")
    assert _bad(tmp_path, "server.hooks.bad", "import server.mcp.app\n")
    assert any(
        "only the faces may import mcp" in v
        for v in _bad(tmp_path, "server.service.bad", "import mcp\n")
    )
    assert _bad(tmp_path, "graph.bad", "from mcp.server import MCPServer\n")
    allowed = "from ..mcp.app import create_server\nfrom ..ui import dashboard\nimport mcp\n"
    assert _bad(tmp_path, "server.http.good", allowed) == []
    assert _bad(tmp_path, "server.hooks.good", "from ..http.daemonfiles import read_info\n") == []


def test_a_dynamic_import_is_an_import(tmp_path):
    """``importlib.import_module`` / ``__import__`` of a lower or forbidden layer is caught,
    and a computed module name is refused."""
    found = _bad(tmp_path, "graph.bad", BAD_DYNAMIC)
    assert any(
        "imports ingest.workspace.walker: graph may not import ingest" in v for v in found
    ), found
    assert any("imports server.http.bridge: graph may not import server" in v for v in found), found
    assert any("computed name" in v for v in found), found
    assert ("retrieval.engine", []) in imports("server.mcp.bad", tmp_path / "bad.py")
    svc = _bad(tmp_path, "server.service.bad", BAD_DYNAMIC)
    assert any("server.mcp.memory_tools" in v for v in svc), svc


def test_review_policy_lives_in_the_service():
    """Who reviews is a rule of the service, not of a face (the tools, the dashboard and the
    daemon's authenticator all read it from there)."""
    import server.http.auth
    from server.service.browsing.review import review_policy

    assert callable(review_policy)
    assert not hasattr(server.http.auth, "review_policy")
