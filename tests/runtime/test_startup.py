"""The daemon's start-up: cyclic garbage collection is off while it imports and builds its
server (the objects it makes live as long as the daemon), and back on, with those objects
frozen, once it serves."""

from __future__ import annotations

import gc

from server.http.daemon import _serving


class FakeRuntime:
    def __init__(self) -> None:
        self.vectors_started = False

    def start_vectors(self) -> None:
        self.vectors_started = True


def test_serving_resumes_collection_with_the_start_up_objects_frozen():
    was = gc.isenabled()
    gc.disable()
    frozen = gc.get_freeze_count()
    keep = [[i] for i in range(1000)]  # objects made during "start-up"
    rt = FakeRuntime()
    try:
        _serving(rt)
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(keep)
        assert rt.vectors_started
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()
