"""The postings file saved beside the store truncated, or replaced by another store's, between
two runs of the daemon: the next run ranks correctly from the first recall (FTS5 while the
postings are rebuilt, never the file's words), health names the bad file, and the rebuilt
postings replace it (the run after loads them without a word)."""

from __future__ import annotations

import shutil

import pytest

from tests.faults.harness import Daemon, issues_naming, wait_for

pytestmark = pytest.mark.slow

DEADLINE = 3.5
# in-memory postings even for a small store; lexical ranking alone (no vector index to start
# and stop: these faults are the lexical side's)
ENV = {"PATTERN_BM25_MEMORY_MIN": "0", "PATTERN_EMBEDDER": "none"}
POSTINGS = "pattern.sqlite3.postings.npz"


def _postings_ready(d: Daemon) -> dict:
    d.recall("warm up", DEADLINE)  # the first search loads or builds them
    return wait_for(lambda: (h := d.health())["lexicalPostings"] == "ready" and h, 30,
                    "the postings are ready")  # fmt: skip


def _lexical_ids(d: Daemon, query: str) -> list[str]:
    """The recalled records that match ``query``'s words (a lexical rank)."""
    items = d.recall(query, DEADLINE)["items"]
    return [i["id"] for i in items if i["explanation"]["lexical_rank"] is not None]


def _store(daemon_at, home, notes: list[str]) -> tuple[Daemon, list[str]]:
    """A daemon that wrote ``notes`` and saved its postings, stopped."""
    d = daemon_at(home, ENV).start()
    ids = [d.remember(n) for n in notes]
    _postings_ready(d)
    assert d.stop() == 0 and (home / POSTINGS).is_file()
    return d, ids


def test_a_truncated_postings_file(tmp_path, daemon_at):
    notes = ["the billing service retries failed invoices three times",
             "invoices older than ninety days go to collections",
             "the canary takes five percent of traffic"]  # fmt: skip
    d, ids = _store(daemon_at, tmp_path / "home", notes)
    file = d.home / POSTINGS
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])

    d.start()
    assert sorted(_lexical_ids(d, "invoices")) == sorted(ids[:2])
    h = _postings_ready(d)
    assert issues_naming(h, "in-memory postings", "unreadable", "rebuilt from FTS5"), h["issues"]
    assert _lexical_ids(d, "canary traffic") == [ids[2]]
    assert set(ids) <= d.visible_ids()
    assert d.stop() == 0

    d.start()  # the rebuilt postings replaced the file: loaded without a word
    assert not issues_naming(_postings_ready(d), "postings")
    assert _lexical_ids(d, "canary traffic") == [ids[2]]
    assert d.stop() == 0


def test_another_stores_postings_file(tmp_path, daemon_at):
    mine, my_ids = _store(daemon_at, tmp_path / "mine", ["standup at nine in the small room",
                                              "the release train leaves on Thursdays"])  # fmt: skip
    theirs, _ = _store(daemon_at, tmp_path / "theirs", ["zebra billing postgres migration",
                                             "postgres vacuum runs nightly"])  # fmt: skip
    shutil.copy(theirs.home / POSTINGS, mine.home / POSTINGS)  # same shape, other records

    mine.start()
    assert _lexical_ids(mine, "zebra billing postgres") == []  # never the file's words
    h = _postings_ready(mine)
    assert issues_naming(h, "in-memory postings", "another store's", "rebuilt"), h["issues"]
    assert _lexical_ids(mine, "zebra billing postgres") == []
    assert _lexical_ids(mine, "release train Thursdays") == [my_ids[1]]
    assert set(my_ids) <= mine.visible_ids()
    assert mine.stop() == 0
