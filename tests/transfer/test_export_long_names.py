"""An export whose notes are named by long stored names (an entity name of 400 characters, a
memory's title of 300): every note is written under a file name the file system takes, and a
file name the user gives that no file system takes is one clear error before anything is
written (a long name failed the whole export with a bare OSError, after its folders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.importers.export_files import write_paths
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.transfers.export_to import export_to

ME = Identity(project_id="proj", agent_id="agent")
NAME_MAX = 255  # bytes of one file name (Linux, macOS)


@pytest.fixture
def store(tmp_path):
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    yield svc, graph_services(svc)
    svc.engine.close()


def test_notes_named_by_long_stored_names_are_all_written(store, tmp_path):
    svc, graphs = store
    graphs.graph.create_entities(ME, [
        {"name": "E" * 400, "entityType": "process", "observations": ["first"]},
        {"name": "E" * 400 + "x", "entityType": "process", "observations": ["second"]},
        {"name": "é" * 200, "entityType": "process", "observations": ["third"]},
        {"name": "Deploy", "entityType": "process", "observations": ["Deploys run from CI."]},
    ], "team")  # fmt: skip
    svc.remember(ME, MemoryInput(content="x", scope="team", metadata={"title": "t" * 300}))
    res = export_to(svc, graphs, ME, "basic-memory", tmp_path / "notes", "team")
    written = [p for p in (tmp_path / "notes").rglob("*.md")]
    assert res.notes == len(written) == 5
    assert all(len(p.name.encode()) <= NAME_MAX for p in written)
    texts = "".join(p.read_text(encoding="utf-8") for p in written)
    assert all(w in texts for w in ("first", "second", "third", "Deploys run from CI."))


@pytest.mark.parametrize("name", ["n" * 256, "n" * 240, "é" * 120])
def test_a_file_name_no_file_system_takes_is_refused_before_anything_is_written(tmp_path, name):
    ok = tmp_path / "out" / "graph.json"
    with pytest.raises(InvalidInput, match="too long"):
        write_paths([(ok, "{}"), (tmp_path / "out" / name, "{}")])
    assert not ok.exists() and not Path(tmp_path / "out").exists()
