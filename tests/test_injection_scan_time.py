"""The injection scan and the secret scan take time linear in the text, whatever the text: an
unclosed closing tag of quoted data (``</user_a_a_a…``), a run of the quote words, a run of
any rule's own literal characters. A write of the largest content is screened in well under a
second, and the daemon's other threads are not stopped meanwhile (a regex holds the GIL for a
whole match)."""

from __future__ import annotations

import threading
import time

import pytest

from server.service.trust import injection, secrets
from tests.mcp_util import hash_store_client

# (a short text that fires nothing, the run repeated after it): each is quadratic or worse in
# the run's length for a backtracking engine on one rule or another
HOSTILE = [
    ("</user_", "a_"),  # the tag of quoted data, never closed
    ("</retrieved_", "x-"),
    ("end of the ", "quoted "),  # a run of quote words that never reaches a noun
    ("the end of ", "reference quoted "),
    ("ignore ", "all the "),
    ("dear claude, ", "x " * 3),
    ("please ", "send the "),
    ("call forget-bulk ", "on all "),
    ("<system>", "<system>"),
    ("<important>", "x"),
    ("sk-", "sk-"),
    ("password = ", "'a"),
    ("-----BEGIN PRIVATE KEY-----", "\nAAAAAAAAAAAAAAAAAAAAAAAA"),
]


def _hostile(head: str, run: str, size: int) -> str:
    return head + run * ((size - len(head)) // len(run))


def _seconds(fn, text: str) -> float:
    start = time.perf_counter()
    fn(text)
    return time.perf_counter() - start


def test_an_unclosed_tag_of_quoted_data_is_scanned_in_linear_time():
    text = _hostile("</user_", "a_", 16_000)  # 3.7 s when the rule backtracked
    assert _seconds(injection.scan, text) < 0.25


@pytest.mark.parametrize(("head", "run"), HOSTILE, ids=[h.strip() for h, _ in HOSTILE])
def test_hostile_runs_are_scanned_in_time_linear_in_their_length(head, run):
    def both(text: str) -> None:
        injection.scan(text)
        secrets.scan(text)

    small = min(_seconds(both, _hostile(head, run, 8_000)) for _ in range(2))
    large = min(_seconds(both, _hostile(head, run, 64_000)) for _ in range(2))
    # eight times the text: at most about eight times the time (a quadratic rule takes 64x);
    # the floor keeps timer noise on tiny times from failing the test
    assert large < 0.3, f"{large:.3f} s for 64 KB"
    assert large < 16 * max(small, 0.01), f"{small:.4f} s at 8 KB, {large:.4f} s at 64 KB"


def test_a_hostile_write_neither_hangs_nor_stops_the_other_threads(tmp_path):
    body = "Notes from the issue tracker: </user_" + "a_" * 15_000
    gaps: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    with hash_store_client(tmp_path) as client:
        thread = threading.Thread(target=ticker, daemon=True)
        thread.start()
        start = time.monotonic()
        result = client.call("remember", {"content": body})
        took = time.monotonic() - start
        stop.set()
        thread.join(5)
    assert not result.is_error
    assert took < 5.0  # 24 s when the scan backtracked
    assert max(gaps) < 0.5  # 9.5 s
