"""The pure citation logic (retrieval/cite.py): anchors, where cited lines went, and file paths
mentioned in text."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from retrieval.cite import CitationInput, anchor, locate, mentions, sha, split_lines

SRC = """import os


def alpha(x):
    return x + 1


def beta(y):
    total = y * 2
    return total
"""


def lines(text: str) -> list[str]:
    return split_lines(text)


def where(old: str, new: str, start: int, end: int):
    a = anchor(lines(old), start, end)
    return locate(a, lines(new), sha(new), sha(old))


def test_unchanged_file_is_fresh():
    loc = where(SRC, SRC, 8, 10)
    assert (loc.status, loc.start, loc.end) == ("fresh", 8, 10)


def test_an_edit_after_the_range_leaves_it_fresh():
    loc = where(SRC, SRC + "\n\ndef gamma():\n    pass\n", 8, 10)
    assert (loc.status, loc.start, loc.end) == ("fresh", 8, 10)


def test_lines_inserted_above_make_it_moved_with_the_new_range():
    new = SRC.replace("import os\n", "import os\nimport sys\nimport re\n")
    loc = where(SRC, new, 8, 10)
    assert (loc.status, loc.start, loc.end) == ("moved", 10, 12)


def test_reindented_in_place_is_fresh_and_reindented_elsewhere_is_moved():
    indented = SRC.replace("def beta(y):\n    total = y * 2\n    return total\n",
                           "def beta(y):\n        total = y  *  2\n        return total   \n")  # fmt: skip
    assert where(SRC, indented, 8, 10).status == "fresh"
    in_class = SRC.replace(
        "def beta(y):\n    total = y * 2\n    return total\n",
        "class K:\n    def beta(y):\n        total = y * 2\n        return total\n",
    )
    loc = where(SRC, in_class, 8, 10)
    assert (loc.status, loc.start, loc.end) == ("moved", 9, 11)


def test_a_changed_line_is_changed_and_the_new_place_is_proposed():
    new = "import os\nimport sys\n\n\n" + SRC.split("\n", 3)[3].replace("y * 2", "y * 3")
    loc = where(SRC, new, 8, 10)
    assert loc.status == "changed"
    assert (loc.start, loc.end) == (9, 11) and loc.ratio >= 0.5


def test_an_unrecognisable_block_is_changed_without_a_guess():
    new = "import os\n\n\ndef zeta():\n    raise SystemExit(0)\n"
    loc = where(SRC, new, 8, 10)
    assert loc.status == "changed" and loc.start is None


def test_a_block_cut_from_the_file_is_changed():
    new = SRC.replace("def beta(y):\n    total = y * 2\n    return total\n", "")
    assert where(SRC, new, 8, 10).status == "changed"


def test_the_nearest_copy_of_a_duplicated_block_wins():
    block = "def f():\n    return 1\n"
    old = f"{block}\n\n{block}\n\n{block}"
    new = "# header\n" + old
    # the second copy (lines 4-5) moved to 5-6, not to the first or third copy
    loc = where(old, new, 4, 5)
    assert (loc.status, loc.start, loc.end) == ("moved", 5, 6)


def test_blank_lines_around_the_range_follow_it():
    new = SRC.replace("import os\n", "import os\nimport re\n")
    loc = where(SRC, new, 6, 10)  # starts with the two blank lines before beta
    assert (loc.status, loc.start, loc.end) == ("moved", 7, 11)


def test_whole_file_citations_compare_the_file():
    a = anchor(None, None, None)
    assert locate(a, None, "x", "x").status == "fresh"
    assert locate(a, lines(SRC), "y", "x").status == "changed"


def test_a_range_outside_the_file_is_refused():
    with pytest.raises(ValueError, match="outside the file"):
        anchor(lines(SRC), 9, 40)
    with pytest.raises(ValueError, match="binary"):
        anchor(None, 1, 2)


def test_the_stored_text_is_capped():
    big = [f"line {i} " + "x" * 100 for i in range(200)]
    a = anchor(big, 1, 200)
    assert len(a.text.encode()) <= 4096 and a.n_norm == 200
    moved = ["# new"] + big
    assert locate(a, moved, "new", "old").status == "moved"  # the fingerprint covers all lines


def test_mentions_in_text():
    text = (
        "The retry logic lives in client/http.py; see parse.py:120 and util/dates.py:10-20, "
        "also app.ts#L5-L9 and x.go#L3. Not https://example.com/a/b.py nor e.g. or v1.2."
    )
    found = {(m.path, m.start, m.end) for m in mentions(text)}
    assert ("client/http.py", None, None) in found
    assert ("parse.py", 120, 120) in found
    assert ("util/dates.py", 10, 20) in found
    assert ("app.ts", 5, 9) in found
    assert ("x.go", 3, 3) in found
    assert not any("example.com" in p or p.endswith("a/b.py") for p, _, _ in found)


def test_citation_input_is_validated():
    assert CitationInput(path="a.py", startLine=3).endLine == 3
    for bad in (
        {"path": "a.py", "endLine": 3},
        {"path": "a.py", "startLine": 5, "endLine": 2},
        {"path": "a.py", "startLine": 0},
        {"path": ""},
        {"path": "a.py", "line": 3},
    ):
        with pytest.raises(ValidationError):
            CitationInput.model_validate(bad)
