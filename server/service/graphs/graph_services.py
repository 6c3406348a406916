"""The knowledge-graph and lesson services of a memory service: one pair per store, built
once by the :class:`~server.service.core.runtime.Runtime` (``rt.graphs``), since the graph service's
lock must be the only one serialising that store's graph writes in the process.

``graph/`` knows nothing of identities' origin or write policies; this is where the server's
rules are plugged in: the memory service's clock, and its write policy (secrets, injection) for
every observation and lesson text, so each text gets its own warning and lesson fields kept
outside the record are redacted too. The records themselves pass the same policy in the engine.
Its citations of code are plugged in too (observations and lessons cite files like memories).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from graph.common import Caller, parse_scope
from graph.compat import export_rows, import_rows, jsonl_text, pending_rows
from graph.entities import GraphService
from graph.lessons import LessonService
from graph.models import (
    ExportGraphResult,
    ImportGraphResult,
    MarkedGraph,
    MarkedGraphPage,
    MarkedSearchNodesResult,
)
from graph.search import search_nodes
from graph.withheld import Flag, mark_graph
from ingest.importers.export_files import write_paths
from ingest.importers.json_rows import read_rows
from server.service.memories.memory import MemoryService
from server.service.recalling.withheld import read_flag


@dataclass
class GraphServices:
    """The graph and lesson services of one store, and the operations that span both or rank
    (the faces call these, never ``graph.search`` or ``graph.compat`` around the services)."""

    graph: GraphService
    lessons: LessonService
    flag: Flag | None = None  # the check of stored names and types when read (graph.withheld)

    def search_nodes(
        self, who: Caller, query: str, scope: str | None = None, limit: int = 10,
        include_suspicious: bool = False,
    ) -> MarkedSearchNodesResult:  # fmt: skip
        """Entities ranked by hybrid relevance over names, types and observations; what the
        write policy flagged left out unless ``include_suspicious`` (``graph.withheld``)."""
        return search_nodes(self.graph, who, query, scope, limit, flag=self.flag,
                            include_suspicious=include_suspicious)  # fmt: skip

    def read_graph(
        self, who: Caller, scope: str | None = None, cursor: str | None = None,
        limit: int = 100, include_suspicious: bool = False,
    ) -> MarkedGraphPage:  # fmt: skip
        """A page of the graph, what is flagged left out or marked (``graph.withheld``)."""
        page = self.graph.read_graph(who, scope, cursor, limit)
        bucket = who.bucket(parse_scope(scope).value)
        return mark_graph(self.graph, bucket, page, self.flag, include_suspicious)

    def open_nodes(
        self, who: Caller, names: list[str], scope: str | None = None,
        include_suspicious: bool = False,
    ) -> MarkedGraph:  # fmt: skip
        """Entities by name, what is flagged left out or marked (``graph.withheld``)."""
        found = self.graph.open_nodes(who, names, scope)
        bucket = who.bucket(parse_scope(scope).value)
        return mark_graph(self.graph, bucket, found, self.flag, include_suspicious)

    def import_files(
        self, who: Caller, paths: Iterable[str | Path], scope: str | None = None
    ) -> ImportGraphResult:
        """The official server's memory.jsonl and/or the lessons fork's lesson.json."""
        rows = [row for p in paths for row in read_rows(p)]
        return import_rows(self.graph, self.lessons, who, rows, scope)

    def export_files(
        self,
        who: Caller,
        path: str | Path,
        lessons_path: str | Path | None = None,
        scope: str | None = None,
        *,
        force: bool = False,
    ) -> ExportGraphResult:
        """The graph as the official memory.jsonl (lessons inline, or in ``lessons_path``),
        written as every export is (``ingest.importers.export_files``): an existing file is
        refused unless ``force``, which keeps it as a backup first."""
        rows, lesson_docs = export_rows(
            self.graph, self.lessons, who, scope, with_lessons=lessons_path is None
        )
        waiting = pending_rows(self.graph, who, scope)  # the official server keeps them
        rows += waiting
        files = [(path, jsonl_text(rows))]
        if lessons_path is not None:
            files.append((lessons_path, jsonl_text(lesson_docs)))
        done = write_paths(files, force=force)
        return ExportGraphResult(
            path=str(Path(path).expanduser().absolute()),
            entities=sum(r["type"] == "entity" for r in rows)
            + (len(lesson_docs) if lessons_path else 0),
            relations=sum(r["type"] == "relation" for r in rows) - len(waiting),
            pending=len(waiting),
            lessons=len(lesson_docs),
            backups=done.backups,
        )


def graph_services(svc: MemoryService) -> GraphServices:
    """New graph and lesson services over ``svc``'s engine, with its clock and write policy
    (the runtime builds the one pair a process uses)."""
    graph = GraphService(
        svc.engine, clock=svc.clock, screen=svc.policy.screen_text, cite=svc.citations
    )
    return GraphServices(graph, LessonService(graph), read_flag(svc.policy))
