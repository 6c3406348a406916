"""Writing imported items: memories in batches through the write policy, the knowledge graph
through ``import-graph``'s own merge.

A memory item becomes a ``memory`` record of the target scope. Its id is derived from the
source, the item's source id and the target bucket (:func:`record_id`), so a record already
there means "imported before": a second run writes nothing and a stopped run resumes. Its
dates are the source's; its category follows its source kind (team and public: decisions,
architecture or learnings; private and personal: longterm); its metadata keeps the title,
source kind, author, source project, tags (the first ten; the rest in ``sourceFields``),
every other source field, ``relatedTo`` links and the provenance
(``source: "imported from claude-mem, id observation:42"``).

Each record passes the write policy (:meth:`Engine.screen_record`) as a write no person reads
item by item (``trust.policy.unattended("import")``): a secret is stored redacted whatever the
store's policy (``warn`` and off become ``redact``), and the report lists the warnings to the
person who ran the import; under ``block`` a secret or an instruction refuses that item alone
(counted). Items too long
for a record (32 KB), empty, or with the same text as a memory already in the bucket (or
earlier in the source) are skipped and counted. Each batch is one transaction that re-checks,
inside it, the limits and that its ids are still free.

Entities, relations and lessons go through :func:`graph.compat.import_rows` (new entities
created, existing ones given the observations they lack; a relation whose endpoint is in
neither the graph nor the source kept pending, ``graph.pending``), with each entity's date and
provenance kept on its observations (``graph.common.Origin``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from ingest.importers.items import EntityItem, Item, LessonItem, MemoryItem, RelationItem
from ingest.workspace.pipeline import Progress
from retrieval.records import Kind, Record, Scope, check_text
from server.service.core import scopes as rules
from server.service.core.errors import Conflict, InvalidInput, LimitExceeded
from server.service.core.identity import Identity
from server.service.graphs.graph_services import GraphServices
from server.service.memories.memory import MemoryService
from server.service.transfers.import_from import (
    ImportFromResult,
    ImportPart,
    fold,
    read_source,
    reason,
    source_name,
)
from server.service.transfers.import_graph import GraphImport
from server.service.trust.policy import unattended

BATCH = 256  # memories per transaction
NAMESPACE = uuid.UUID("5f2b6a3e-8d0c-4e1f-9a57-2c4b7d9e0f13")  # of imported record ids
DECISIONS = {"decision", "decisions", "adr", "tool_choice", "approach", "configuration"}
ARCHITECTURE = {"architecture", "design", "pattern", "design_pattern", "refactor"}
SAMPLE_CHARS = 160


def record_id(source: str, source_id: str, bucket: str) -> str:
    """The id of an imported record: the same source item into the same bucket, the same id."""
    return str(uuid.uuid5(NAMESPACE, f"{source}\x00{bucket}\x00{source_id}"))


def category_for(scope: Scope, kind: str | None) -> str:
    """Our category for a source kind: team/public by meaning, private/personal longterm (never
    a category with a TTL: an old record would expire at once)."""
    if scope in (Scope.private, Scope.personal):
        return "longterm"
    k = (kind or "").strip().lower()
    if k in DECISIONS or k.startswith("decision"):
        return "decisions"
    if k in ARCHITECTURE:
        return "architecture"
    return "learnings"


def short(text: str, n: int = SAMPLE_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def label(item: Item) -> str:
    """The item's kind as its source names it (report keys)."""
    if isinstance(item, MemoryItem):
        return item.category or "memory"
    return item.kind


def texts_of(item: MemoryItem) -> list[str]:
    """The texts of an item the write policy reads: its content, title and every string of
    its fields."""
    out = [item.content, item.title or ""]
    stack: list = [item.fields]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            stack += list(value.values())
        elif isinstance(value, list):
            stack += value
    return [t for t in out if t]


def metadata_for(item: MemoryItem, source: str, bucket: str) -> dict:
    tags, more = [], []
    for tag in dict.fromkeys(t.strip() for t in item.tags if t and t.strip()):
        (tags if len(tag) <= rules.MAX_TAG_CHARS and len(tags) < rules.MAX_TAGS else more).append(
            tag
        )
    fields = dict(item.fields)
    if more:
        fields["moreTags"] = more
    meta: dict = {"source": f"imported from {source}, id {item.sourceId}",
                  "importedFrom": source, "sourceId": item.sourceId}  # fmt: skip
    for key, value in (("tags", tags), ("title", item.title), ("sourceKind", item.category),
                       ("author", item.author), ("sourceProject", item.project)):  # fmt: skip
        if value:
            meta[key] = value
    if item.related:
        meta["relatedTo"] = [record_id(source, r, bucket) for r in dict.fromkeys(item.related)]
    if fields:
        meta["sourceFields"] = fields
    return rules.check_metadata(meta)


class MemoryImport(ImportPart):
    """Imports the memory items of one run (see the module docstring)."""

    _hashes: dict[str, str] | None = None  # content hash -> record id in the bucket

    @property
    def svc(self) -> MemoryService:
        return self.backend

    def hashes(self) -> dict[str, str]:
        if self._hashes is None:
            rows = self.svc.store.reader.execute(
                "SELECT content_hash, id FROM records WHERE bucket=? AND kind='memory'",
                (self.bucket,),
            ).fetchall()
            self._hashes = {r[0]: r[1] for r in rows}
        return self._hashes

    def build(self, item: MemoryItem, now: datetime) -> Record:
        check_text(item.content, "content")
        context = item.title if item.title and item.title.strip() not in item.content else ""
        created = item.createdAt or now
        return Record(
            id=record_id(self.source, item.sourceId, self.bucket), kind=Kind.memory,
            project_id=self.who.project_id, agent_id=self.who.agent_id, scope=self.scope,
            category=category_for(self.scope, item.category), content=item.content,
            context=context, metadata=metadata_for(item, self.source, self.bucket),
            created_at=created, updated_at=item.updatedAt or created,
        )  # fmt: skip

    def batch(self, items: list[MemoryItem]) -> None:
        """Screen ``items`` and write those that are new, in one transaction."""
        res, now = self.res, self.svc.clock()
        ids = {record_id(self.source, i.sourceId, self.bucket): i for i in items}
        there = self.svc.store.get(list(ids))
        todo: list[tuple[MemoryItem, Record]] = []
        # the injection model reads every text of the batch (contents, titles, the source's
        # fields) from one embedding call, and the index reuses the contents' vectors
        with self.svc.policy.batched([t for i in items for t in texts_of(i)]):
            for rid, item in ids.items():
                if rid in there:
                    res.alreadyImported += 1
                    continue
                try:
                    rec = self.build(item, now)
                    dup = self.hashes().get(rec.current_hash())
                    if dup is not None:
                        res.skip(item.sourceId, f"duplicate of {dup}")
                        continue
                    rec, warnings = self.svc.engine.screen_record(rec)
                except InvalidInput as exc:
                    res.skip(item.sourceId, reason(exc))
                    continue
                res.warn([f"{item.sourceId}: {w}" for w in warnings])
                self.hashes()[rec.current_hash()] = rec.id
                todo.append((item, rec))
            skipped_dups = len(items) - len(ids)  # the same source id twice in one batch
            for _ in range(skipped_dups):
                res.skip("(repeated)", "duplicate source id")
            if not self.dry_run and todo:
                todo = self.write(todo)
        for item, rec in todo:
            res.created["memory"] = res.created.get("memory", 0) + 1
            key = label(item)
            res.byKind[key] = res.byKind.get(key, 0) + 1
            where = f"{rec.scope.value}/{rec.category}"
            res.categories[where] = res.categories.get(where, 0) + 1
            res.samples.setdefault(key, short(rec.content))

    def write(self, todo: list[tuple[MemoryItem, Record]]) -> list[tuple[MemoryItem, Record]]:
        """One transaction; what the limits leave out is skipped; an id taken meanwhile (a
        concurrent run of the same import) is imported already."""
        svc, who = self.svc, self.who
        for _ in range(3):
            recs = [r for _, r in todo]
            try:
                svc.engine.apply(
                    add=recs,
                    check=svc.checks(svc.absent_check([r.id for r in recs]),
                                     svc.limits_check(who, recs)),
                )  # fmt: skip
                return todo
            except Conflict:
                there = svc.store.get([r.id for r in recs])
                self.res.alreadyImported += len(there)
                todo = [(i, r) for i, r in todo if r.id not in there]
            except LimitExceeded:
                fit, over = svc.fitting(who, [r for _, r in todo])
                keep = {r.id for r in fit}
                for item, rec in todo:
                    if rec.id not in keep:
                        self.res.skip(item.sourceId, f"limit ({over[0] if over else ''})")
                todo = [(i, r) for i, r in todo if r.id in keep]
            if not todo:
                return []
        raise Conflict("the store kept changing while the import was writing; run it again")


def import_items(
    svc: MemoryService, graphs: GraphServices, who: Identity, source: str,
    items: list[Item], scope: str | None = None, *, dry_run: bool = False,
    progress: Callable[[Progress], None] | None = None, stop: threading.Event | None = None,
) -> ImportFromResult:  # fmt: skip
    """Write ``items`` (read from ``source``) into ``scope`` (default team) as ``who``, as a
    write no person reads item by item (secrets at least redacted, see the module docstring)."""
    with unattended("import"):
        return _import_items(svc, graphs, who, source, items, scope, dry_run=dry_run,
                             progress=progress, stop=stop)  # fmt: skip


def _import_items(
    svc: MemoryService, graphs: GraphServices, who: Identity, source: str,
    items: list[Item], scope: str | None, *, dry_run: bool,
    progress: Callable[[Progress], None] | None, stop: threading.Event | None,
) -> ImportFromResult:  # fmt: skip
    started = time.monotonic()
    try:
        sc = Scope(scope or "team")
    except ValueError:
        raise InvalidInput(
            f"invalid scope {scope!r}: use team (default), private, personal or public"
        ) from None
    res = ImportFromResult(source=source, scope=sc.value, dryRun=dry_run, read=len(items))
    memories = [i for i in items if isinstance(i, MemoryItem)]
    graph_items = [i for i in items if isinstance(i, EntityItem | RelationItem | LessonItem)]
    total, done = len(items), 0

    def report(phase: str = "import") -> None:
        if progress is not None:
            elapsed = time.monotonic() - started
            progress(Progress(done, total, res.imported, elapsed, phase))

    writer = MemoryImport(svc, who, source, sc, dry_run, res)
    report()
    for part in writer.parts(memories, BATCH, stop):
        writer.batch(part)
        done += len(part)
        report()
    if graph_items and not res.interrupted:
        gi = GraphImport(graphs, who, source, sc, dry_run, res)
        # the injection model reads every observation from one embedding call (none on a dry
        # run: nothing is screened by the model there)
        held = [] if dry_run else [o for i in graph_items if isinstance(i, EntityItem)
                                   for o in i.observations]  # fmt: skip
        with svc.policy.batched(held):
            for n in gi.run(graph_items, stop):
                done += n
                report()
    res.seconds = round(time.monotonic() - started, 3)
    done = total if not res.interrupted else done
    report("done")
    return res


def import_source(
    svc: MemoryService, graphs: GraphServices, who: Identity, source: str, path: str | Path,
    scope: str | None = None, *, dry_run: bool = False, source_project: str | None = None,
    progress: Callable[[Progress], None] | None = None, stop: threading.Event | None = None,
) -> ImportFromResult:  # fmt: skip
    """Read ``path`` as ``source`` and import what it holds (see :func:`import_items`)."""
    name = source_name(source)
    read = read_source(name, path, source_project)
    res = import_items(svc, graphs, who, name, read.items, scope, dry_run=dry_run,
                       progress=progress, stop=stop)  # fmt: skip
    res.path = str(Path(path).expanduser())
    return fold(res, read)


__all__ = ["BATCH", "MemoryImport", "category_for", "import_items", "import_source", "record_id"]
