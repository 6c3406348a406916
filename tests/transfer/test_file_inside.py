"""A file is read only when it is a regular file inside its root at the moment it is opened,
never waiting on a named pipe, never past its bound: what the workspace walker, citations and
the importers read (one helper, ``ingest.workspace.file_inside``). A FIFO, a link out of the root or a
bigger file swapped in after the walk is refused, and ingestion finishes. Real SQLite and
Chroma in ``tmp_path``, the hashing embedder."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.importers import bounded, source_files
from ingest.workspace import walker
from ingest.workspace.file_inside import NotRead, read_inside
from ingest.workspace.pipeline import Ingestor
from ingest.workspace.walker import Walker


def unblock(fifo: Path) -> None:
    """Open the pipe's other end (without waiting), so a reader stuck opening it returns (the
    test then fails instead of hanging)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def within(seconds: float, fn, *args, unstick: Path | None = None):
    """``fn(*args)``, which must return within ``seconds``."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    stuck = t.is_alive()
    if stuck and unstick is not None:
        unblock(unstick)
        t.join(10)
    assert not stuck, f"{getattr(fn, '__name__', fn)} did not return within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_fifo_swapped_in_after_the_walk_never_blocks_ingestion(tmp_path, engine, monkeypatch):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("Pelicans nest on the harbour wall.\n")
    (root / "plan.md").write_text("# Plan\n\nFeed the otters at noon.\n")
    walk = Walker.walk

    def walk_then_swap(self):
        out = walk(self)
        (root / "notes.txt").unlink()
        os.mkfifo(root / "notes.txt")  # nobody ever writes to it
        return out

    monkeypatch.setattr(Walker, "walk", walk_then_swap)
    report = within(30, Ingestor(engine, "proj", "agent").run, root, unstick=root / "notes.txt")
    reasons = {e.path: e.reason for e in report.errors}
    assert "named pipe" in reasons["notes.txt"]
    assert report.files_indexed == 1  # the other file is in


def test_read_within_refuses_a_pipe_a_link_out_and_a_file_past_its_bound(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(OSError, match="named pipe"):
        within(10, walker.read_within, root / "pipe", [root], 100, unstick=root / "pipe")
    (tmp_path / "secret").write_text("outside")
    os.symlink(tmp_path / "secret", root / "link")
    with pytest.raises(PermissionError):
        walker.read_within(root / "link", [root], 100)
    (root / "big").write_bytes(b"x" * 101)
    with pytest.raises(ValueError, match="too large"):
        walker.read_within(root / "big", [root], 100)
    (root / "ok").write_bytes(b"x" * 100)
    assert walker.read_within(root / "ok", [root], 100) == b"x" * 100
    # the importers' reader is the same one, in their words
    with pytest.raises(bounded.SourceError, match="a named pipe"):
        within(10, source_files.read_bytes, root / "pipe", root.resolve(), unstick=root / "pipe")


KINDS = ("file", "fifo", "link-in", "link-out", "folder", "missing")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(KINDS), size=st.integers(0, 3000), bound=st.integers(0, 3000),
       data=st.binary(min_size=1, max_size=64))  # fmt: skip
def test_any_path_is_read_whole_within_its_bound_or_refused_at_once(
    tmp_path_factory, kind, size, bound, data
):
    base = tmp_path_factory.mktemp("any")
    root = base / "root"
    root.mkdir()
    body = (data * (size // len(data) + 1))[:size]
    (root / "real").write_bytes(body)
    (base / "out").write_bytes(body)
    path = root / "it"
    if kind == "file":
        path.write_bytes(body)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-in":
        os.symlink(root / "real", path)
    elif kind == "link-out":
        os.symlink(base / "out", path)
    elif kind == "folder":
        path.mkdir()
    t = time.monotonic()
    try:
        got, st_ = within(10, read_inside, path, [root], bound, unstick=path)
    except NotRead as exc:
        expected = {"fifo": "special", "link-out": "outside", "folder": "special",
                    "missing": "unreadable"}.get(kind, "too_large")  # fmt: skip
        assert exc.kind == expected, (kind, exc.kind)
        assert kind in ("fifo", "link-out", "folder", "missing") or size > bound
    else:
        assert kind in ("file", "link-in") and size <= bound
        assert got == body and st_.st_size == size
    assert time.monotonic() - t < 5
