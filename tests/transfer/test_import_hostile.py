"""Hostile and malformed sources for ``import-from``: nothing outside the source folder is read
(links to files or folders out of it, a link swapped in after the walk, a named pipe, a
device), front matter is read without YAML aliases and within bounds, archives within size and
ratio limits, and every malformed source ends in one clear line or a counted skip, never a
traceback or a hang. Each reader is called directly (its own error, not a wrapper's), then the
command as a user runs it."""

from __future__ import annotations

import gzip
import io
import json
import os
import sqlite3
import threading
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from ingest.importers import basic_memory, bounded, claude_code, claude_mem, mem0, source_files
from retrieval.embedding.embedder import HashEmbedder
from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from server.cli import main
from server.service.core.identity import Identity
from server.service.graphs.graph_services import graph_services
from server.service.memories.memory import MemoryService
from server.service.transfers.import_from import read_source
from server.service.transfers.import_write import import_source

ME = Identity(project_id="proj", agent_id="agent")
SECRET_LINE = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q3kLmN4p"


def secret_outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    creds = outside / "credentials"
    creds.write_text(f"[default]\n{SECRET_LINE}\n", encoding="utf-8")
    return creds


def within(seconds: float, fn, *args):
    """``fn(*args)`` in a thread that must finish within ``seconds`` (a hang fails the test,
    never the run)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---------------------------------------------------------------------- outside the folder
def test_a_note_linked_to_a_file_outside_the_folder_is_skipped_and_reported(tmp_path):
    creds = secret_outside(tmp_path)
    notes = tmp_path / "bm" / "notes"
    notes.mkdir(parents=True)
    (notes / "ok.md").write_text("# ok\n\nA normal note.\n", encoding="utf-8")
    os.symlink("../../outside/credentials", notes / "aws.md")
    os.symlink("ok.md", notes / "same.md")  # a link inside the folder is read
    read = basic_memory.read(tmp_path / "bm")
    assert ("note:notes/aws.md", source_files.OUTSIDE) in read.skipped
    texts = [getattr(i, "content", "") for i in read.items]
    assert not any("aws_secret" in t for t in texts) and creds.exists()
    assert {i.name for i in read.items if i.kind == "entity"} == {"ok", "same"}


def test_claude_code_rules_linked_out_of_the_project_are_skipped_and_reported(tmp_path):
    creds = secret_outside(tmp_path)
    proj = tmp_path / "proj"
    (proj / ".claude" / "rules").mkdir(parents=True)
    (proj / "CLAUDE.md").write_text("# Project\n\nUse make.\n", encoding="utf-8")
    os.symlink(creds, proj / ".claude" / "rules" / "creds.md")
    os.symlink(creds, proj / "CLAUDE.local.md")
    read = claude_code.read(proj)
    reasons = dict(read.skipped)
    assert reasons[f"{proj.resolve()}/.claude/rules/creds.md"] == source_files.OUTSIDE
    assert reasons[f"{proj.resolve()}/CLAUDE.local.md"] == source_files.OUTSIDE
    assert [i.content for i in read.items] == ["# Project\n\nUse make."]


def test_a_folder_link_is_never_entered(tmp_path):
    secret_outside(tmp_path)
    (tmp_path / "outside" / "note.md").write_text(f"# stolen\n\n{SECRET_LINE}\n")
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "a.md").write_text("# a\n\ntext\n")
    os.symlink(tmp_path / "outside", bm / "people")
    read = basic_memory.read(bm)
    assert read.skipped == [("note:people", source_files.FOLDER_LINK)]
    assert not any(SECRET_LINE in str(i) for i in read.items)


def test_a_link_swapped_in_after_the_walk_is_caught_when_the_file_is_opened(tmp_path, monkeypatch):
    creds = secret_outside(tmp_path)
    root = tmp_path / "bm"
    (root / "notes").mkdir(parents=True)
    note = root / "notes" / "x.md"
    note.write_text("# x\n")
    # the walk saw a plain note; by the time it is opened, notes/ is a link out of the folder
    (root / "notes").rename(root / "old")
    os.symlink(creds.parent, root / "notes")
    os.symlink(creds, creds.parent / "x.md")
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, **kw: str(p))  # the check ran before
    try:
        with pytest.raises(bounded.SourceError) as err:
            source_files.read_bytes(note, real(root))
    finally:
        monkeypatch.setattr(os.path, "realpath", real)
    assert str(err.value) in (
        source_files.OUTSIDE,
        "unreadable (Too many levels of symbolic links)",
    )


def test_a_named_pipe_and_a_device_are_refused_without_waiting(tmp_path):
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "a.md").write_text("# a\n\ntext\n")
    os.mkfifo(bm / "pipe.md")
    read = within(5, basic_memory.read, bm)
    assert ("note:pipe.md", "a named pipe (FIFO), not a file") in read.skipped
    with pytest.raises(InvalidInput, match="a named pipe"):
        within(5, mem0.read, bm / "pipe.md")
    with pytest.raises(InvalidInput, match="a named pipe"):
        within(5, basic_memory.read, bm / "pipe.md")
    with pytest.raises(bounded.SourceError, match="a device, not a file"):
        within(5, source_files.read_bytes, Path("/dev/zero"), Path("/dev/zero"))


# ---------------------------------------------------------------------- front matter
def alias_bomb(levels: int = 9) -> str:
    lines = ["---", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join([*lines, "---", "# Note", "", "Some prose."]) + "\n"


@pytest.mark.parametrize(
    "front,reason",
    [
        (alias_bomb(), "front matter with a YAML alias (*a0); aliases are not read"),
        ("---\ntitle: loop\nseeAlso: &a [*a]\n---\n", "front matter with a YAML alias (*a)"),
        ("---\nx: " + "[" * 200 + "]" * 200 + "\n---\n", "nested deeper than 64 levels"),
        ("---\n" + "".join(f"k{i}: [1, 2]\n" for i in range(4000)) + "---\n",
         "more than 2000 YAML values"),
        ("---\nnote: " + "x" * 70_000 + "\n---\n", "front matter of 68 KiB"),
        ("---\nwhen: 2024-02-30\n---\n", "front matter is not valid YAML"),
        ("---\nn: " + "9" * 5000 + "\n---\n", "front matter is not valid YAML"),
    ],
)  # fmt: skip
def test_hostile_front_matter_skips_its_note_at_once(tmp_path, front, reason):
    sources = [("basic-memory", tmp_path / "bm"), ("claude-code", tmp_path / "m")]
    if "not valid YAML" in reason:  # a topic file's front matter is read leniently (a model's)
        sources = sources[:1]
    for source, folder in sources:
        sub = folder / "memory" if source == "claude-code" else folder
        sub.mkdir(parents=True)
        (sub / "note.md").write_text(front + "# Note\n\nSome prose.\n", encoding="utf-8")
        (sub / "good.md").write_text("# Good\n\n- [fact] fine\n", encoding="utf-8")
        started = time.monotonic()
        reader = basic_memory.read if source == "basic-memory" else claude_code.read
        read = within(10, reader, sub)
        assert time.monotonic() - started < 2
        [(_, why)] = [s for s in read.skipped if "note" in s[0]]
        assert reason in why, (source, why)
        assert read.items  # the other note is read


def test_a_note_larger_than_the_limit_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(source_files, "MAX_FILE_BYTES", 1 << 16)
    monkeypatch.setattr(source_files.read_text, "__defaults__", (1 << 16,))
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "big.md").write_text("# big\n\n" + "word " * 20_000)
    (bm / "small.md").write_text("# small\n\ntext\n")
    read = basic_memory.read(bm)
    assert read.skipped == [
        ("note:big.md", "too large (a file of 98 KiB; at most 64 KiB are read)")
    ]


# ---------------------------------------------------------------------- archives
def zipped(members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def peak_of(fn, *args) -> tuple[object, int]:
    tracemalloc.start()
    try:
        try:
            out = fn(*args)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_in_a_zip_is_refused_before_it_inflates(tmp_path):
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = b"".join([comp.compress(b"\0" * (1 << 24)) for _ in range(4)] + [comp.flush()])
    path = tmp_path / "backup.zip"
    path.write_bytes(zipped({"memories.jsonl.gz": gz}, zipfile.ZIP_STORED))
    err, peak = peak_of(mem0.read, path)
    assert isinstance(err, InvalidInput), err
    assert "inflates more than 100 times its compressed size" in err.message
    assert peak < 16 << 20  # a few MiB inflated, never 64


def test_a_zip_member_declaring_a_huge_ratio_is_refused_before_reading(tmp_path):
    path = tmp_path / "backup.zip"
    path.write_bytes(zipped({"memories.json": b" " * (8 << 20)}))
    err, peak = peak_of(mem0.read, path)
    assert isinstance(err, InvalidInput) and "memories.json: inflates more than 100" in err.message
    assert peak < 4 << 20


def test_an_inflated_size_over_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded, "MAX_INFLATED_BYTES", 1 << 20)
    data = os.urandom(3 << 20)  # incompressible: the ratio is fine, the size is not
    path = tmp_path / "memories.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    with pytest.raises(InvalidInput, match="inflates to more than 1 MiB"):
        mem0.read(path)


def test_a_gzip_stream_of_endless_empty_members_is_refused(tmp_path):
    path = tmp_path / "memories.jsonl.gz"
    path.write_bytes(gzip.compress(b"") * (bounded.MAX_MEMBERS + 1))
    with pytest.raises(InvalidInput, match="a gzip stream of more than 10000 members"):
        mem0.read(path)


def test_an_encrypted_zip_is_one_clear_error(tmp_path):
    raw = bytearray(zipped({"memories.json": json.dumps({"memories": []}).encode()}))
    for sig, off in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        raw[raw.find(sig) + off] |= 1  # the "encrypted" flag
    path = tmp_path / "backup.zip"
    path.write_bytes(bytes(raw))
    with pytest.raises(InvalidInput, match="memories.json is encrypted"):
        mem0.read(path)


def test_a_member_named_with_dot_dots_is_only_read_never_written(tmp_path):
    rows = {"memories": [{"id": "1", "content": "Deploys run from CI."}]}
    path = tmp_path / "in" / "backup.zip"
    path.parent.mkdir()
    path.write_bytes(zipped({"../../memories.json": json.dumps(rows).encode()}))
    before = sorted(p for p in tmp_path.rglob("*"))
    [item] = mem0.read(path).items
    assert item.content == "Deploys run from CI."
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_a_zip_of_too_many_entries_is_refused_before_its_directory_is_read(tmp_path):
    members = {f"m{i}.txt": b"" for i in range(bounded.MAX_MEMBERS + 1)}
    path = tmp_path / "backup.zip"
    path.write_bytes(zipped(members, zipfile.ZIP_STORED))
    with pytest.raises(InvalidInput, match=f"a zip of {bounded.MAX_MEMBERS + 1} entries"):
        mem0.read(path)


# ---------------------------------------------------------------------- values
@pytest.mark.parametrize(
    "doc,found",
    [
        ('[{"id": "1", "memory": "x", "metadata": {"n": ' + "9" * 5000 + "}}]",
         "a number too long to read"),
        ('[{"id": "1", "memory": "x", "metadata": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}]",
         "nested deeper than 64 levels"),
        ('[{"id": "1", "memory": "x", "metadata": ' + "[" * 70 + "]" * 70 + "}]",
         "nested deeper than 64 levels"),
    ],
)  # fmt: skip
def test_deep_nesting_and_huge_numbers_are_one_clear_error(tmp_path, doc, found):
    path = tmp_path / "mem0.json"
    path.write_text(doc)
    with pytest.raises(InvalidInput) as err:
        mem0.read(path)
    assert found in err.value.message and "\n" not in err.value.message


def test_source_values_of_the_wrong_type_are_read_as_text(tmp_path):
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps({"results": [
        {"id": 7, "memory": "The build uses make.", "agent_id": 42, "categories": 5},
        {"id": "8", "memory": ["a", "list"], "categories": [1, None, "ops"], "app": {"x": 1}},
        {"id": "9", "memory": "Far values.", "metadata": {"big": "BIG", "nan": "NAN"}},
    ]}).replace('"BIG"', "1e400").replace('"NAN"', "NaN"))  # fmt: skip
    a, b, c = mem0.read(path).items
    assert (a.sourceId, a.author, a.tags, a.category) == ("memory:7", "42", ["5"], "5")
    assert b.tags == ["1", "ops"] and isinstance(b.content, str)
    assert c.fields["metadata"] == {"big": "1e400", "nan": "NaN"}
    json.dumps([i.model_dump(mode="json") for i in (a, b, c)], allow_nan=False)


def claude_mem_db(path: Path, rows: list[tuple]) -> Path:
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE observations (id INTEGER PRIMARY KEY, project TEXT, type TEXT, "
              "created_at_epoch INTEGER, title TEXT, narrative TEXT, memory_session_id TEXT)")  # fmt: skip
    c.executemany("INSERT INTO observations VALUES (?,?,?,?,?,?,?)", rows)
    c.commit()
    c.close()
    return path


def test_a_blob_title_and_a_value_over_the_limit_in_a_database(tmp_path, monkeypatch):
    monkeypatch.setattr(claude_mem.db, "MAX_FIELD_CHARS", 1 << 16)
    db = claude_mem_db(tmp_path / "cm.db", [
        (1, "shop", "decision", 1_700_000_000_000, b"Build \xff", "Uses make.", "s1"),
        (2, "shop", "bugfix", 1_700_000_000_000, "Huge", "x" * (1 << 17), "s1"),
        (3, 42, 7, "not a time", 3.5, None, None),
    ])  # fmt: skip
    read = claude_mem.read(db)
    assert [i.sourceId for i in read.items] == ["observation:1", "observation:3"]
    assert read.items[0].title == "Build \ufffd" and read.items[1].category == "7"
    assert read.skipped == [("observation:2", claude_mem.db.TOO_BIG)]


# ---------------------------------------------------------------------- the command
def _cases(tmp_path: Path) -> dict[str, tuple[str, Path]]:
    m = tmp_path / "src"
    m.mkdir()
    bm = m / "bm"
    bm.mkdir()
    (bm / "note.md").write_text(alias_bomb())
    (m / "deep.json").write_text(
        '[{"id": "1", "memory": "x", "m": ' + "[" * 50_000 + "]" * 50_000 + "}]"
    )
    (m / "int.json").write_text('[{"id": "1", "memory": "x", "m": ' + "9" * 5000 + "}]")
    (m / "agent.json").write_text(json.dumps([{"id": "1", "memory": "Uses make.", "agent_id": 4}]))
    return {
        "alias bomb": ("basic-memory", bm),
        "deep nesting": ("mem0", m / "deep.json"),
        "huge number": ("mem0", m / "int.json"),
        "numeric agent": ("mem0", m / "agent.json"),
        "blob title": ("claude-mem", claude_mem_db(m / "cm.db", [
            (1, "shop", "decision", 1_700_000_000_000, b"\xff", "Uses make.", "s1")])),
        "a pipe": ("mem0", _fifo(m / "pipe.json")),
        "junk": ("memory-jsonl", _junk(m / "memory.jsonl")),
    }  # fmt: skip


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _junk(path: Path) -> Path:
    path.write_bytes(b'{"type":"entity","name":"a","entityType":"b","observations":[' + b"[" * 5000)
    return path


def test_the_command_ends_every_malformed_source_in_one_line(tmp_path, monkeypatch, capsys):
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    for label, (source, path) in _cases(tmp_path).items():
        capsys.readouterr()
        code = within(30, main, ["import-from", source, str(path), "--dry-run", "--quiet"])
        err = capsys.readouterr().err
        assert code in (0, 2), (label, code, err)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("error [invalid_input]: "), label
            assert "expected " in err and "; found " in err, label


def test_an_unexpected_failure_of_a_reader_is_one_clear_error(tmp_path, monkeypatch):
    def broken(_path):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setitem(__import__("server.service.transfers.import_from").service.transfers.import_from.SOURCES,
                        "mem0", broken)  # fmt: skip
    with pytest.raises(InvalidInput) as err:
        read_source("mem0", tmp_path / "x.json")
    assert err.value.message == (
        f"cannot import {tmp_path / 'x.json'} as mem0: expected {mem0.EXPECTED}; "
        "found RecursionError: maximum recursion depth exceeded"
    )


def test_a_symlinked_secret_never_reaches_the_store(tmp_path):
    secret_outside(tmp_path)
    notes = tmp_path / "bm" / "notes"
    notes.mkdir(parents=True)
    (notes / "ok.md").write_text("# ok\n\nA normal note.\n")
    os.symlink("../../outside/credentials", notes / "aws.md")
    svc = MemoryService(Engine(tmp_path / "store", HashEmbedder()))
    try:
        res = import_source(svc, graph_services(svc), ME, "basic-memory", tmp_path / "bm")
        assert res.skipped == {source_files.OUTSIDE: 1}
        assert res.skippedItems == [f"note:notes/aws.md: {source_files.OUTSIDE}"]
    finally:
        svc.engine.close()
    for f in (tmp_path / "store").rglob("*"):
        if f.is_file():
            assert b"wJalrXUtnFEMI" not in f.read_bytes(), f


# ---------------------------------------------------------------------- odd names, loops, counts
def test_text_that_is_not_unicode_skips_its_item_and_the_report_still_prints(
    tmp_path, monkeypatch, capsys
):
    path = tmp_path / "m.json"
    path.write_text('[{"id": "1", "memory": "Good text.", "categories": ["c\\udc00"]},'
                    ' {"id": "2", "memory": "Also good."}]')  # fmt: skip
    read = read_source("mem0", path)
    assert [i.sourceId for i in read.items] == ["memory:2"]
    assert read.skipped == [("memory:1", "not Unicode text (a lone surrogate U+DC00)")]
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "ok.md").write_text("# ok\n\ntext\n")
    (Path(os.fsdecode(bytes(bm) + b"/\xff.md"))).write_text("# odd name\n\ntext\n")
    assert ("note:\udcff.md", source_files.NOT_UTF8) in basic_memory.read(bm).skipped
    for key, value in {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDER": "hash",
                       "PATTERN_PROJECT_ID": "proj", "PATTERN_AGENT_ID": "agent"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert main(["import-from", "basic-memory", str(bm), "--quiet"]) == 0
    assert f"note:?.md: {source_files.NOT_UTF8}" in capsys.readouterr().out


def test_a_symbolic_link_loop_is_skipped_not_followed(tmp_path):
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "ok.md").write_text("# ok\n\ntext\n")
    os.symlink("b.md", bm / "a.md")
    os.symlink("a.md", bm / "b.md")
    read = within(5, basic_memory.read, bm)
    assert {sid for sid, _ in read.skipped} == {"note:a.md", "note:b.md"}
    assert all(why.startswith("unreadable") for _, why in read.skipped)


def test_a_source_of_more_items_than_the_limit_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded, "MAX_ITEMS", 3)
    rows = [(i, "shop", "decision", 1_700_000_000_000, f"t{i}", "Uses make.", "s1")
            for i in range(1, 6)]  # fmt: skip
    db = claude_mem_db(tmp_path / "cm.db", rows)
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"id": str(i), "memory": f"m{i}"} for i in range(5)]))
    for source, where in (("claude-mem", db), ("mem0", path)):
        with pytest.raises(InvalidInput, match="found more than 3 items"):
            read_source(source, where)


def test_a_note_of_more_parts_than_the_limit_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(basic_memory, "MAX_NOTE_PARTS", 5)
    bm = tmp_path / "bm"
    bm.mkdir()
    (bm / "index.md").write_text("# Index\n\n" + "".join(f"- [[Note {i}]]\n" for i in range(9)))
    (bm / "ok.md").write_text("# ok\n\n- [fact] one\n")
    read = basic_memory.read(bm)
    assert read.skipped == [("note:index.md", "too large (a note of 9 observations and "
                                              "relations; at most 5 are read)")]  # fmt: skip


def test_json_of_too_many_values_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded, "MAX_JSON_VALUES", 1000)
    lines = tmp_path / "memory.jsonl"
    lines.write_text('{"type":"entity","name":"a","entityType":"b","observations":[]}\n' * 20_000)
    doc = tmp_path / "m.json"
    doc.write_text(json.dumps([{"id": str(i), "memory": "m"} for i in range(50_000)]))
    for source, where in (("memory-jsonl", lines), ("mem0", doc)):
        with pytest.raises(InvalidInput, match="more than 1000 JSON objects, arrays and strings"):
            read_source(source, where)


def test_items_an_agent_sends_are_held_to_the_same_limits():
    from server.service.transfers.import_from import parse_items

    deep: object = "x"
    for _ in range(70):
        deep = [deep]
    for fields, found in (({"a": deep}, "nested deeper than 64 levels"),
                          ({"k\udc00": "v"}, "not Unicode text"),
                          ({"a": "x" * (bounded.MAX_FIELD_CHARS + 1)}, "a text of")):  # fmt: skip
        item = {"kind": "memory", "sourceId": "s", "content": "text", "fields": fields}
        with pytest.raises(InvalidInput, match=found):
            parse_items([item])
