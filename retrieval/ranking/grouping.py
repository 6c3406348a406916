"""Hits grouped into the units people ask about: a file's chunks into the file, a session's
exchanges into the session.

A group scores by its best member plus a small share of the next ones (a file that answers in
several places beats one that mentions the words once):

    score(G) = s_1 + SHARE * (s_2 + ... + s_TOP)        s_1 >= s_2 >= ... its members' scores

A test file is worth less than the source it exercises unless the query is about tests
(:func:`about_tests`): its score is multiplied by ``TEST_FACTOR``.

A file the query names in code is worth more: when the query writes a name as code
(:func:`code_names`: a call ``ccode(x)``, ``snake_case``, ``CamelCase``, a dotted path
``sympy.printing.latex`` or a file name, anything in backticks) and that name is the file's own
(``latex.py``) or one its chunks define (``def latex``, ``class LatexPrinter``), the file's score
is multiplied by ``1 + NAME_BOOST``. An issue text names the function that misbehaves; the file
that defines it is where the fix usually goes, while the tests and callers that mention it only
use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

SHARE = 0.1
TOP = 3
TEST_FACTOR = 0.8
NAME_BOOST = 0.3

T = TypeVar("T")

_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "testdata"})
_TEST_NAME = re.compile(
    r"^(test_.*|.*_tests?|tests?|conftest|.*Tests?|Test[A-Z].*|.*\.(test|spec)|.*_spec)\.\w+$"
)
# A query is about tests when it names one (``test_upload``, ``UploadTest``, ``conftest``), a
# test tool, or asks for tests in so many words; a bug report that says "the test passes on
# 1.2" in passing is not.
_ABOUT_TESTS = re.compile(
    r"\b([A-Z]\w*Tests?|(?i:test_\w+|\w+_tests?|conftest|pytest|unittest|jest|fixtures?|"
    r"unit[ -]?tests?|test ?suites?|test ?cases?|test ?files?|test ?coverage|regression tests?|"
    r"(write|add|adding|fix|update|run|running) (a |an |the |some |new )?tests?|"
    r"tests? (for|of|in)|which tests?|failing tests?|tests? (fail|failing|failed)))\b"
)


def is_test_path(path: str) -> bool:
    """A test file by its path: under a test folder, or named like a test in the usual
    conventions (``test_x.py``, ``x_test.go``, ``XTest.java``, ``x.spec.ts``, ``conftest.py``)."""
    parts = path.replace("\\", "/").split("/")
    if any(p.lower() in _TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_TEST_NAME.match(parts[-1]))


def about_tests(query: str) -> bool:
    """The query is about tests (names a test or a test tool, asks for tests): test files then
    keep their score."""
    return bool(_ABOUT_TESTS.search(query))


@dataclass
class Group(Generic[T]):
    key: str
    score: float
    members: list[T] = field(default_factory=list)


def group(
    items: Sequence[T],
    key: Callable[[T], str],
    score: Callable[[T], float],
    share: float = SHARE,
    top: int = TOP,
    factor: Callable[[str], float] | None = None,
) -> list[Group[T]]:
    """``items`` grouped by ``key``, best group first; each group's members best first.
    ``factor(key)``: a multiplier of the group's score (the test-file prior)."""
    by_key: dict[str, list[T]] = {}
    for item in items:
        by_key.setdefault(key(item), []).append(item)
    out = []
    for k, members in by_key.items():
        members.sort(key=lambda m: -score(m))
        s = [score(m) for m in members[:top]]
        total = s[0] + share * sum(s[1:])
        out.append(Group(k, total * (factor(k) if factor else 1.0), members))
    out.sort(key=lambda g: -g.score)
    return out


_IDENT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_CAMEL = re.compile(r"[a-z0-9][A-Z]")
_DEFINES = re.compile(
    r"\b(?:def|class|function|func|fn|interface|struct|enum|trait|type)\s+([A-Za-z_$][\w.$]*)"
)


def code_names(query: str) -> frozenset[str]:
    """The names ``query`` writes as code, lower-cased: an identifier that is called
    (``ccode(``), has an underscore or an inner capital (``snake_case``, ``CamelCase``), is
    dotted (``sympy.printing.latex``, ``latex.py``) or stands in backticks; each dotted part of
    three or more characters counts."""
    out: set[str] = set()
    for m in _IDENT.finditer(query):
        name, start, end = m.group(0), m.start(), m.end()
        codey = (
            "_" in name
            or "." in name
            or _CAMEL.search(name) is not None
            or query[end : end + 1] == "("
            or query[start - 1 : start] == "`"
        )
        if codey:
            out.update(part.lower() for part in name.split(".") if len(part) >= 3)
    return frozenset(out)


def defined_names(title: str) -> set[str]:
    """The names a chunk's title says it defines (``def Printer._print_Add, class Foo``): the
    last dotted part of each, lower-cased."""
    return {n.rsplit(".", 1)[-1].lower() for n in _DEFINES.findall(title or "")}


def path_stem(path: str) -> str:
    """A path's file name without its extension, lower-cased (``sympy/printing/latex.py`` ->
    ``latex``)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0].lower()


def names_match(names: frozenset[str], path: str, defined: set[str]) -> bool:
    """The query names (``names``, from :func:`code_names`) the file at ``path`` or a name its
    chunks define."""
    return bool(names) and (path_stem(path) in names or not names.isdisjoint(defined))


def name_prior(
    query: str, defined: dict[str, set[str]], boost: float = NAME_BOOST
) -> Callable[[str], float]:
    """The multiplier of a file's score: ``1 + boost`` when the query names it in code
    (:func:`names_match`; ``defined``: path -> the names its chunks define), else 1."""
    names = code_names(query)
    return lambda path: 1.0 + boost if names_match(names, path, defined.get(path, set())) else 1.0


def test_prior(query: str, factor: float = TEST_FACTOR) -> Callable[[str], float]:
    """The multiplier of a file's score: ``factor`` for a test file, unless the query is about
    tests."""
    if about_tests(query):
        return lambda path: 1.0
    return lambda path: factor if is_test_path(path) else 1.0
