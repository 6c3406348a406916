"""Property-based tests of every importer's reader with random and hostile input: random bytes,
random JSON and JSON lines, random front matter (aliases, anchors, tags, merge keys, deep
flows), Markdown with odd headings, links and fences, random zip members, SQLite rows of the
wrong types. Each reader, called directly, either returns what it read or raises the one clear
error (``InvalidInput``), never another exception, within a time and a memory bound."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import tempfile
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingest.importers import (
    basic_memory,
    bounded,
    claude_code,
    claude_mem,
    markdown,
    mcp_memory_service,
    mem0,
)
from ingest.importers.items import Read
from retrieval.errors import InvalidInput
from server.service.transfers.import_from import read_memory_jsonl

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECONDS = 3.0
PEAK_BYTES = 64 << 20


def outcome(reader: Callable[[Path], Read], path: Path) -> Read | InvalidInput:
    """``reader(path)``: what it read or its one clear error, checked against the bounds."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        try:
            out: Read | InvalidInput = reader(path)
        except InvalidInput as exc:
            out = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < SECONDS
    assert peak < PEAK_BYTES
    if isinstance(out, Read):
        for item in out.items:  # every item is JSON as the store keeps it
            json.dumps(item.model_dump(mode="json", by_alias=True), allow_nan=False)
    else:
        assert "\n" not in out.message and out.message.startswith("cannot import ")
    return out


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="pm-fuzz-"))


# ---------------------------------------------------------------------- strategies
scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text(max_size=20))  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=25,
)
MEM0_KEYS = ["id", "memory", "content", "hash", "metadata", "created_at", "updated_at", "user_id",
             "agent_id", "actor_id", "app", "app_id", "categories", "category_ids", "state",
             "deleted_at", "expiration_date", "archived_at"]  # fmt: skip
mem0_rows = st.dictionaries(st.sampled_from(MEM0_KEYS), json_values, max_size=8)
mem0_docs = st.one_of(
    st.lists(mem0_rows, max_size=5),
    st.fixed_dictionaries({"results": st.lists(mem0_rows, max_size=5)}),
    st.fixed_dictionaries(
        {
            "memories": st.lists(mem0_rows, max_size=5),
            "apps": json_values,
            "categories": json_values,
            "user": json_values,
        }
    ),  # fmt: skip
    json_values,
)
YAML_BITS = ["title: x", "type: note", "tags: [a, b]", "permalink: a/b", "a: &a [1, 2]",
             "b: *a", "<<: *a", "c: !!set {x, y}", "d: !!binary aGk=", "e: !!python/none ''",
             "f: 2024-02-30", "g: 1e400", "h: .nan", "i: [[[[[[", "j: {{{{", "? [k]\n: v",
             "l: |\n  text", "m: 'unterminated", "n: \"\\x\"", "o: &o [*o]", "- item", "p:: q",
             "created: 2024-05-02T10:00:00Z", "q: 99999999999999999999999999"]  # fmt: skip
front_matter = st.lists(st.sampled_from(YAML_BITS) | st.text(max_size=30), max_size=8).map(
    lambda lines: "---\n" + "\n".join(lines) + "\n---\n"
)
MD_BITS = ["# Title", "## Observations", "## Relations", "###### deep ##", "#######  seven",
           "#", "# ", "#" + " " * 40 + "x", "- [fact] text #tag (context)", "- [ ] todo",
           "- [x] done", "- relates_to [[Other]]", '- "quoted type" [[A|alias]]', "- [[Bare]]",
           "- [[", "[[[[[[[[", "[[a]b]]", "- #tag only", "```", "~~~", "    code",
           "text with [[Link]] inside", "- [cat] ", "- [[]]", "\ufeff", "\x00", "\r"]  # fmt: skip
markdown_bodies = st.lists(st.sampled_from(MD_BITS) | st.text(max_size=40), max_size=15).map(
    "\n".join
)
notes = st.one_of(
    st.tuples(front_matter, markdown_bodies).map("".join),
    markdown_bodies,
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="replace")),
)
CELL = (
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(max_size=30)
    | st.binary(max_size=30)
    | st.sampled_from(  # fmt: skip
        ['["a", 1]', '{"k": [1, {"x": null}]}', "[[[[", "null", "1e400", '"s"', "{}"]
    )
)


# ---------------------------------------------------------------------- JSON sources
@FAST
@given(st.binary(max_size=2000))
def test_random_bytes_are_read_or_refused_by_every_file_reader(data):
    d = scratch()
    try:
        for name, reader in (("x.json", mem0.read), ("memory.jsonl", read_memory_jsonl),
                             ("note.md", basic_memory.read), ("CLAUDE.md", claude_code.read)):  # fmt: skip
            (d / name).write_bytes(data)
            outcome(reader, d / name)
    finally:
        shutil.rmtree(d)


@FAST
@given(mem0_docs, st.booleans())
def test_random_mem0_exports_are_read_or_refused(doc, lines):
    d = scratch()
    try:
        path = d / "export.json"
        if lines and isinstance(doc, list):
            path.write_text("\n".join(json.dumps(r) for r in doc))
        else:
            path.write_text(json.dumps(doc))
        outcome(mem0.read, path)
    finally:
        shutil.rmtree(d)


@FAST
@given(st.lists(json_values, max_size=6))
def test_random_json_lines_are_read_or_refused_as_memory_jsonl(rows):
    d = scratch()
    try:
        path = d / "memory.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows))
        outcome(read_memory_jsonl, path)
    finally:
        shutil.rmtree(d)


# ---------------------------------------------------------------------- Markdown sources
@FAST
@given(st.lists(notes, min_size=1, max_size=3))
def test_random_notes_are_read_or_refused(texts):
    d = scratch()
    try:
        (d / "bm" / "sub").mkdir(parents=True)
        (d / "memory").mkdir()
        for i, text in enumerate(texts):
            (d / "bm" / ("sub" if i % 2 else "") / f"n{i}.md").write_text(text)
            (d / "memory" / ("MEMORY.md" if i == 0 else f"topic{i}.md")).write_text(text)
        outcome(basic_memory.read, d / "bm")
        outcome(claude_code.read, d / "memory")
    finally:
        shutil.rmtree(d)


@FAST
@given(front_matter)
def test_front_matter_is_a_mapping_or_one_clear_error(front):
    started = time.monotonic()
    try:
        meta, _ = markdown.split_front_matter(front + "# x\n")
    except markdown.FrontMatterError:
        return
    finally:
        assert time.monotonic() - started < SECONDS
    json.dumps(meta, allow_nan=False)


OLD_WIKILINK = re.compile(r"\[\[([^\]]+)\]\]")
OLD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="[]a| ", max_size=30))
def test_wikilinks_finds_what_the_pattern_found(line):
    assert basic_memory.wikilinks(line) == OLD_WIKILINK.findall(line)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="# a\t", max_size=20))
def test_headings_are_read_as_the_pattern_read_them(line):
    m = OLD_HEADING.match(line)
    assert markdown.heading(line) == ((len(m.group(1)), m.group(2)) if m else None)


def test_the_linear_readers_stay_fast_on_a_megabyte_line():
    for line in ("[" * (1 << 20), "[[" + "a" * (1 << 20), "# a" + " " * (1 << 20) + "x"):
        started = time.monotonic()
        basic_memory.wikilinks(line)
        markdown.heading(line)
        basic_memory.parse_note(line, "x.md")
        assert time.monotonic() - started < 1.0


# ---------------------------------------------------------------------- archives
member_names = st.sampled_from(["memories.json", "memories.jsonl.gz", "memories.jsonl",
                                "../../memories.json", "a/memories.json", "other.txt"])  # fmt: skip
member_data = st.one_of(
    st.binary(max_size=500),
    mem0_docs.map(lambda d: json.dumps(d).encode()),
    mem0_docs.map(lambda d: __import__("gzip").compress(json.dumps(d).encode())),
    st.just(b"\x1f\x8b" + b"\x00" * 40),
)


@SLOW
@given(st.dictionaries(member_names, member_data, max_size=3),
       st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
       st.sampled_from(["as is", "encrypted", "truncated", "flipped"]))  # fmt: skip
@example(  # a flipped byte in the central directory names a zip version Python cannot read
    {"memories.json": b"\x00\x00\x00\x00\x02\x00\x00\x03\x00\x00\x04\x00\x00\x01\x00\x00"
                      b"\x06\x00\x01\x01\x02\n\x16"},
    zipfile.ZIP_DEFLATED, "flipped",
)  # fmt: skip
def test_random_zip_members_are_read_or_refused(members, method, damage):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    raw = bytearray(buf.getvalue())
    if damage == "encrypted" and members:
        raw[raw.find(b"PK\x03\x04") + 6] |= 1
        raw[raw.find(b"PK\x01\x02") + 8] |= 1
    elif damage == "truncated":
        raw = raw[: len(raw) * 2 // 3]
    elif damage == "flipped" and len(raw) > 40:
        raw[len(raw) // 2] ^= 0xFF
    d = scratch()
    try:
        (d / "backup.zip").write_bytes(bytes(raw))
        outcome(mem0.read, d / "backup.zip")
    finally:
        shutil.rmtree(d)


@FAST
@given(st.binary(max_size=300))
def test_random_gzip_streams_inflate_or_are_refused(tail):
    try:
        bounded.gunzip(b"\x1f\x8b" + tail, "x")
    except bounded.SourceError:
        pass


# ---------------------------------------------------------------------- SQLite sources
OBS_COLS = ["project", "type", "created_at_epoch", "title", "subtitle", "narrative", "text",
            "facts", "concepts", "files_read", "files_modified", "memory_session_id",
            "agent_id", "agent_type", "metadata", "merged_into_project", "content_hash",
            "prompt_number", "discovery_tokens"]  # fmt: skip
MMS_COLS = ["content", "content_hash", "tags", "memory_type", "metadata", "created_at",
            "updated_at", "created_at_iso", "deleted_at", "superseded_by", "parent_id",
            "version", "confidence", "last_accessed"]  # fmt: skip


def rows_of(cols: list[str]):
    return st.lists(st.fixed_dictionaries({c: CELL for c in cols}), max_size=4)


def table(conn: sqlite3.Connection, name: str, cols: list[str], rows: list[dict]) -> None:
    conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, {', '.join(cols)})")
    for row in rows:
        conn.execute(f"INSERT INTO {name} ({', '.join(cols)}) VALUES "
                     f"({', '.join('?' * len(cols))})", [row[c] for c in cols])  # fmt: skip


@SLOW
@given(rows_of(OBS_COLS), rows_of(["memory_session_id", "platform_source", "custom_title"]),
       rows_of(["memory_session_id", "project", "created_at_epoch", "request", "learned"]))  # fmt: skip
def test_claude_mem_rows_of_the_wrong_types_are_read_or_refused(obs, sessions, summaries):
    d = scratch()
    try:
        conn = sqlite3.connect(d / "cm.db")
        table(conn, "observations", OBS_COLS, obs)
        table(conn, "sdk_sessions", ["memory_session_id", "platform_source", "custom_title"],
              sessions)  # fmt: skip
        table(conn, "session_summaries",
              ["memory_session_id", "project", "created_at_epoch", "request", "learned"],
              summaries)  # fmt: skip
        conn.commit()
        conn.close()
        outcome(claude_mem.read, d / "cm.db")
    finally:
        shutil.rmtree(d)


@SLOW
@given(rows_of(MMS_COLS), rows_of(["source_hash", "target_hash", "relationship_type",
                                    "similarity", "connection_types"]))  # fmt: skip
def test_mcp_memory_service_rows_of_the_wrong_types_are_read_or_refused(memories, edges):
    d = scratch()
    try:
        conn = sqlite3.connect(d / "m.db")
        table(conn, "memories", MMS_COLS, memories)
        table(conn, "memory_graph",
              ["source_hash", "target_hash", "relationship_type", "similarity",
               "connection_types"], edges)  # fmt: skip
        conn.commit()
        conn.close()
        outcome(mcp_memory_service.read, d / "m.db")
    finally:
        shutil.rmtree(d)


def test_a_key_with_a_line_break_is_quoted_in_one_line(tmp_path):
    """The keys an error names are quoted in one line, control characters escaped."""
    from ingest.importers import mem0

    path = tmp_path / "export.json"
    path.write_text(json.dumps({"\n": None, "a\tb\x1b[31m": 1}))
    with pytest.raises(InvalidInput) as exc:
        mem0.read(path)
    assert "\n" not in exc.value.message and "\x1b" not in exc.value.message
    assert "\\n" in exc.value.message and "a\\tb\\x1b[31m" in exc.value.message
