"""What every graph service shares: the caller protocol, scope -> bucket, text checks, SQL helpers.

The graph layer never imports ``server``: the caller is any object with ``project_id``,
``agent_id`` and ``bucket(scope)`` (``server.service.core.identity.Identity`` is one), and secret
screening is injected as a ``screen(text) -> (text, warnings)`` callable.

One graph per bucket: the team scope of the project by default (every agent of the project
reads and edits it, like the official single-file graph), or the caller's private / personal
graph, or the public one. Entity names are unique per graph.

An entity's ``revision`` (see :mod:`graph.orset`) never repeats for its name within a graph:
deleting an entity keeps its last revision (a ``meta`` row), and the name, created again,
continues from there. A revision read from an earlier incarnation is therefore older than
everything the new one was given, so a delete made from it removes none of it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel

from retrieval.engine import Engine
from retrieval.errors import InvalidInput
from retrieval.fulltext.analyzer import identifier_parts
from retrieval.ranking import guard
from retrieval.records import MAX_TEXT_BYTES, Record, Scope, check_text, utcnow
from retrieval.storage.store import parse_ts, ts

from .pending_rows import drop as drop_pending
from .pending_rows import resolve as resolve_pending

MAX_BATCH = 1000  # items per call
DEFAULT_SCOPE = "team"

Screen = Callable[[str], tuple[str, list[str]]]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Origin:
    """Where imported graph content comes from: the date its observations keep (None: now)
    and the provenance stored in their metadata."""

    at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


class Caller(Protocol):
    project_id: str
    agent_id: str

    def bucket(self, scope: str) -> str: ...


class Citer(Protocol):
    """Citations of code (the server's ``CitationService``): ``resolve`` reads the cited files
    before a write and returns a pending set (falsy when empty) whose ``write(conn, record_ids)``
    stores them inside the write's transaction; ``states`` gives records' citations with their
    status now; ``factor`` the ranking factor of an item with those citations."""

    def resolve(self, who: Any, specs: Any, texts: Sequence[str] = ()) -> Any: ...

    def states(self, who: Any, record_ids: Sequence[str]) -> dict[str, list]: ...

    def factor(self, states: Sequence) -> float: ...


def parse_scope(scope: str | None) -> Scope:
    try:
        return Scope(scope or DEFAULT_SCOPE)
    except ValueError:
        raise InvalidInput(
            f"invalid scope {scope!r}: use team (default), private, personal or public", scope=scope
        ) from None


def validated(model: type[M], items: Iterable[M | dict], what: str) -> list[M]:
    """Tool input as models: instances pass through, dicts are validated (pydantic errors
    become tool errors at the MCP edge); at most :data:`MAX_BATCH` ``what`` (:func:`check_batch`)."""
    out = [i if isinstance(i, model) else model.model_validate(i) for i in items]
    check_batch(out, what)
    return out


def check_batch(items: Sequence, what: str) -> None:
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} {what} per call, got {len(items)}")


def entity_context(name: str, entity_type: str) -> str:
    """The indexed context of an observation: its entity's name and type (plus the parts of a
    camelCase name), so search covers name, type and observations together."""
    parts = identifier_parts(name)
    return f"{name} ({entity_type})" + (f" [{parts}]" if parts else "")


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def chunks(seq: Sequence, size: int = 500) -> Iterable[Sequence]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


LAST_REVISION = "graph.last_revision:"  # meta key prefix: a deleted entity's last revision


def _last_revision_key(bucket: str, name: str) -> str:
    return LAST_REVISION + json.dumps([bucket, name], ensure_ascii=False)


def first_revisions(conn: sqlite3.Connection, bucket: str, names: Sequence[str]) -> dict[str, int]:
    """{name: the revision an entity of that name starts at if it is created now}: one past the
    last revision of the entity the name held before (0 for a name never deleted)."""
    keys = {_last_revision_key(bucket, n): n for n in dict.fromkeys(names)}
    out = dict.fromkeys(keys.values(), 0)
    for part in chunks(list(keys)):
        rows = conn.execute(
            f"SELECT key, value FROM meta WHERE key IN ({placeholders(len(part))})", list(part)
        ).fetchall()
        out.update((keys[k], int(v) + 1) for k, v in rows)
    return out


def observation_records(
    conn: sqlite3.Connection, bucket: str, names: Sequence[str], *, damaged: bool = False
) -> dict[str, list[sqlite3.Row]]:
    """{entity name: [row (id, content, metadata), …]} of plain observations, in insertion
    order; a row whose content is not text is left out (logged), unless ``damaged`` (a
    deletion: it goes with its entity)."""
    out: dict[str, list[sqlite3.Row]] = {}
    for part in chunks(list(dict.fromkeys(names))):
        rows = conn.execute(
            "SELECT id, entity_name, content, metadata FROM records WHERE bucket=? AND "
            f"kind='observation' AND entity_name IN ({placeholders(len(part))}) ORDER BY rowid",
            [bucket, *part],
        ).fetchall()
        for r in rows:
            if not damaged and not isinstance(r["content"], str):  # left out, the read answers
                guard.dropped("observation row", TypeError("its content is not text"), r["id"])
                continue
            out.setdefault(r["entity_name"], []).append(r)
    return out


class GraphBase:
    """Engine, clock, screening and the graph's write lock.

    :attr:`lock` is owned by the :class:`~graph.entities.GraphService` (one per store) and
    shared by its :class:`~graph.lessons.LessonService`, which edits the same graph tables; no
    other module takes it. The SQLite transaction makes each write atomic and checks what
    another process may have changed (names taken, entities gone); the lock makes the
    read-modify-write sequences of this process consistent (observation lists, lesson
    counters). Nothing slow runs under it: a write plans and embeds first
    (:meth:`embed_ahead`), then takes the lock, plans again from a fresh read and writes with
    the vectors made ahead (:meth:`ahead_for`)."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock=utcnow,
        screen: Screen | None = None,
        cite: Citer | None = None,
    ) -> None:
        self.engine = engine
        self.store = engine.store
        self.clock = clock
        self.screen = screen
        self.cite = cite
        self.lock = threading.RLock()

    def citations(self, who: Caller, specs, texts: Sequence[str]):
        """The citations of a write (None without a citer or when there are none)."""
        if self.cite is None:
            if specs:
                raise InvalidInput("citations are not available on this service")
            return None
        return self.cite.resolve(who, specs, texts) or None

    # ---------------------------------------------------------------- text
    def clean(self, text: str, what: str, warnings: list[str]) -> str:
        check_text(text, what)
        return self.clean_name(text, what, warnings)

    def clean_name(self, text: str, what: str, warnings: list[str]) -> str:
        """A name or type (entity, relation, lesson) through the write policy, as any stored
        text: a secret in it is refused or redacted, an instruction refused or warned about."""
        if self.screen is None or not text:
            return text
        out, found = self.screen(text)
        warnings.extend(f"{what}: {w}" for w in found)
        return out

    def clean_tree(self, value: Any, what: str, warnings: list[str]) -> Any:
        """Every string of a JSON-like value (dict keys too) through the write policy."""
        if isinstance(value, str):
            return self.clean_name(value, what, warnings)
        if isinstance(value, dict):
            out: dict = {}
            for k, v in value.items():
                key = base = self.clean_name(k, what, warnings) if isinstance(k, str) else k
                n = 1
                while key in out:  # two keys redacted alike: both values kept
                    n += 1
                    key = f"{base} ({n})"
                out[key] = self.clean_tree(v, f"{what}.{base}", warnings)  # never the raw key
            return out
        if isinstance(value, list | tuple):
            return [self.clean_tree(v, f"{what}[{i}]", warnings) for i, v in enumerate(value)]
        return value

    # ---------------------------------------------------------------- embedding ahead
    def embed_ahead(self, records: Sequence[Record]) -> dict[str, np.ndarray]:
        """Vectors of the records a write is about to store, made before it takes :attr:`lock`
        (embedding is the slow part of a write), keyed by content hash: the plan redone under
        the lock builds new record objects (new ids) for the same texts."""
        vecs = self.engine.embed(records)
        return {r.current_hash(): vecs[r.id] for r in records if r.id in vecs}

    @staticmethod
    def ahead_for(ahead: dict[str, np.ndarray], records: Sequence[Record]) -> dict:
        """``Engine.apply(vectors=)`` for ``records`` from :meth:`embed_ahead`'s vectors (a text
        not embedded ahead is embedded by ``apply``)."""
        return {r.id: ahead[h] for r in records if (h := r.current_hash()) in ahead}

    # ---------------------------------------------------------------- reads
    @property
    def reader(self) -> sqlite3.Connection:
        return self.store.reader

    def _rows_by_name(
        self, table: str, bucket: str, names: Sequence[str], conn: sqlite3.Connection | None
    ) -> dict[str, sqlite3.Row]:
        """{name: row} of ``table`` (entities or lessons: both keyed by bucket and name)."""
        conn = conn or self.reader
        out: dict[str, sqlite3.Row] = {}
        for part in chunks(list(dict.fromkeys(names))):
            rows = conn.execute(
                f"SELECT * FROM {table} WHERE bucket=? AND name IN ({placeholders(len(part))})",
                [bucket, *part],
            ).fetchall()
            out.update((r["name"], r) for r in rows)
        return out

    def entity_rows(
        self, bucket: str, names: Sequence[str], conn: sqlite3.Connection | None = None
    ) -> dict[str, sqlite3.Row]:
        return self._rows_by_name("entities", bucket, names, conn)

    def observation_rows(
        self, bucket: str, names: Sequence[str], conn: sqlite3.Connection | None = None,
        *, damaged: bool = False,
    ) -> dict[str, list[tuple[str, str]]]:  # fmt: skip
        """{entity name: [(record id, content), …]} of plain observations, in insertion order
        (``damaged``: with the rows whose content is not text, see :func:`observation_records`)."""
        found = observation_records(conn or self.reader, bucket, names, damaged=damaged)
        return {n: [(r["id"], r["content"]) for r in rows] for n, rows in found.items()}

    def lesson_rows(
        self, bucket: str, names: Sequence[str], conn: sqlite3.Connection | None = None
    ) -> dict[str, sqlite3.Row]:
        return self._rows_by_name("lessons", bucket, names, conn)

    def observations_of(self, bucket: str, rows: Iterable[sqlite3.Row]) -> dict[str, list[str]]:
        """Observations per entity: records for plain entities, the lesson row for lessons."""
        rows = list(rows)
        plain = [r["name"] for r in rows if r["entity_type"] != "lesson"]
        lessons = [r["name"] for r in rows if r["entity_type"] == "lesson"]
        out = {n: [c for _, c in obs] for n, obs in self.observation_rows(bucket, plain).items()}
        for name, row in self.lesson_rows(bucket, lessons).items():
            out[name] = json.loads(row["observations"])
        return out

    # ---------------------------------------------------------------- writes (inside a transaction)
    @staticmethod
    def insert_entity(
        conn: sqlite3.Connection,
        bucket: str,
        who: Caller,
        name: str,
        entity_type: str,
        now: datetime,
        revision: int | None = None,
    ) -> int:
        """Insert an entity at ``revision`` (default: :func:`first_revisions`, read in ``conn``;
        a caller that stamped observations with it passes the one it planned and checked)."""
        if revision is None:
            revision = first_revisions(conn, bucket, [name])[name]
        cur = conn.execute(
            "INSERT INTO entities(bucket, project_id, name, entity_type, created_by, created_at, "
            "updated_at, revision) VALUES (?,?,?,?,?,?,?,?)",
            (bucket, who.project_id, name, entity_type, who.agent_id, ts(now), ts(now), revision),
        )
        rowid = int(cur.lastrowid)
        # the live row holds the name's last revision now
        conn.execute("DELETE FROM meta WHERE key=?", (_last_revision_key(bucket, name),))
        conn.execute(
            "INSERT INTO entities_fts(rowid, name, entity_type, terms) VALUES (?,?,?,?)",
            (rowid, name, entity_type, identifier_parts(f"{name} {entity_type}")),
        )
        resolve_pending(conn, bucket, name)  # relations an import kept waiting for this name
        return rowid

    @staticmethod
    def delete_entity_rows(conn: sqlite3.Connection, bucket: str, names: Sequence[str]) -> int:
        deleted = 0
        for part in chunks(list(names)):
            marks = placeholders(len(part))
            rows = conn.execute(
                f"SELECT id, name, revision FROM entities WHERE bucket=? AND name IN ({marks})",
                [bucket, *part],
            ).fetchall()
            ids = [r[0] for r in rows]
            conn.executemany(  # the name's revisions go on from here if it is created again
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)",
                [(_last_revision_key(bucket, name), str(int(rev or 0))) for _, name, rev in rows],
            )
            for eid in ids:
                conn.execute("DELETE FROM entities_fts WHERE rowid=?", (eid,))
            conn.execute(
                f"DELETE FROM entities WHERE bucket=? AND name IN ({marks})", [bucket, *part]
            )
            conn.execute(
                f"DELETE FROM relations WHERE bucket=? AND (from_name IN ({marks}) OR to_name IN ({marks}))",
                [bucket, *part, *part],
            )
            drop_pending(conn, bucket, part)
            conn.execute(
                f"DELETE FROM lessons WHERE bucket=? AND name IN ({marks})", [bucket, *part]
            )
            deleted += len(ids)
        return deleted

    @staticmethod
    def touch(conn: sqlite3.Connection, bucket: str, names: Iterable[str], now: datetime) -> None:
        conn.executemany(
            "UPDATE entities SET updated_at=? WHERE bucket=? AND name=?",
            [(ts(now), bucket, n) for n in names],
        )


__all__ = [
    "Caller", "Citer", "GraphBase", "Origin", "MAX_BATCH", "MAX_TEXT_BYTES", "Screen", "check_batch", "check_text",
    "chunks", "entity_context", "first_revisions", "parse_scope", "parse_ts", "placeholders", "ts",
]  # fmt: skip
