"""The knowledge-graph and lesson services of a memory service (one pair per store).

``graph/`` knows nothing of identities' origin or secret policies; this is where the server's
rules are plugged in: the memory service's clock, and its secret policy for every observation
and lesson text (warn / block / redact, like ``remember``).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from graph.entities import GraphService
from graph.lessons import LessonService

from .memory import MemoryService
from .secrets import apply_policy


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
                screen=lambda text: apply_policy(text, svc.secret_policy),
            )
            found = _cache[svc] = GraphServices(graph, LessonService(graph))
        return found
