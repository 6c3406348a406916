"""Gemini CLI's ``tmp/<project>/.project_root`` names a session's folder only as a small regular
file in that folder (``ingest.sessions.transcripts_gemini.project_root``): a named pipe there (opening it
would wait for a writer forever, holding up the session indexer), a device, a link, a folder or
a large file names none, at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ingest.sessions.transcripts import session_cwd
from ingest.sessions.transcripts_gemini import ROOT_BYTES, project_root


def _session(tmp_path: Path, sub: bool = False) -> tuple[Path, Path]:
    """(the session file, its project's .project_root path)."""
    project = tmp_path / ".gemini" / "tmp" / "shop"
    chats = project / "chats" / ("parent-1" if sub else "")
    chats.mkdir(parents=True)
    session = chats / "session-2026-01-01T00-00-s1.jsonl"
    session.write_text('{"sessionId": "s1", "projectHash": "h", "startTime": "x"}\n')
    return session, project / ".project_root"


def _returns(fn, *args, timeout: float = 5.0):
    """``fn(*args)`` in a thread; fails if it has not returned within ``timeout``."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    t.join(timeout)
    return t, out


@pytest.mark.parametrize("sub", [False, True])
def test_a_regular_file_names_the_folder(tmp_path, sub):
    session, root = _session(tmp_path, sub)
    root.write_text("/home/dev/shop\n")
    assert project_root(session) == "/home/dev/shop" == session_cwd(session)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_named_pipe_names_nothing_and_never_blocks(tmp_path):
    session, root = _session(tmp_path)
    os.mkfifo(root)
    for fn in (project_root, session_cwd):
        t, out = _returns(fn, session)
        if t.is_alive():  # the old reader, waiting for a writer: give it one, then fail
            os.close(os.open(root, os.O_WRONLY | os.O_NONBLOCK))
            t.join(5)
            pytest.fail(f"{fn.__name__} blocked on a named pipe at .project_root")
        assert out == [None]


def test_a_link_a_folder_a_device_or_a_large_file_names_nothing(tmp_path):
    session, root = _session(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("/home/dev/other\n")
    root.symlink_to(elsewhere)  # a link out of the project's folder
    assert project_root(session) is None
    root.unlink()
    if Path("/dev/zero").exists():
        root.symlink_to("/dev/zero")
        t, out = _returns(project_root, session)
        assert not t.is_alive() and out == [None]
        root.unlink()
    root.mkdir()
    assert project_root(session) is None
    root.rmdir()
    root.write_text("/" + "x" * ROOT_BYTES)
    assert project_root(session) is None
    root.write_text("/home/dev/shop\n/and/another\n")
    assert project_root(session) is None
