"""The incremental ingestion pipeline: walk -> read/hash/chunk -> embed -> write, overlapped.

Three stages run at once, connected by bounded queues:
1. a reader thread takes the walked files whose ``stat`` differs from their ``files`` row,
   reads and hashes them (a file whose sha256 is unchanged only has its row refreshed: no
   chunking, no embedding), chunks it, and stores the version as an artifact when the write
   policy kept its chunks as they are (a refused or redacted file's bytes are not kept);
2. an embedder thread gathers chunks of several files into one large ``embed_documents`` call
   (the model sorts a batch by length, so big batches waste little on padding), reusing the
   stored vectors of chunks whose text did not change;
3. the calling thread writes: one ``Engine.apply`` per embedded batch deletes the files' old
   chunks, inserts the new ones with their vectors and upserts their ``files`` rows, in one
   transaction. Vanished (or newly ignored) files lose their chunks the same way.

After each committed batch, ``on_change`` (when given) receives the absolute paths of the files
whose content changed or that vanished: the server re-checks the citations of those files in
the background (``ingest`` knows nothing of citations; ``server/service/transfers/workspace.py`` passes
the callback).

Every batch commits on its own, so an interrupt (Ctrl-C, SIGKILL) loses at most the batches in
flight; the next run sees the committed rows and resumes. One ingestion runs per store at a
time (``<home>/ingest.lock``).

Chunks pass the engine's write policy (``Engine.screen_record``) in stage 1, before they are
embedded: a file the policy refuses (a secret under ``PATTERN_SECRET_POLICY=block``, an
injection under ``PATTERN_INJECTION_POLICY=block``) is skipped whole, listed in the report with
the reason ``secret`` (or ``injection``), and loses the chunks of its earlier version; under
``redact`` the redacted chunks are stored; warnings are listed per file (``policy_warnings``). The policy's signature
is part of a file's row, so changing the policy re-reads every file.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from ingest.workspace import filetable as ft
from ingest.workspace.artifacts import ArtifactStore, sha256_bytes
from ingest.workspace.chunkers import MAX_CHARS, MIN_CHARS, OVERLAP_LINES, Chunk, chunk_text
from ingest.workspace.walker import DEFAULT_MAX_FILE_KB, Candidate, Walker, decode_text, read_bytes
from retrieval.engine import Engine
from retrieval.errors import Conflict, PatternError
from retrieval.records import Kind, Record, Scope
from retrieval.storage import locks
from retrieval.storage.buckets import bucket_of

CATEGORY = "chunk"
_DONE = object()


class SkippedFile(BaseModel):
    path: str
    reason: str


class IngestReport(BaseModel):
    root: str
    files_seen: int = Field(0, description="Files the walk accepted.")
    files_indexed: int = Field(0, description="New or changed files (re)chunked and embedded.")
    files_unchanged: int = 0
    files_removed: int = Field(0, description="Vanished or newly ignored files dropped.")
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = Field(0, description="Chunks whose vectors were computed this run.")
    skipped: list[SkippedFile] = Field(default_factory=list)
    errors: list[SkippedFile] = Field(default_factory=list)
    policy_warnings: list[SkippedFile] = Field(
        default_factory=list,
        description="Files stored with write-policy warnings (a secret kept or redacted, text "
        "flagged as suspicious), one entry per file.",
    )
    seconds: float = 0.0
    timings: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds per stage (walk, read = read+hash+chunk, embed, write); the "
        "read and embed stages run beside the write stage.",
    )
    interrupted: bool = False
    write_warnings: list[str] = Field(
        default_factory=list,
        description="Writes that committed with a warning (the vector index catching up).",
    )


@dataclass
class Progress:
    files_done: int
    files_total: int
    chunks: int
    elapsed: float
    phase: str = "ingest"

    @property
    def rate(self) -> float:
        return self.chunks / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class IngestOptions:
    max_file_bytes: int = DEFAULT_MAX_FILE_KB * 1024
    max_chars: int = MAX_CHARS
    min_chars: int = MIN_CHARS
    overlap: int = OVERLAP_LINES
    # words per chunk: with its context line it stays one embedding window (MiniLM: 153 words)
    max_words: int = 128
    embed_batch: int = 512  # chunks per embedding call
    max_batch_files: int = 64  # files per transaction

    @property
    def chunker(self) -> str:
        return f"v1/{self.max_chars}/{self.min_chars}/{self.overlap}/{self.max_words}"


@dataclass
class _Job:
    """One file's outcome of stage 1: a new row and (for a changed file) its chunk records."""

    cand: Candidate
    row: ft.FileRow
    old: ft.FileRow | None
    records: list[Record] = field(default_factory=list)
    touch_only: bool = False  # same content: refresh the row, keep the chunks
    warnings: list[str] = field(default_factory=list)  # the write policy's, for this file


class IngestLock:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / "ingest.lock"
        self.fd: int | None = None

    def __enter__(self) -> IngestLock:
        try:
            self.fd = locks.acquire(self.path)
        except locks.Held:
            raise Conflict(
                "another ingestion is running on this store; try again when it ends"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            locks.release(self.fd)
            self.fd = None


class Ingestor:
    """Ingests workspace folders into one engine, as chunk records of a project's team scope."""

    def __init__(
        self,
        engine: Engine,
        project_id: str,
        agent_id: str,
        options: IngestOptions | None = None,
        *,
        ready: Callable[[], object] | None = None,
        on_change: Callable[[list[str]], object] | None = None,
    ) -> None:
        self.engine = engine
        self.on_change = on_change  # told the files a committed batch changed or removed
        self.project_id = project_id
        self.agent_id = agent_id
        self.options = options or IngestOptions()
        self.bucket = bucket_of(Scope.team, project_id, agent_id)
        self.artifacts = ArtifactStore(engine.home)
        self._ready = ready  # waits for the embedding model before the first embed

    # ------------------------------------------------------------------ records
    def records_for(self, cand: Candidate, sha: str, chunks: list[Chunk]) -> list[Record]:
        path = str(cand.path)
        lang = cand.rel.rsplit(".", 1)[-1].lower() if "." in cand.rel else ""
        out = []
        for i, c in enumerate(chunks):
            out.append(
                Record(
                    id=ft.chunk_id(self.bucket, path, sha, i),
                    kind=Kind.chunk,
                    project_id=self.project_id,
                    agent_id=self.agent_id,
                    scope=Scope.team,
                    category=CATEGORY,
                    content=c.text,
                    context=f"{cand.rel}: {c.title}" if c.title else cand.rel,
                    metadata={
                        "path": cand.rel,
                        "start_line": c.start_line,
                        "end_line": c.end_line,
                        "sha256": sha,
                        "title": c.title,
                        "file": path,
                        "lang": lang,
                        "source": "workspace",
                    },
                )  # fmt: skip
            )
        return out

    # ------------------------------------------------------------------ stage 1
    def _read(self, cand: Candidate, old: ft.FileRow | None, root: Path) -> _Job:
        opts = self.options
        now = time.time_ns()

        def row(sha: str, chunks: int, state: str, reason: str | None) -> ft.FileRow:
            return ft.FileRow(
                str(cand.path), sha, cand.size, cand.mtime_ns, chunks, state, reason,
                self._version, now,
            )  # fmt: skip

        data = read_bytes(cand.source, root, opts.max_file_bytes)
        sha = sha256_bytes(data)
        if old is not None and old.sha256 == sha and old.chunker == self._version:
            return _Job(cand, row(sha, old.chunks, old.state, old.reason), old, touch_only=True)
        text = decode_text(data)
        if text is None:
            return _Job(cand, row(sha, 0, ft.SKIPPED, "binary (NUL byte or not UTF-8)"), old)
        chunks = chunk_text(
            cand.rel, text, max_chars=opts.max_chars, min_chars=opts.min_chars,
            overlap=opts.overlap, max_words=opts.max_words,
        )  # fmt: skip
        given = self.records_for(cand, sha, chunks)
        try:  # the write policy, before embedding: what is embedded is what is stored
            screened = [self.engine.screen_record(r) for r in given]
        except PatternError as exc:
            reason = str(exc.data.get("policy") or exc.message)
            return _Job(cand, row(sha, 0, ft.SKIPPED, reason), old)
        records = [r for r, _ in screened]
        if all(
            r.content == g.content and r.context == g.context
            for r, g in zip(records, given, strict=True)
        ):
            # the exact bytes are kept only when the policy kept every chunk's text as it is
            # (a refused or redacted file's raw text is never stored)
            self.artifacts.put(data, sha)
        warnings = list(dict.fromkeys(w for _, found in screened for w in found))
        return _Job(cand, row(sha, len(records), ft.INDEXED, None), old, records, False, warnings)

    def _reader(self, todo, rows, root, out_q, report, stop) -> None:
        try:
            for cand in todo:
                if stop.is_set():
                    return
                t = time.perf_counter()
                try:
                    job = self._read(cand, rows.get(str(cand.path)), root)
                except (OSError, ValueError) as exc:
                    report.errors.append(SkippedFile(path=cand.rel, reason=str(exc)))
                    continue
                finally:
                    self._timings["read"] += time.perf_counter() - t
                out_q.put(job)
        finally:
            out_q.put(_DONE)

    # ------------------------------------------------------------------ stage 2
    def _reuse(self, jobs: list[_Job]) -> dict[str, object]:
        """Stored vectors of a changed file's chunks whose text (and context) did not change."""
        model = getattr(self.engine.embedder, "model_id", None)
        old_ids = [i for j in jobs if j.old and j.records for i in j.old.chunk_ids(self.bucket)]
        if not model or not old_ids:
            return {}
        olds = self.engine.store.get(old_ids)
        vecs = self.engine.store.embeddings(list(olds), model)
        by_hash = {olds[i].content_hash: v for i, v in vecs.items()}
        return {
            r.id: by_hash[r.content_hash]
            for j in jobs
            for r in j.records
            if r.content_hash in by_hash
        }

    def _embedder(self, in_q, out_q, stop) -> None:
        opts = self.options
        done = False
        try:
            while not done and not stop.is_set():
                batch: list[_Job] = []
                n = 0
                while n < opts.embed_batch and len(batch) < opts.max_batch_files:
                    job = in_q.get()
                    if job is _DONE:
                        done = True
                        break
                    batch.append(job)
                    n += len(job.records)
                if not batch:
                    break
                vectors: dict = {}
                fresh = [r for j in batch for r in j.records]
                if fresh and self.engine.embedder is None and self._ready is not None:
                    self._ready()
                if fresh and self.engine.embedder is not None:
                    t = time.perf_counter()
                    vectors = self._reuse(batch)
                    todo = [r for r in fresh if r.id not in vectors]
                    vectors.update(self.engine.embed(todo))
                    self._embedded += len(todo)
                    self._timings["embed"] += time.perf_counter() - t
                out_q.put((batch, vectors))
        except BaseException as exc:  # surfaced by the writer
            out_q.put(exc)
        finally:
            out_q.put(_DONE)

    # ------------------------------------------------------------------ stage 3
    def _write(self, jobs: list[_Job], vectors: dict, removed: list[ft.FileRow]) -> int:
        add = [r for j in jobs for r in j.records if not j.touch_only]
        delete = [i for row in removed for i in row.chunk_ids(self.bucket)]
        for j in jobs:
            if j.old is not None and not j.touch_only:
                delete.extend(j.old.chunk_ids(self.bucket))
        new_rows = [j.row for j in jobs]
        gone_paths = [r.path for r in removed]

        def check(conn):
            ft.delete_rows(conn, self.bucket, gone_paths)
            ft.put_rows(conn, self.bucket, new_rows)

        t = time.perf_counter()
        done = self.engine.apply(add=add, delete=delete, check=check, vectors=vectors)
        self._warnings.update(dict.fromkeys(done.warnings))
        self._timings["write"] += time.perf_counter() - t
        changed = [j.row.path for j in jobs if not j.touch_only] + gone_paths
        if changed and self.on_change is not None:
            self.on_change(changed)
        return len(delete)

    # ------------------------------------------------------------------ run
    def run(
        self,
        root: str | Path,
        progress: Callable[[Progress], None] | None = None,
        stop: threading.Event | None = None,
    ) -> IngestReport:
        root = Path(root).resolve()
        with IngestLock(self.engine.home):
            return self._run(root, progress or (lambda p: None), stop or threading.Event())

    @property
    def _version(self) -> str:
        """What a file's chunks depend on besides its bytes: the chunker and the write policy."""
        policy = getattr(self.engine.screen, "signature", "")
        return f"{self.options.chunker}|{policy}" if policy else self.options.chunker

    def _run(self, root: Path, progress, stop: threading.Event) -> IngestReport:
        t0 = time.perf_counter()
        opts = self.options
        self._timings = {"walk": 0.0, "read": 0.0, "embed": 0.0, "write": 0.0}
        walk = Walker(root, max_file_bytes=opts.max_file_bytes, exclude=[self.engine.home]).walk()
        report = IngestReport(root=str(root), files_seen=len(walk.files))
        report.skipped = [SkippedFile(path=s.rel, reason=s.reason) for s in walk.skipped]
        rows = ft.rows_under(self.engine.store.reader, self.bucket, str(root))
        seen = {str(c.path) for c in walk.files}
        removed = [r for p, r in rows.items() if p not in seen]
        todo: list[Candidate] = []
        for cand in walk.files:
            row = rows.get(str(cand.path))
            if row is not None and row.unchanged(cand.size, cand.mtime_ns, self._version):
                report.files_unchanged += 1
                if row.state == ft.SKIPPED:
                    report.skipped.append(SkippedFile(path=cand.rel, reason=row.reason or ""))
            else:
                todo.append(cand)
        total = len(walk.files)
        done = report.files_unchanged
        self._timings["walk"] = time.perf_counter() - t0
        self._embedded = 0
        self._warnings: dict[str, None] = {}
        elapsed = lambda: time.perf_counter() - t0  # noqa: E731
        progress(Progress(done, total, 0, elapsed()))
        for i in range(0, len(removed), opts.max_batch_files):
            part = removed[i : i + opts.max_batch_files]
            report.chunks_removed += self._write([], {}, part)
            report.files_removed += len(part)
        if todo:
            halt = threading.Event()  # stops the helper threads (``stop`` is the caller's)
            read_q: queue.Queue = queue.Queue(maxsize=opts.max_batch_files * 4)
            emb_q: queue.Queue = queue.Queue(maxsize=2)
            threads = [
                threading.Thread(
                    target=self._reader, args=(todo, rows, root, read_q, report, halt),
                    name="ingest-read", daemon=True,
                ),
                threading.Thread(
                    target=self._embedder, args=(read_q, emb_q, halt), name="ingest-embed",
                    daemon=True,
                ),
            ]  # fmt: skip
            for t in threads:
                t.start()
            try:
                while (item := emb_q.get()) is not _DONE:
                    if isinstance(item, BaseException):
                        raise item
                    jobs, vectors = item
                    report.chunks_removed += self._write(jobs, vectors, [])
                    for j in jobs:
                        if j.touch_only:
                            report.files_unchanged += 1
                            if j.row.state == ft.SKIPPED:
                                report.skipped.append(
                                    SkippedFile(path=j.cand.rel, reason=j.row.reason or "")
                                )
                        elif j.row.state == ft.SKIPPED:
                            report.skipped.append(
                                SkippedFile(path=j.cand.rel, reason=j.row.reason or "")
                            )
                        else:
                            report.files_indexed += 1
                            report.chunks_added += len(j.records)
                            if j.warnings:
                                report.policy_warnings.append(
                                    SkippedFile(path=j.cand.rel, reason=_summary(j.warnings))
                                )
                    done += len(jobs)
                    progress(Progress(done, total, report.chunks_added, elapsed()))
                    if stop.is_set():
                        report.interrupted = True
                        break
            except BaseException:
                report.interrupted = True
                raise
            finally:
                halt.set()
                _drain(read_q)
                _drain(emb_q)
                for t in threads:
                    t.join(timeout=0.2 if report.interrupted else None)
        report.chunks_embedded = self._embedded
        report.write_warnings = list(self._warnings)
        report.timings = {k: round(v, 3) for k, v in self._timings.items()}
        report.seconds = round(time.perf_counter() - t0, 3)
        with self.engine.store.transaction() as conn:  # the workspace page lists the roots
            ft.record_run(conn, self.bucket, str(root), report.model_dump_json())
        progress(Progress(done, total, report.chunks_added, elapsed(), phase="done"))
        return report


def _summary(warnings: list[str], most: int = 3) -> str:
    more = f" (+{len(warnings) - most} more)" if len(warnings) > most else ""
    return "; ".join(warnings[:most]) + more


def _drain(q: queue.Queue) -> None:
    try:
        while True:
            q.get_nowait()
    except queue.Empty:
        pass
