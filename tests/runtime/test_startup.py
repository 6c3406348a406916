"""The daemon's start-up: cyclic garbage collection is off while it imports and builds its
server (the objects it makes live as long as the daemon), and back on, with those objects
frozen, once it serves; what the first answer does not need (the vector index's process, the
MCP tools not built yet) starts after that answer."""

from __future__ import annotations

import gc
import threading
import time
from types import SimpleNamespace

from server.http import after_start
from server.http.after_start import serving


class FakeRuntime:
    def __init__(self) -> None:
        self.vectors_started = threading.Event()
        self.model_ready = threading.Event()
        self.engine = SimpleNamespace(answered=threading.Event())

    def start_vectors(self) -> None:
        self.vectors_started.set()


def test_serving_resumes_collection_with_the_start_up_objects_frozen():
    was = gc.isenabled()
    gc.disable()
    frozen = gc.get_freeze_count()
    keep = [[i] for i in range(1000)]  # objects made during "start-up"
    rt = FakeRuntime()
    try:
        serving(rt)
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(keep)
        rt.model_ready.set()
        rt.engine.answered.set()
        assert rt.vectors_started.wait(5)
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()


def test_the_vector_index_and_the_rest_start_after_the_first_answer(monkeypatch):
    monkeypatch.setattr(after_start, "FIRST_ANSWER_WAIT_S", 30.0)
    rt, later = FakeRuntime(), threading.Event()
    done = threading.Thread(target=after_start.after_first_answer, args=(rt, (later.set,)))
    done.start()
    rt.model_ready.set()  # the model loaded: the first answer is still to come
    time.sleep(0.2)
    assert not rt.vectors_started.is_set() and not later.is_set()
    rt.engine.answered.set()
    done.join(5)
    assert rt.vectors_started.is_set() and later.is_set()


def test_a_daemon_nobody_asks_starts_them_once_the_model_loaded(monkeypatch):
    monkeypatch.setattr(after_start, "FIRST_ANSWER_WAIT_S", 0.1)
    rt, later = FakeRuntime(), threading.Event()
    rt.model_ready.set()
    after_start.after_first_answer(rt, (later.set,))
    assert rt.vectors_started.is_set() and later.is_set()


def test_tools_are_built_when_first_called_or_listed_in_declaration_order(tmp_path):
    import anyio

    from server.mcp.app import create_server
    from server.mcp.toolset import LazyTools, build_tools
    from server.service.core.runtime import Runtime

    rt = Runtime.start({"PATTERN_HOME": str(tmp_path)}, model="off")
    try:
        server = create_server(runtime=rt)
        manager = server._tool_manager
        assert isinstance(manager, LazyTools)
        declared = list(manager._order)
        assert "recall" in declared and len(manager._pending) >= 30  # none built at creation
        recall = manager.get_tool("recall")
        assert recall is not None and recall.name == "recall"
        assert "recall" not in manager._pending and "remember" in manager._pending
        assert manager.get_tool("no-such-tool") is None
        listed = anyio.run(server.list_tools)
        assert [t.name for t in listed] == declared  # all built, in the order added
        assert not manager._pending
        assert "query" in listed[declared.index("recall")].input_schema["properties"]
        build_tools(server)  # nothing left to build: a no-op
    finally:
        rt.close()


def test_a_stopping_daemon_stops_waiting_and_starts_nothing():
    rt, stopping, built = FakeRuntime(), threading.Event(), []  # the model still loading
    thread = serving(rt, later=(lambda: built.append("tools"),), stopping=stopping)
    try:
        stopping.set()
        thread.join(5)
        assert not thread.is_alive()  # not the model's 60 s
        assert not rt.vectors_started.is_set() and built == []
    finally:
        gc.unfreeze()
