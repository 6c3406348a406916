"""A daemon stopped twice. A second SIGTERM (or Ctrl-C) while it closes its store is absorbed: it
used to reach the default handler, restored once serving ended, and kill the daemon in the
middle of its close (exit status -15 and ``daemon.json`` left behind, three stops in four).
One during the drain cuts the drain short and the app still ends cleanly (it was cancelled
mid-wait, a traceback in the log)."""

from __future__ import annotations

import signal
import time

import pytest

pytestmark = pytest.mark.slow


def test_a_second_signal_while_it_closes_is_absorbed(tmp_path, daemon_at):
    # (second signal, seconds after the first): in the drain, then in the close
    for round_, (second, gap) in enumerate(
        [(signal.SIGTERM, 0.05), (signal.SIGINT, 0.25), (signal.SIGTERM, 0.4)]
    ):
        home = tmp_path / f"home{round_}"
        d = daemon_at(home, {"PATTERN_VECTOR_INDEX_FROM": "0"}).start()  # an index to close
        kept = d.remember(f"the release train leaves on day {round_}")
        d.recall("release train", 30)
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(gap)
        if d.proc.poll() is None:
            d.proc.send_signal(second)
        code, d.proc = d.proc.wait(60), None  # not d.stop(): its SIGTERM would be the third
        assert code == 0, d.stderr()[-3000:]
        assert "Traceback" not in d.stderr()  # a drain cut short still ends the app cleanly
        assert not (home / "daemon.json").exists()
        assert kept in d.start().visible_ids()
        assert d.stop() == 0


def test_the_signal_handler_takes_no_lock(monkeypatch):
    """The handler runs between two bytecodes of the main thread, which may hold the lock that
    ending the dashboard's streams takes (a first ``/ui`` request builds the dashboard under
    it): it only sets flags; ``on_exit`` runs once the drain starts."""
    import threading

    import uvicorn

    from server.http.daemon import _graceful_server

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    held, ended = threading.Lock(), []
    try:
        server = _graceful_server(uvicorn.Config(app=None),
                                  on_exit=lambda: ended.append(held.acquire(timeout=5)))  # fmt: skip
        with held:  # the main thread inside the lock when the signal comes
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        assert server.should_exit and not ended
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        assert server.force_exit and not ended
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


THIRD = """
import signal, uvicorn
from server.http.daemon import _graceful_server
server = _graceful_server(uvicorn.Config(app=None))
handler = signal.getsignal(signal.SIGTERM)
handler(signal.SIGTERM, None)  # the first: the drain
server.closing = True  # serving ended, the store closes
handler(signal.SIGTERM, None)
print("absorbed", server.force_exit, flush=True)
handler(signal.SIGTERM, None)
print("still running", flush=True)
"""


def test_a_third_signal_ends_a_closing_daemon_at_once():
    """The close can be slow (the vector index catching up with a large import): the second
    signal is absorbed with a word, the third ends the process by the signal's own action."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", THIRD], cwd=root, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.stdout.split("\n")[0] == "absorbed False"
    assert "still running" not in done.stdout
    assert done.returncode == -signal.SIGTERM
    assert "a third signal stops it at once" in done.stderr
