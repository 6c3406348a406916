"""The one-time scrub of learned lessons over a lesson whose stored JSON nests deeper than the
scrub can walk: that lesson is scrubbed as text, and the lessons after it are scrubbed all the
same (the run used to stop at it, at every start, so no later lesson was ever scrubbed)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from server.service.learning import lesson_scrub
from tests.lessons.test_lesson_scrub import (
    GHP,
    files_holding,
    learned_lesson,
    open_runtime,
    write_old_store,
)

DEEP = 600  # JSON reads it; a walk of two frames per level does not


@pytest.mark.parametrize("column", ["lessons.extra", "records.metadata"])
def test_a_lesson_nested_too_deep_to_walk_never_stops_the_scrub(tmp_path, column):
    home = tmp_path / "store"
    write_old_store(home, [learned_lesson(1), learned_lesson(2)])
    deep = json.dumps({"learned": {"token": GHP}, "deep": json.loads("[" * DEEP + "]" * DEEP)})
    con = sqlite3.connect(home / "pattern.sqlite3")
    if column == "lessons.extra":
        con.execute("UPDATE lessons SET extra=? WHERE id=1", (deep,))
    else:
        con.execute("UPDATE records SET metadata=? WHERE id=(SELECT record_id FROM lessons "
                    "WHERE id=1)", (deep,))  # fmt: skip
    con.commit()
    con.close()
    rt = open_runtime(home, tmp_path)
    try:
        assert rt.service.store.meta(lesson_scrub.KEY) == lesson_scrub.VERSION
        row = rt.service.store.reader.execute("SELECT extra FROM lessons WHERE id=2").fetchone()
        assert [h["path"] for h in json.loads(row[0])["lesson"]["learned"]["fix"]["hunks"]] == [
            "app/upload.py"
        ]
    finally:
        rt.close()
    assert files_holding(home) == []
