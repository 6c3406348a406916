"""Citations: memories, observations and lessons that cite code, checked against the files.

**Write.** :meth:`CitationService.resolve` turns a write's explicit citations
(``[{path, startLine?, endLine?}]``) and the file paths mentioned in its text (``a/b.py``,
``b.py:120``, ``b.py#L10-L20``; kept only when the file exists) into anchors
(:mod:`retrieval.cite`), reading each file once, before the write transaction; the returned
:class:`Pending` writes the rows inside it. The cited lines a row keeps pass the write policy
like any stored text: a secret in them refuses an explicit citation (``block``; a mentioned
file is then not cited) or is redacted (``redact``). A mentioned file made to hold secrets
(``.env``, a key, ``credentials``: ``trust.secret_files.secret_bearing``) is never cited. Paths resolve against the caller's project root
(``Identity.root``) and must lie in ``Settings.allowed_for(who)``: an explicit citation
outside is refused (``access_denied``), a mention outside is simply not cited; a caller without
a root (a remote agent) cannot cite files.

**Check.** :meth:`CitationService.states` gives the citations of records with their status
(``fresh / moved / changed / deleted``). A check costs one ``stat``; the file is read and
hashed only when its size or mtime differ from the last check (or the mtime is too recent to
trust), and the ingestion ``files`` row is used instead of hashing when it matches the stat.
A file outside the caller's allowed directories is never read: its stored status is shown.
A change of status (or of where moved lines are) is written in one store transaction with a
``citations`` change-stream event per record (visible to whoever may see the record).

**Background.** :meth:`CitationService.refresh_later` re-checks the citations of files that an
ingest run or ``ingest --watch`` saw change, on one worker thread.
"""

from __future__ import annotations

import os
import stat as st
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ingest.workspace.artifacts import ArtifactStore, sha256_bytes
from ingest.workspace.walker import read_within
from retrieval.cite import (
    MAX_CITATIONS,
    STALE,
    Anchor,
    CitationInput,
    CitationState,
    anchor,
    locate,
    mentions,
    read_lines,
)
from retrieval.ranking.guard import guarded
from retrieval.records import utcnow
from retrieval.storage.buckets import bucket_of
from retrieval.storage.store import SQLiteStore, ts
from server.service.core.errors import AccessDenied, InvalidInput, NotFound
from server.service.trust.secret_scan.secret_files import secret_bearing

MAX_FILE_BYTES = 16 * 2**20
RACY_NS = 2_000_000_000  # a file modified this close to its last check may keep its stat
# Score factor of a recalled item whose cited code changed or was deleted (measured:
# docs/benchmarks.md, "Citations"; benchmarks/citations.py --ranking).
STALE_FACTOR = 0.9

_COLS = (
    "record_id, idx, path, root, abs_path, start_line, end_line, sha256, size, mtime_ns, "
    "lines_hash, fingerprint, n_norm, lead, trail, text, source, status, cur_start, cur_end, "
    "seen_sha, seen_size, seen_mtime_ns, checked_ns, created_at"
)
_STATE = ("status", "cur_start", "cur_end", "seen_sha", "seen_size", "seen_mtime_ns", "checked_ns")


@dataclass
class Resolved:
    """A citation ready to store: where the file is and its anchor."""

    path: str  # relative to root, posix
    root: str
    abs_path: str
    anchor: Anchor
    sha: str
    size: int
    mtime_ns: int
    source: str  # explicit | detected

    @property
    def key(self) -> tuple:
        return (self.abs_path, self.anchor.start, self.anchor.end)

    def state(self, now: datetime) -> CitationState:
        a = self.anchor
        return CitationState(path=self.path, startLine=a.start, endLine=a.end, status="fresh",
                             currentStartLine=a.start, currentEndLine=a.end, checkedAt=now)  # fmt: skip

    def row(self, record_id: str, idx: int, now: datetime) -> tuple:
        a = self.anchor
        return (
            record_id, idx, self.path, self.root, self.abs_path, a.start, a.end, self.sha,
            self.size, self.mtime_ns, a.lines_hash, a.fingerprint, a.n_norm, a.lead, a.trail,
            a.text, self.source, "fresh", a.start, a.end, self.sha, self.size, self.mtime_ns,
            time.time_ns(), ts(now),
        )  # fmt: skip


@dataclass
class Pending:
    """Citations resolved before a write; :meth:`write` stores them inside its transaction."""

    items: list[Resolved] = field(default_factory=list)
    now: datetime = field(default_factory=utcnow)

    def __bool__(self) -> bool:
        return bool(self.items)

    def states(self) -> list[CitationState]:
        return [r.state(self.now) for r in self.items]

    def write(self, conn, record_ids: Iterable[str], *, replace: bool = False) -> None:
        """Store the citations for each record: ``replace`` drops its old ones first, else
        they are added to them (a range it already cites is not repeated)."""
        for rid in record_ids:
            if replace:
                conn.execute("DELETE FROM citations WHERE record_id=?", (rid,))
            have = {
                (r[0], r[1], r[2])
                for r in conn.execute(
                    "SELECT abs_path, start_line, end_line FROM citations WHERE record_id=?",
                    (rid,),
                )
            }
            top = conn.execute(
                "SELECT coalesce(max(idx), -1) FROM citations WHERE record_id=?", (rid,)
            ).fetchone()[0]
            new = [r for r in self.items if r.key not in have][: max(0, MAX_CITATIONS - len(have))]
            conn.executemany(
                f"INSERT INTO citations({_COLS}) VALUES ({','.join('?' * 25)})",
                [r.row(rid, top + 1 + i, self.now) for i, r in enumerate(new)],
            )


def _inside(path: Path, roots: Sequence[Path]) -> Path | None:
    return next((r for r in roots if path == r or path.is_relative_to(r)), None)


def _under(path: str, prefixes: Sequence[str]) -> bool:
    """``path`` (resolved) lies in one of the folders (each given as ``folder + "/"``)."""
    return any(path.startswith(p) for p in prefixes)


def _checked_at(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, UTC)


class CitationService:
    """Citations of one store. Built by the runtime (``rt.citations``, also ``svc.citations``)."""

    def __init__(
        self, store: SQLiteStore, settings, home: str | Path, *, clock=utcnow, policy=None
    ) -> None:
        self.store = store
        self.policy = policy  # the store's WritePolicy: screens the cited lines a row keeps
        self.settings = settings
        self.artifacts = ArtifactStore(home)
        self.clock = clock
        self.stale_factor = STALE_FACTOR
        self._worker: ThreadPoolExecutor | None = None
        self._worker_lock = threading.Lock()
        self._pending: list[Future] = []
        self._resolved: dict[tuple[str, ...], list[Path]] = {}  # allowed dirs -> resolved

    # ------------------------------------------------------------------ paths
    def allowed(self, who) -> list[Path]:
        """The caller's allowed directories, resolved (cached: a recall checks them each time)."""
        key = tuple(map(str, self.settings.allowed_for(who)))
        found = self._resolved.get(key)
        if found is None:
            found = [Path(p).expanduser().resolve() for p in key]
            if len(self._resolved) > 256:
                self._resolved.clear()
            self._resolved[key] = found
        return found

    def _locate_file(self, who, raw: str, allowed: list[Path]) -> tuple[Path, Path, str]:
        """(resolved file, the root it is relative to, its path relative to that root)."""
        root = Path(who.root).resolve()
        p = Path(raw).expanduser()
        full = (p if p.is_absolute() else root / p).resolve()
        base = _inside(full, allowed)
        if base is None:
            raise AccessDenied(
                f"cannot cite {raw}: {full} is outside the allowed directories "
                f"({', '.join(map(str, allowed)) or 'none'}); set PATTERN_ALLOWED_DIRS to allow it",
                path=raw,
                allowed=[str(a) for a in allowed],
            )
        rel_root = root if full.is_relative_to(root) else base
        return full, rel_root, full.relative_to(rel_root).as_posix() or full.name

    def _resolve_one(
        self, who, raw: str, start: int | None, end: int | None, source: str, allowed
    ) -> Resolved:
        full, rel_root, rel = self._locate_file(who, raw, allowed)
        try:
            info = full.stat()
            if not st.S_ISREG(info.st_mode):
                raise InvalidInput(f"cannot cite {raw}: not a file", path=raw)
            if info.st_size > MAX_FILE_BYTES:
                raise InvalidInput(
                    f"cannot cite {raw}: {info.st_size} bytes, the limit is {MAX_FILE_BYTES}",
                    path=raw,
                )
            data = read_within(full, allowed, MAX_FILE_BYTES)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"cannot cite {raw}: no such file under {rel_root}", path=raw) from None
        except PermissionError:
            raise AccessDenied(
                f"cannot cite {raw}: it is outside the allowed directories", path=raw
            ) from None
        except ValueError as exc:
            raise InvalidInput(f"cannot cite {raw}: {exc}", path=raw) from None
        except OSError as exc:
            raise InvalidInput(f"cannot cite {raw}: {exc.strerror or exc}", path=raw) from None
        try:
            a = anchor(read_lines(data) if start is not None else None, start, end)
        except ValueError as exc:
            raise InvalidInput(f"cannot cite {raw}: {exc}", path=raw) from None
        if a.text and self.policy is not None:  # the cited lines are stored: the write policy
            try:
                text, _found = self.policy.screen_text(a.text)
            except InvalidInput as exc:
                raise InvalidInput(
                    f"cannot cite {raw}: its lines {exc.message}", path=raw, **exc.data
                ) from None
            if text != a.text:
                a = replace(a, text=text)
        return Resolved(rel, str(rel_root), str(full), a, sha256_bytes(data), info.st_size,
                        info.st_mtime_ns, source)  # fmt: skip

    def resolve(
        self, who, specs: Sequence[CitationInput | dict] | None, texts: Sequence[str] = ()
    ) -> Pending:
        """Explicit citations (errors are the caller's to see) plus the existing files the
        texts mention (silently skipped when missing, outside or out of range)."""
        explicit = [
            s if isinstance(s, CitationInput) else CitationInput.model_validate(s)
            for s in specs or []
        ]
        if len(explicit) > MAX_CITATIONS:
            raise InvalidInput(
                f"at most {MAX_CITATIONS} citations per item, got {len(explicit)}",
                limit=MAX_CITATIONS,
            )
        if explicit and not getattr(who, "root", None):
            raise InvalidInput(
                "cannot cite files: this connection has no project folder on the store's "
                "machine (a remote agent); cite nothing, or write through a local client",
                reason="no_root",
            )
        out: dict[tuple, Resolved] = {}
        if not getattr(who, "root", None):
            return Pending()
        allowed = self.allowed(who)
        for spec in explicit:
            r = self._resolve_one(who, spec.path, spec.startLine, spec.endLine, "explicit", allowed)
            out.setdefault(r.key, r)
        for text in texts:
            for m in mentions(text or ""):
                if len(out) >= MAX_CITATIONS:
                    break
                if secret_bearing(m.path):  # ".env:3" named in a text: never its lines
                    continue
                try:
                    r = self._resolve_one(who, m.path, m.start, m.end, "detected", allowed)
                except (AccessDenied, InvalidInput, NotFound):
                    continue
                out.setdefault(r.key, r)
        return Pending(list(out.values()), self.clock())

    # ------------------------------------------------------------------ reading state
    def _rows(self, conn, record_ids: Sequence[str]) -> list:
        rows = []
        ids = list(dict.fromkeys(record_ids))
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows += conn.execute(
                f"SELECT c.*, r.project_id AS project_id FROM citations c "
                f"JOIN records r ON r.id = c.record_id "
                f"WHERE c.record_id IN ({','.join('?' * len(part))}) ORDER BY c.record_id, c.idx",
                part,
            ).fetchall()
        return rows

    def rows(self, record_ids: Sequence[str]) -> list:
        """The stored citation rows of these records, by record and index."""
        return self._rows(self.store.reader, record_ids)

    @staticmethod
    def state_of(row, values: dict | None = None) -> CitationState:
        v = values or row
        return CitationState.model_construct(  # values from our own rows: no validation needed
            path=row["path"], startLine=row["start_line"], endLine=row["end_line"],
            status=v["status"], currentStartLine=v["cur_start"], currentEndLine=v["cur_end"],
            checkedAt=_checked_at(v["checked_ns"]),
        )  # fmt: skip

    def stored(self, record_ids: Sequence[str]) -> dict[str, list[CitationState]]:
        """The last known states (no file is read)."""
        out: dict[str, list[CitationState]] = {}
        for row in self._rows(self.store.reader, record_ids):
            out.setdefault(row["record_id"], []).append(self.state_of(row))
        return out

    def states(
        self, who, record_ids: Sequence[str], *, check: bool = True
    ) -> dict[str, list[CitationState]]:
        """The citations of these records (those without any are absent), checked against the
        files the caller may read; status changes are written (with their events)."""
        rows = self._rows(self.store.reader, record_ids)
        if not rows:
            return {}
        allowed = self.allowed(who) if check and getattr(who, "root", None) else []
        return self._check_rows(rows, allowed)

    def _check_rows(self, rows, allowed: list[Path]) -> dict[str, list[CitationState]]:
        out: dict[str, list[CitationState]] = {}
        updates = []
        prefixes = [f"{str(a).rstrip('/')}/" for a in allowed]
        for row in rows:
            values = None
            if prefixes and _under(row["abs_path"], prefixes):  # a check that fails: as known
                values = guarded("citations' check", self._check, row, allowed, default=None,
                                 record=row["record_id"])  # fmt: skip
                if values is not None:
                    updates.append((row, values))
            out.setdefault(row["record_id"], []).append(self.state_of(row, values))
        if updates:  # the states are known now; not kept, they are checked again next time
            guarded("citations' check: keeping the states", self._write, updates, default=None)
        return out

    def factor(self, states: Sequence[CitationState]) -> float:
        """The score factor of an item with these citations (stale: changed or deleted)."""
        return self.stale_factor if any(s.status in STALE for s in states) else 1.0

    # ------------------------------------------------------------------ checking
    def _files_sha(self, row, info: os.stat_result) -> str | None:
        """The ingestion ``files`` table's sha of this file, when its row matches the stat."""
        bucket = bucket_of("team", row["project_id"], "")
        hit = self.store.reader.execute(
            "SELECT sha256, size, mtime_ns, checked_ns FROM files WHERE bucket=? AND path=?",
            (bucket, row["abs_path"]),
        ).fetchone()
        if (
            hit is not None
            and hit[1] == info.st_size
            and hit[2] == info.st_mtime_ns
            and info.st_mtime_ns + RACY_NS < hit[3]
        ):
            return hit[0]
        return None

    def _check(self, row, roots: Sequence[Path] | None = None) -> dict | None:
        """New state values for one citation row, or None when nothing changed. The file is
        read only inside ``roots`` (default: the root it was cited in) and never through a
        symlink: a cited file replaced by a link counts as deleted."""
        now_ns = time.time_ns()
        path = row["abs_path"]
        roots = [Path(row["root"])] if roots is None else roots
        try:
            info = os.lstat(path)
            if not st.S_ISREG(info.st_mode):
                raise FileNotFoundError(path)
        except (FileNotFoundError, NotADirectoryError):
            if row["status"] == "deleted":
                return None
            return dict(status="deleted", cur_start=None, cur_end=None, seen_sha=None,
                        seen_size=None, seen_mtime_ns=None, checked_ns=now_ns)  # fmt: skip
        except OSError:
            return None  # unreadable now: keep what we knew
        same_stat = (
            row["status"] != "deleted"
            and row["seen_size"] == info.st_size
            and row["seen_mtime_ns"] == info.st_mtime_ns
        )
        settled = info.st_mtime_ns + RACY_NS < row["checked_ns"]
        if same_stat and settled:
            return None
        data = None
        sha = self._files_sha(row, info)
        if sha is None or (
            sha not in (row["seen_sha"], row["sha256"]) and row["start_line"] is not None
        ):  # not known, or its lines are needed: read it (and hash what was read)
            try:
                data = read_within(path, roots, MAX_FILE_BYTES)
            except ValueError:
                data = b""  # over the cap: compared by hash alone (an empty read)
            except OSError:
                return None
            sha = sha256_bytes(data)
        if sha == row["seen_sha"] and row["status"] != "deleted":
            if same_stat and now_ns <= info.st_mtime_ns + RACY_NS:
                return None  # still too recent to trust the stat: read again next time
            values = {k: row[k] for k in _STATE}
            values.update(seen_size=info.st_size, seen_mtime_ns=info.st_mtime_ns,
                          checked_ns=now_ns)  # fmt: skip
            return values
        a = Anchor(row["start_line"], row["end_line"], row["lines_hash"], row["fingerprint"],
                   row["n_norm"], row["lead"], row["trail"], row["text"])  # fmt: skip
        lines = read_lines(data) if data is not None else None
        loc = locate(a, lines, sha, row["sha256"])
        return dict(status=loc.status, cur_start=loc.start, cur_end=loc.end, seen_sha=sha,
                    seen_size=info.st_size, seen_mtime_ns=info.st_mtime_ns,
                    checked_ns=now_ns)  # fmt: skip

    def _write(self, updates: list[tuple]) -> None:
        """Store new states (compare-and-set on the state read), one ``citations`` event per
        record whose status or current range changed."""
        sets = ", ".join(f"{k}=?" for k in _STATE)
        where = " AND ".join(f"{k} IS ?" for k in _STATE)
        with self.store.transaction() as conn:
            events: set[str] = set()
            for row, values in updates:
                n = conn.execute(
                    f"UPDATE citations SET {sets} WHERE record_id=? AND idx=? AND {where}",
                    [*(values[k] for k in _STATE), row["record_id"], row["idx"],
                     *(row[k] for k in _STATE)],
                ).rowcount  # fmt: skip
                if n and any(values[k] != row[k] for k in ("status", "cur_start", "cur_end")):
                    events.add(row["record_id"])
            self._events(conn, events)

    def _events(self, conn, record_ids: Iterable[str]) -> None:
        for rid in sorted(record_ids):
            rec = conn.execute(
                "SELECT kind, bucket, revision FROM records WHERE id=?", (rid,)
            ).fetchone()
            if rec is not None:
                self.store.log_change(conn, rid, "citations", rec[0], rec[1], rec[2])

    # ------------------------------------------------------------------ re-anchoring
    def reanchor(self, who, record_id: str) -> list[CitationInput]:
        """The record's citations as they should be cited now: moved ranges at their new
        lines, changed ones at the lines the code most likely went to (else the same lines,
        within the file), deleted files dropped."""
        out = []
        allowed = self.allowed(who) if getattr(who, "root", None) else []
        for row in self._rows(self.store.reader, [record_id]):
            if _inside(Path(row["abs_path"]), allowed) is None:
                raise AccessDenied(
                    f"cannot re-anchor {row['path']}: {row['abs_path']} is outside your "
                    "allowed directories",
                    path=row["path"],
                )
            status = self._check(row, allowed) or {k: row[k] for k in _STATE}
            if status["status"] == "deleted":
                continue
            start, end = row["start_line"], row["end_line"]
            if start is not None:
                if status["cur_start"] is not None:
                    start, end = status["cur_start"], status["cur_end"]
                else:
                    n = self._line_count(row["abs_path"], allowed)
                    start, end = (min(start, n), min(end, n)) if n else (None, None)
            out.append(CitationInput(path=row["abs_path"], startLine=start, endLine=end))
        return out

    @staticmethod
    def _line_count(path: str, roots: Sequence[Path]) -> int:
        try:
            return len(read_lines(read_within(path, roots, MAX_FILE_BYTES)) or [])
        except (OSError, ValueError):
            return 0

    def replace(self, conn, record_id: str, pending: Pending) -> None:
        """Inside a write transaction: the record's citations become ``pending``'s, with a
        ``citations`` event (confirm / re-anchor)."""
        pending.write(conn, [record_id], replace=True)
        self._events(conn, [record_id])

    def copier(self, source_id: str, target_id: str) -> Callable:
        """A transaction step copying ``source_id``'s citations to ``target_id`` (share)."""
        cols = _COLS.split(", ", 1)[1]

        def copy(conn) -> None:
            conn.execute(
                f"INSERT INTO citations(record_id, {cols}) SELECT ?, {cols} FROM citations "
                "WHERE record_id=?",
                (target_id, source_id),
            )

        return copy

    # ------------------------------------------------------------------ background
    def refresh_paths(self, paths: Iterable[str]) -> int:
        """Check every citation of these files now (the ingest hook runs this on the worker);
        returns how many citations changed state."""
        paths = list(dict.fromkeys(str(Path(p)) for p in paths))
        rows = []
        for i in range(0, len(paths), 500):
            part = paths[i : i + 500]
            ids = [
                r[0]
                for r in self.store.reader.execute(
                    "SELECT DISTINCT record_id FROM citations WHERE abs_path IN "
                    f"({','.join('?' * len(part))})",
                    part,
                )
            ]
            wanted = set(part)
            rows += [r for r in self._rows(self.store.reader, ids) if r["abs_path"] in wanted]
        updates = [(row, v) for row in rows if (v := self._check(row)) is not None]
        if updates:
            self._write(updates)
        return len(updates)

    def refresh_later(self, paths: Iterable[str]) -> Future:
        """:meth:`refresh_paths` on the background worker (ingest calls this after a batch)."""
        paths = list(paths)
        with self._worker_lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="citations")
            fut = self._worker.submit(self.refresh_paths, paths)
            self._pending = [f for f in self._pending if not f.done()] + [fut]
        return fut

    def wait_idle(self, timeout: float | None = None) -> None:
        """Wait for the background refreshes submitted so far."""
        with self._worker_lock:
            pending = list(self._pending)
        for fut in pending:
            fut.result(timeout)

    def close(self) -> None:
        with self._worker_lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)
