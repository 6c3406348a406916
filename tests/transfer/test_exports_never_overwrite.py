"""Every export follows one rule (``export-graph``, ``export-memories``, ``export``,
``export-to``): a file already there with other content is refused with one error naming it and
nothing is written; ``--force`` (the tool's ``force``) keeps each such file as
``<name>.bak-<time>`` first; files are 0600, the folders an export creates 0700; nothing is
written through a symbolic link (a link at the file's name is moved aside with ``--force``,
never followed); a folder at the file's name is refused, even with ``--force``. Real SQLite, the
hashing embedder, a real MCP client session for the tool."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ingest.importers.export_files import write_paths
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.cli import main
from server.service.core.identity import Identity
from server.service.core.models import MemoryInput
from server.service.memories.memory import MemoryService
from server.service.transfers import transfer
from tests.mcp_util import identity_env, in_process, runtime_on

ME = Identity(project_id="proj", agent_id="agent")
MINE = '{"type":"entity","name":"Mine","entityType":"x","observations":["my own notes"]}\n'
GRAPH = ('{"type":"entity","name":"Deploy","entityType":"process",'
         '"observations":["Deploys run from CI."]}\n')  # fmt: skip


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def backups(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f"{name}.bak-*"))


# ---------------------------------------------------------------------------- export-graph
@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """``run(*argv)`` -> (exit status, stdout, stderr) of ``pattern-memory`` over a store
    holding one entity and one lesson."""
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    src = tmp_path / "src.jsonl"
    src.write_text(GRAPH, encoding="utf-8")
    assert run("import-graph", str(src))[0] == 0
    return run


def test_export_graph_refuses_an_existing_file_and_force_keeps_a_backup(cli, tmp_path):
    target = tmp_path / "memory.jsonl"
    target.write_text(MINE, encoding="utf-8")
    code, _, err = cli("export-graph", str(target))
    assert code == 2 and err.count("\n") == 1
    assert f"{target} already exists; nothing was written" in err and "--force" in err
    assert target.read_text() == MINE and backups(tmp_path, "memory.jsonl") == []
    code, out, err = cli("export-graph", str(target), "--force")
    assert code == 0
    [backup] = backups(tmp_path, "memory.jsonl")
    assert backup.read_text() == MINE and target.read_text() == GRAPH
    assert json.loads(out)["backups"] == [f"{target} -> {backup}"]
    assert f"(kept as a backup): {target} -> {backup}" in err
    assert mode(target) == 0o600
    # the same content again: nothing to replace, no --force needed
    assert cli("export-graph", str(target))[0] == 0
    assert len(backups(tmp_path, "memory.jsonl")) == 1


def test_export_graph_checks_both_files_before_writing_either(cli, tmp_path):
    graph, lessons = tmp_path / "new" / "graph.jsonl", tmp_path / "lesson.json"
    lessons.write_text("[]\n", encoding="utf-8")
    code, _, err = cli("export-graph", str(graph), "--lessons", str(lessons))
    assert code == 2 and f"{lessons} already exists" in err
    assert not graph.exists() and lessons.read_text() == "[]\n"
    code, _, _ = cli("export-graph", str(graph), "--lessons", str(graph))
    assert code == 2 and not graph.exists()
    assert cli("export-graph", str(graph), "--lessons", str(lessons), "--force")[0] == 0
    assert graph.read_text() == GRAPH and lessons.read_text() == ""
    assert mode(graph.parent) == 0o700 and mode(graph) == mode(lessons) == 0o600


@pytest.mark.parametrize("dangling", [False, True])
def test_export_graph_never_writes_through_a_link(cli, tmp_path, dangling):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "authorized_keys"
    if not dangling:
        victim.write_text("ssh-ed25519 AAAA mine\n", encoding="utf-8")
    target = tmp_path / "memory.jsonl"
    os.symlink(victim, target)
    code, _, err = cli("export-graph", str(target))
    assert code == 2 and "already exists" in err
    assert cli("export-graph", str(target), "--force")[0] == 0
    assert not target.is_symlink() and target.read_text() == GRAPH
    [backup] = backups(tmp_path, "memory.jsonl")
    assert backup.is_symlink() and os.readlink(backup) == str(victim)  # the link, moved aside
    assert victim.exists() != dangling
    if not dangling:
        assert victim.read_text() == "ssh-ed25519 AAAA mine\n"


def test_export_graph_refuses_a_folder_at_the_files_name_even_with_force(cli, tmp_path):
    target = tmp_path / "memory.jsonl"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    for extra in ((), ("--force",)):
        code, _, err = cli("export-graph", str(target), *extra)
        assert code == 2 and f"{target} is a folder, not a file" in err
    assert (target / "keep.txt").read_text() == "mine" and backups(tmp_path, "memory.jsonl") == []


def test_export_graph_follows_a_link_the_user_names_as_its_folder(cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "linked", target_is_directory=True)
    # the folder the user names is theirs to name (a link to it is followed) ...
    assert cli("export-graph", str(tmp_path / "linked" / "g.jsonl"))[0] == 0
    assert (elsewhere / "g.jsonl").read_text() == GRAPH


# ---------------------------------------------------------------------------- export-memories
@pytest.fixture
def svc(tmp_path):
    service = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    service.remember(ME, MemoryInput(content="Deploys need a green main branch."))
    yield service
    service.engine.close()


def test_export_memories_refuses_an_existing_file_and_force_keeps_a_backup(svc, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    target = allowed / "backup.json"
    target.write_text('{"mine": true}', encoding="utf-8")
    with pytest.raises(InvalidInput) as err:
        transfer.export_memories(svc, ME, [allowed], "backup.json")
    assert f"{target} already exists; nothing was written" in err.value.message
    assert "force" in err.value.message and "\n" not in err.value.message
    assert target.read_text() == '{"mine": true}'
    res = transfer.export_memories(svc, ME, [allowed], "backup.json", force=True)
    [backup] = backups(allowed, "backup.json")
    assert backup.read_text() == '{"mine": true}'
    assert res.backups == [f"{target} -> {backup}"]
    assert json.loads(target.read_text())["count"] == 1 and mode(target) == 0o600
    res = transfer.export_memories(svc, ME, [allowed], "deep/er/backup.json")
    assert mode(allowed / "deep") == mode(allowed / "deep" / "er") == 0o700
    assert mode(Path(res.filepath)) == 0o600


def test_export_memories_never_writes_through_a_link_inside_the_allowed_folder(svc, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    real = allowed / "notes.txt"
    real.write_text("my notes", encoding="utf-8")
    (allowed / "backup.json").symlink_to(real)
    with pytest.raises(InvalidInput, match="already exists"):
        transfer.export_memories(svc, ME, [allowed], "backup.json")
    transfer.export_memories(svc, ME, [allowed], "backup.json", force=True)
    assert real.read_text() == "my notes"
    assert not (allowed / "backup.json").is_symlink()
    (allowed / "dir.json").mkdir()
    with pytest.raises(InvalidInput, match="is a folder, not a file"):
        transfer.export_memories(svc, ME, [allowed], "dir.json", force=True)


def test_export_memories_tool_refuses_then_keeps_a_backup_with_force(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    home = tmp_path / "store"
    service = MemoryService(Engine(home, HashEmbedder()))
    rt = runtime_on(service, identity_env(home, "proj", "agent", allowed=allowed), tmp_path)
    target = allowed / "backup.json"
    target.write_text("mine", encoding="utf-8")
    try:
        with in_process(rt) as client:
            client.ok("remember", {"content": "Deploys need a green main branch."})
            text = client.error("export-memories", {"outputPath": str(target)})
            assert "[invalid_input]" in text and "already exists" in text
            assert target.read_text() == "mine"
            data = client.ok("export-memories", {"outputPath": str(target), "force": True})
            assert len(data["backups"]) == 1 and data["exported"] == 1
    finally:
        service.engine.close()
    [backup] = backups(allowed, "backup.json")
    assert backup.read_text() == "mine" and mode(target) == 0o600


def test_export_command_refuses_then_keeps_a_backup_with_force(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "backup.json"
    target.write_text("mine", encoding="utf-8")
    code, _, err = cli("export", str(target))
    assert code == 2 and f"{target} already exists" in err and target.read_text() == "mine"
    code, out, err = cli("export", str(target), "--force")
    assert code == 0 and len(json.loads(out)["backups"]) == 1
    assert "kept as a backup" in err
    [backup] = backups(tmp_path, "backup.json")
    assert backup.read_text() == "mine" and mode(target) == 0o600


# ---------------------------------------------------------------------------- attacked
def test_a_pipe_at_the_files_name_is_refused_at_once_even_with_force(cli, tmp_path):
    target = tmp_path / "memory.jsonl"
    os.mkfifo(target)
    for extra in ((), ("--force",)):
        code, _, err = cli("export-graph", str(target), *extra)
        assert code == 2 and f"{target} is a named pipe (FIFO), not a file" in err
    assert stat.S_ISFIFO(target.lstat().st_mode)


def test_a_folder_that_cannot_be_made_stops_the_export_before_any_file(cli, tmp_path):
    (tmp_path / "plain").write_text("a file, not a folder")
    lessons = tmp_path / "lesson.json"
    code, _, err = cli("export-graph", str(tmp_path / "plain" / "sub" / "g.jsonl"),
                       "--lessons", str(lessons))  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and f"{tmp_path / 'plain'} is not a folder" in err
    assert not lessons.exists()


def test_a_folder_the_system_refuses_to_make_stops_the_export_before_any_file(
    tmp_path, monkeypatch
):
    real_mkdir = os.mkdir

    def refuse(path, *args, **kw):
        if Path(path).name == "new":
            raise PermissionError(13, "Permission denied")
        return real_mkdir(path, *args, **kw)

    monkeypatch.setattr(os, "mkdir", refuse)
    lessons = tmp_path / "lesson.json"
    with pytest.raises(InvalidInput, match=r"new cannot be made \(Permission denied\)"):
        write_paths([(lessons, "[]"), (tmp_path / "new" / "g.jsonl", "")])
    assert not lessons.exists()
