"""Front matter read in time linear in its size: a YAML number of thousands of digits or of
sexagesimal parts (``1:1:1:…``, which YAML 1.1 builds by multiplying a big integer by 60 for
each part, in time quadratic in its length) is the note's one clear error, at once (a long one
took quadratic time, then failed the read with a bare ValueError)."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.importers.markdown import MAX_FRONT_MATTER_BYTES, FrontMatterError, split_front_matter


def note(value: str) -> str:
    return f"---\ntitle: Deploy\nsize: {value}\n---\nbody\n"


def cpu(fn, *args) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - t0)
    return best


def read(text: str):
    try:
        return split_front_matter(text)
    except FrontMatterError as exc:
        return exc


def test_a_long_sexagesimal_number_is_read_in_linear_time():
    def parts(n: int) -> str:
        return note("1:" * n + "1")

    n = (MAX_FRONT_MATTER_BYTES - 100) // 2
    short, long = cpu(read, parts(n // 8)), cpu(read, parts(n))
    assert long < 8 * 3 * max(short, 0.002), (short, long)  # linear, with a loaded machine's margin


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=4000), st.sampled_from(["1:", "9", "0x1", "1_"]))
def test_a_long_number_is_read_as_a_number_or_is_the_notes_error(n, unit):
    value = unit * n + "1"
    got = read(note(value))
    if isinstance(got, FrontMatterError):  # a number YAML would build, too long to
        assert len(value) > 64 and "not valid YAML" in str(got)
        return
    meta, body = got
    assert body == "body\n" and meta["title"] == "Deploy"
    assert isinstance(meta["size"], int) or meta["size"] == value or meta["size"].isdigit()
