"""``export-to`` never replaces what is there: an existing file is refused (one error naming
it, nothing written) unless ``--force``, which keeps each replaced file as a backup first; an
imported note goes back to its own path; files are 0600 in folders created 0700; nothing is
written through a link planted in the export folder. Real SQLite, the hashing embedder."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ingest.importers.items import MemoryItem
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.cli import main
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.transfers.export_to import export_to
from server.service.transfers.import_write import import_items, import_source

DATA = Path(__file__).parents[1] / "data" / "import"
ME = Identity(project_id="proj", agent_id="agent")
RUNBOOK = "---\ntitle: Deploy\n---\n# Deploy\n\nMy own runbook: page Dana before a Friday deploy.\n"


@pytest.fixture
def store(tmp_path):
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    yield svc, graph_services(svc)
    svc.engine.close()


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}  # fmt: skip


def deploy_entity(graphs) -> None:
    graphs.graph.create_entities(
        ME, [{"name": "Deploy", "entityType": "process", "observations": ["Deploys run from CI."]}]
    )


def test_an_existing_note_is_refused_and_nothing_is_written(store, tmp_path):
    svc, graphs = store
    deploy_entity(graphs)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(RUNBOOK, encoding="utf-8")
    before = files(notes)
    with pytest.raises(InvalidInput) as err:
        export_to(svc, graphs, ME, "basic-memory", notes)
    assert f"{notes / 'deploy.md'} already exists; nothing was written" in err.value.message
    assert "--force" in err.value.message and "\n" not in err.value.message
    assert files(notes) == before  # the user's runbook, byte for byte, and nothing else


def test_force_keeps_each_replaced_file_as_a_backup_first(store, tmp_path):
    svc, graphs = store
    deploy_entity(graphs)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(RUNBOOK, encoding="utf-8")
    res = export_to(svc, graphs, ME, "basic-memory", notes, force=True)
    [line] = res.backups
    old, _, backup = line.partition(" -> ")
    assert old == "deploy.md" and backup.startswith("deploy.md.bak-")
    assert (notes / backup).read_text(encoding="utf-8") == RUNBOOK
    assert "- [note] Deploys run from CI." in (notes / "deploy.md").read_text(encoding="utf-8")


def test_a_note_with_the_same_content_is_left_as_it_is(store, tmp_path):
    svc, graphs = store
    deploy_entity(graphs)
    out = tmp_path / "out"
    export_to(svc, graphs, ME, "basic-memory", out)
    again = export_to(svc, graphs, ME, "basic-memory", out)  # no --force needed: nothing changes
    assert again.unchanged == again.notes == 1 and again.backups == []


def test_a_round_trip_writes_each_note_back_to_its_own_path(store, tmp_path):
    svc, graphs = store
    source = tmp_path / "bm"
    shutil.copytree(DATA / "basic-memory", source)
    import_source(svc, graphs, ME, "basic-memory", source)
    originals = files(source)
    with pytest.raises(InvalidInput, match="already exists"):  # the documented round trip
        export_to(svc, graphs, ME, "basic-memory", source)
    assert files(source) == originals
    res = export_to(svc, graphs, ME, "basic-memory", source, force=True)
    after = files(source)
    notes = {p for p in after if ".bak-" not in p}
    assert notes == set(originals)  # no second copy of a subfolder's note at the top
    assert len(res.backups) == len(originals)
    for line in res.backups:  # every original kept, byte for byte
        old, _, backup = line.partition(" -> ")
        assert after[backup] == originals[old]
    dana = (source / "people" / "dana-ortiz.md").read_text(encoding="utf-8")
    assert "permalink: people/dana-ortiz" in dana and "- works_on [[shop-api]]" in dana
    retries = (source / "notes" / "payment-retries.md").read_text(encoding="utf-8")
    assert "status: accepted" in retries and "owner: dana" in retries  # custom front matter
    assert "- depends_on [[Payment Gateway]]" in retries  # a forward reference, still there


def test_files_are_private_and_created_folders_too(store, tmp_path):
    svc, graphs = store
    import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    out = tmp_path / "mine"
    out.mkdir(mode=0o755)
    os.chmod(out, 0o755)
    export_to(svc, graphs, ME, "basic-memory", out / "a" / "b")
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # the user's own folder, as it was
    made = [out / "a", *[p for p in (out / "a").rglob("*") if p.is_dir()]]
    assert {stat.S_IMODE(p.stat().st_mode) for p in made} == {0o700}
    written = [p for p in (out / "a").rglob("*") if p.is_file()]
    assert len(written) == 4  # a note per entity, its text inside
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o600}


def test_a_folder_link_in_the_export_folder_is_never_written_through(store, tmp_path):
    svc, graphs = store
    import_source(svc, graphs, ME, "basic-memory", DATA / "basic-memory")
    elsewhere = tmp_path / "ssh"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(elsewhere, out / "notes")  # the notes of notes/ would land in ~/.ssh
    for force in (False, True):
        with pytest.raises(InvalidInput, match="notes is a symbolic link; nothing was written"):
            export_to(svc, graphs, ME, "basic-memory", out, force=force)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["notes"]


def test_an_export_target_that_is_a_link_is_moved_aside_never_followed(store, tmp_path):
    svc, graphs = store
    deploy_entity(graphs)
    secret = tmp_path / "bashrc"
    secret.write_text("export PATH=~/bin:$PATH\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(secret, out / "deploy.md")
    with pytest.raises(InvalidInput, match="deploy.md already exists"):
        export_to(svc, graphs, ME, "basic-memory", out)
    res = export_to(svc, graphs, ME, "basic-memory", out, force=True)
    backup = out / res.backups[0].partition(" -> ")[2]
    assert backup.is_symlink() and os.readlink(backup) == str(secret)  # the link, moved aside
    assert secret.read_text(encoding="utf-8") == "export PATH=~/bin:$PATH\n"  # never written
    assert not (out / "deploy.md").is_symlink() and "Deploys run" in (out / "deploy.md").read_text()


def test_a_stored_path_that_would_leave_the_folder_is_not_used(store, tmp_path):
    svc, graphs = store
    item = MemoryItem(sourceId="note:x:text", content="Rotate the keys monthly.", title="Keys",
                      fields={"path": "../../escaped.md", "permalink": "keys"})  # fmt: skip
    import_items(svc, graphs, ME, "basic-memory", [item])
    out = tmp_path / "deep" / "out"
    export_to(svc, graphs, ME, "basic-memory", out)
    assert not (tmp_path / "escaped.md").exists()
    assert list(files(out)) == ["memories/learnings/keys.md"]


def test_memory_jsonl_refuses_an_existing_file_and_force_keeps_a_backup(store, tmp_path):
    svc, graphs = store
    deploy_entity(graphs)
    target = tmp_path / "memory.jsonl"
    target.write_text('{"type":"entity","name":"Mine","entityType":"x","observations":[]}\n')
    with pytest.raises(InvalidInput, match="memory.jsonl already exists"):
        export_to(svc, graphs, ME, "memory-jsonl", target)
    res = export_to(svc, graphs, ME, "memory-jsonl", target, force=True)
    assert res.entities == 1 and len(res.backups) == 1
    assert json.loads(target.read_text().splitlines()[0])["name"] == "Deploy"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_cli_names_the_existing_file_and_the_backups_it_keeps(tmp_path, monkeypatch, capsys):
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    graph = tmp_path / "graph.jsonl"
    graph.write_text('{"type":"entity","name":"Deploy","entityType":"process",'
                     '"observations":["Deploys run from CI."]}\n')  # fmt: skip
    assert main(["import-graph", str(graph)]) == 0
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(RUNBOOK, encoding="utf-8")
    capsys.readouterr()
    assert main(["export-to", "basic-memory", str(notes)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{notes / 'deploy.md'} already exists" in err
    assert main(["export-to", "basic-memory", str(notes), "--force"]) == 0
    out = capsys.readouterr()
    assert "replaced (kept as a backup): deploy.md -> deploy.md.bak-" in out.err
    assert json.loads(out.out)["backups"][0].startswith("deploy.md -> deploy.md.bak-")
