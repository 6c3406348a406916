"""Test runners' name filters, evaluated on a test id: does this filter select that test?

- **pytest ``-k``**: pytest's own grammar (``expr: and_expr ('or' and_expr)*``, ``and_expr:
  not_expr ('and' not_expr)*``, ``not_expr: 'not' not_expr | '(' expr ')' | ident``); an
  identifier matches when it is a case-insensitive substring of one of the test's names (its
  folders, its file, its class, its function with its parameters). Marks and extra keywords
  are not known here, so an identifier naming only a mark selects nothing.
- **go test ``-run``**: RE2 patterns (Go's own syntax), one per level of ``/``-separated
  subtest names, each searched in the name at its level.
- **jest/vitest ``-t``** and anything else: one of the filter's words is in the test id.

:func:`negates` says whether a filter excludes by name (``not`` in pytest's ``-k`` or
``-m``, a negative lookahead in jest's ``-t``): a pass with such a filter never re-runs a
failure (:meth:`ingest.learning.check_targets.Check.rerun_kind`). Every evaluation is bounded: an
expression longer than :data:`MAX_EXPR` or nested deeper than :data:`MAX_DEPTH` selects
nothing, and a Go pattern runs in RE2 (linear time).
"""

from __future__ import annotations

import re

import re2

MAX_EXPR = 2_000
MAX_DEPTH = 64
_TOKEN = re.compile(r"\s*(\(|\)|[\w:+\-.\[\]\\/]+)")  # pytest's identifier characters
_WORD = re.compile(r"[\w.]+")
_GO_OPTIONS = re2.Options()
_GO_OPTIONS.log_errors = False
_GO_OPTIONS.max_mem = 8 << 20


class _Invalid(Exception):
    pass


def test_names(test: str) -> list[str]:
    """The names pytest matches ``-k`` against: folders, file, class(es), function."""
    where, _, rest = test.partition("::")
    names = [p for p in where.replace("\\", "/").split("/") if p and p != "."]
    names += [p for p in rest.split("::") if p]
    return names


def pytest_k(expr: str, test: str) -> bool | None:
    """Whether pytest's ``-k expr`` selects ``test`` (None: not a valid expression)."""
    if len(expr) > MAX_EXPR:
        return None
    tokens: list[str] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            if expr[pos:].strip():
                return None
            break
        tokens.append(m.group(1))
        pos = m.end()
    if not tokens:
        return True
    names = [n.lower() for n in test_names(test)]
    parser = _KParser(tokens, lambda ident: any(ident.lower() in n for n in names))
    try:
        value = parser.expr(0)
    except (_Invalid, RecursionError):
        return None
    return value if parser.at == len(tokens) else None


class _KParser:
    def __init__(self, tokens: list[str], match) -> None:
        self.tokens, self.match, self.at = tokens, match, 0

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def expr(self, depth: int) -> bool:
        if depth > MAX_DEPTH:
            raise _Invalid
        value = self.and_expr(depth)
        while self._peek() == "or":
            self.at += 1
            value = self.and_expr(depth) or value
        return value

    def and_expr(self, depth: int) -> bool:
        value = self.not_expr(depth)
        while self._peek() == "and":
            self.at += 1
            value = self.not_expr(depth) and value
        return value

    def not_expr(self, depth: int) -> bool:
        tok = self._peek()
        if tok is None or tok in (")", "and", "or"):
            raise _Invalid
        self.at += 1
        if tok == "not":
            if depth > MAX_DEPTH:
                raise _Invalid
            return not self.not_expr(depth + 1)
        if tok == "(":
            value = self.expr(depth + 1)
            if self._peek() != ")":
                raise _Invalid
            self.at += 1
            return value
        return self.match(tok)


def go_run(expr: str, test: str) -> bool:
    """Whether ``go test -run expr`` runs ``test`` (``TestA`` or ``TestA/sub``)."""
    if len(expr) > MAX_EXPR:
        return False
    levels = _go_levels(expr)
    names = test.split("/")
    for pattern, name in zip(levels, names, strict=False):
        try:
            rx = re2.compile(pattern, options=_GO_OPTIONS)
        except re2.error:
            return expr in test
        if rx.search(name) is None:
            return False
    return True


def _go_levels(expr: str) -> list[str]:
    """``-run`` split on the slashes outside brackets, as ``go test`` splits it."""
    out, cur, depth = [], [], 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        if ch == "/" and not depth:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def negates(tool: str, expr: str) -> bool:
    """Whether the filter ``expr`` of ``tool`` leaves tests out by name (module docstring)."""
    if not expr:
        return False
    if tool in ("pytest", "unittest"):
        return any(m.group(1) == "not" for m in _TOKEN.finditer(expr[:MAX_EXPR]))
    return "(?!" in expr or "(?<!" in expr


def matches(tool: str, expr: str, test: str) -> bool:
    """Whether the name filter ``expr`` of ``tool`` selects ``test`` (an invalid one: no)."""
    if not expr:
        return True
    if tool == "pytest":
        return bool(pytest_k(expr, test))
    if tool == "go":
        return go_run(expr, test)
    if negates(tool, expr):
        return False
    words = _WORD.findall(expr[:MAX_EXPR])
    return not words or any(w.lower() in test.lower() for w in words)
