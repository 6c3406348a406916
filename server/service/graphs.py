"""The knowledge-graph and lesson services of a memory service (one pair per store).

``graph/`` knows nothing of identities' origin or write policies; this is where the server's
rules are plugged in: the memory service's clock, and its write policy (secrets, injection) for
every observation and lesson text, so each text gets its own warning and lesson fields kept
outside the record are redacted too. The records themselves pass the same policy in the engine.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from graph.entities import GraphService
from graph.lessons import LessonService

from .memory import MemoryService


@dataclass
class GraphServices:
    graph: GraphService
    lessons: LessonService


_cache: weakref.WeakKeyDictionary[MemoryService, GraphServices] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def graph_services(svc: MemoryService) -> GraphServices:
    with _lock:
        found = _cache.get(svc)
        if found is None:
            graph = GraphService(
                svc.engine,
                clock=svc.clock,
                screen=svc.policy.screen_text,
            )
            found = _cache[svc] = GraphServices(graph, LessonService(graph))
        return found
