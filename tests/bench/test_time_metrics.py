"""The per-question metrics of the chat-history sets: newest_first and recall_all."""

from __future__ import annotations

from benchmarks.harness.time_metrics import longmemeval_metrics, mean_rows, newest_first

DATES = {"old": 1.0, "new": 2.0}


def test_newest_first():
    assert newest_first(["new", "x", "old"], DATES) == 1.0
    assert newest_first(["old", "new"], DATES) == 0.0
    assert newest_first(["x", "new"], DATES) == 1.0  # the older one not ranked: below
    assert newest_first(["old", "x"], DATES) == 0.0  # the newest not ranked
    assert newest_first(["a", "b"], {"a": 1.0, "b": 1.0}) is None  # one date: no update


def test_recall_all_and_rows():
    m = longmemeval_metrics(["a", "x", "b"], [("a", True), ("x", False)], ["a", "b"], {})
    assert m["recall_all@10"] == 1.0 and "newest_first" not in m
    m2 = longmemeval_metrics(["a"], [("a", False)], ["a", "b"], {"a": 1.0, "b": 2.0})
    assert m2["recall_all@10"] == 0.0 and m2["newest_first"] == 0.0
    rows = mean_rows([m, m2])
    assert rows["queries"] == 2 and rows["newest_first"] == 0.0 and rows["recall_all@10"] == 0.5
