"""Every regular expression the packages compile at module level runs in time linear in the text:
it is run by RE2 (:mod:`retrieval.regexes.linear_regex`), or it is one of a short list of ``re``
patterns each shown linear here, on hostile texts built from its own literal characters."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import time
from re import _constants as C  # noqa: N812
from re import _parser

import pytest

from retrieval.regexes import linear_regex

PACKAGES = ("retrieval", "ingest", "graph", "server")

# ``re`` patterns kept on purpose. Each is linear by its shape (one greedy run per token, no
# choice to go back on), and checked below on hostile texts.
ALLOWED_RE = {
    # the runs of letters and apostrophes around a word found beside an apostrophe
    "server.service.trust.injection_scan.scan_text._WORD": "one run of letters per word",
    "server.service.trust.injection_scan.scan_text._OUTSIDE_ASCII": "one run of characters outside ASCII",
    # the parts of a text outside ASCII, the 160 characters before a match (Python's word
    # boundary: RE2's is ASCII)
    "server.service.trust.injection_scan.injection_fold._ACCENT": "the marks after a Latin letter",
    "server.service.trust.injection_scan.injection_fold._LOOKALIKE": "one character per match",
    "server.service.trust.injection_scan.injection_mention._DISCUSSION": "words of a sentence, one per match",
    # the upper-case run before a capitalised word needs a lookahead; keys and values only
    "server.service.trust.secret_scan.secret_checks.KEY_WORD": "one run per word of a key",
    "server.service.trust.injection_scan.injection_mention._SENTENCE_BREAK": "one run of spaces per break",
    "server.service.indexing.session_records.ARG_WORDS": "one run of separators per match",
    # bytes: a JSON line's escaped lone surrogate, four fixed characters
    "ingest.sessions.transcript_base._ESCAPED_SURROGATE": "four fixed characters per match",
    # one control character per match (what a terminal would act on, escaped before printing)
    "server.service.trust.escapes._TERMINAL": "one character per match",
    # a client's or an event's name in a hook command: one bounded run, anchored by fullmatch
    "server.hooks.clients.config_files._WORD": "one run of at most 64 characters",
}
# Modules whose ``re`` patterns are each shown linear below but not yet run by RE2 (each is
# applied per line, per token or to a bounded field; the shapes that were not linear are RE2's)
ALLOWED_MODULES = {
    "graph.traces": "stack-trace lines and assertion messages",
    "ingest.workspace.artifacts": "a commit id",
    "ingest.workspace.units": "Markdown and reST heading lines",
    "ingest.learning.episodes": "a tool result's first line",
    "ingest.sessions.exchanges": "words of an exchange",
    "ingest.learning.fix_evidence": "paths in a command",
    "ingest.importers.basic_memory": "a note's lines",
    "ingest.importers.claude_code": "a memory file's pointer line",
    "ingest.importers.markdown": "a note's lines",
    "ingest.learning.runner_args": "a test command's switches",
    "ingest.learning.signatures": "a runner's output lines",
    "ingest.learning.test_filters": "a test command's words",
    "retrieval.fulltext.analyzer": "tokens of a text",
    "retrieval.ranking.grouping": "identifiers and test names",
    "retrieval.regexes.linear_regex": "a substitution template written in the code",
    "retrieval.ranking.longquery": "sentence breaks of a query",
    "retrieval.ranking.modality": "code lines and identifiers of a query",
    "retrieval.pg.dialect": "SQL written in the code",
    "retrieval.timeline.tense": "words of a query",
    "retrieval.timeline.timeexpr": "time phrases of a query or a text",
    "retrieval.timeline.timeprior": "time words of a query",
    "retrieval.vector.vectors": "words of a text",
    "server.cli.ownership": "an error message",
    "server.http.hostguard": "a Host header",
    "server.service.recalling.excerpts": "a reply's lines",
    "server.service.prompting.hook_context": "a prompt's words",
    "server.service.memories.merge": "tokens of a text",
    "server.service.trust.secret_scan.secret_files": "base64 runs of a file",
    "server.service.browsing.unattended_warnings": "a warning's preview",
    "server.service.updating.update_judge": "a model's answer",
    "server.service.prompting.vocabulary": "words of a prompt",
}


def _allowed(where: str) -> bool:
    return where in ALLOWED_RE or where.rsplit(".", 1)[0] in ALLOWED_MODULES


def _walk(obj, where: str, out: dict[int, tuple[str, object]], depth: int = 0) -> None:
    if depth > 4:
        return
    if isinstance(obj, re.Pattern | linear_regex.Pattern | linear_regex.Windowed):
        out.setdefault(id(obj), (where, obj))
    elif isinstance(obj, tuple | list | frozenset | set):
        for i, item in enumerate(obj):
            _walk(item, f"{where}[{i}]", out, depth + 1)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            _walk(item, f"{where}[{key!r}]", out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            _walk(getattr(obj, field.name), f"{where}.{field.name}", out, depth + 1)
    elif hasattr(obj, "finditer") and hasattr(obj, "pattern") and not isinstance(obj, type):
        out.setdefault(id(obj), (where, obj))  # a matcher of its own (PairedTags)


def module_patterns() -> list[tuple[str, object]]:
    """(module.name[index…], pattern) for every compiled pattern held at module level."""
    found: dict[int, tuple[str, object]] = {}
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.walk_packages(pkg.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if isinstance(value, type) or callable(value) and not hasattr(value, "finditer"):
                    continue
                _walk(value, f"{info.name}.{name}", found)
    return sorted(found.values(), key=lambda item: item[0])


PATTERNS = module_patterns()


def _where(entry: str) -> str:
    return entry.split("[", 1)[0]


def test_every_module_pattern_is_run_by_re2_or_is_a_listed_linear_re_pattern():
    plain = sorted({_where(w) for w, p in PATTERNS if isinstance(p, re.Pattern)})
    unlisted = [w for w in plain if not _allowed(w)]
    assert not unlisted, f"patterns run by re, not RE2, and not listed: {unlisted}"
    assert len(PATTERNS) > 150  # the walk found the packages' patterns


def test_the_list_names_only_patterns_that_exist():
    plain = {_where(w) for w, p in PATTERNS if isinstance(p, re.Pattern)}
    assert set(ALLOWED_RE) <= plain
    assert set(ALLOWED_MODULES) <= {w.rsplit(".", 1)[0] for w in plain}


# --------------------------------------------------------------------------- hostile texts


def _literals(pattern: str, flags: int) -> list[str]:
    """The pattern's literal characters (and the ends of its ranges), in order."""
    out: list[str] = []

    def walk(items) -> None:
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.IN:
                for sub_op, sub_av in av:
                    if sub_op is C.LITERAL:
                        out.append(chr(sub_av))
                    elif sub_op is C.RANGE:
                        out.extend((chr(sub_av[0]), chr(sub_av[1])))
            elif op is C.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op is C.SUBPATTERN:
                walk(av[3])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])

    try:
        walk(_parser.parse(pattern, flags & ~re.UNICODE if isinstance(flags, int) else 0))
    except re.error:  # a pattern written in RE2's syntax: its plain characters and escapes
        out.extend(chr(int(h, 16)) for h in re.findall(r"\\x\{([0-9a-f]+)\}", pattern))
        out.extend(c for c in pattern if c.isalnum())
    return out or ["a"]


def hostile_texts(pattern: str, flags: int, size: int) -> list[str]:
    """Runs of the pattern's own characters: one character, all of them in order, its words
    with spaces, with a character it never matches at the end."""
    chars = _literals(pattern, flags)
    seq = "".join(chars)
    words = " ".join(re.findall(r"\w+", seq)) or seq
    distinct = list(dict.fromkeys(chars))
    texts = [seq, words + " ", "".join(distinct[:2]) or "a", distinct[0], distinct[-1] + " "]
    return [(t * (size // len(t) + 1))[:size] + "\x00" for t in texts]


def _seconds(rx, text: str) -> float:
    """Processor time (another process on the machine does not count)."""
    if isinstance(rx.pattern, bytes):  # a bytes pattern reads the text's bytes
        text = text.encode("utf-8", "surrogatepass")
    start = time.thread_time()
    for _ in rx.finditer(text):
        pass
    return time.thread_time() - start


def _grows_linearly(rx) -> tuple[bool, str]:
    flags = getattr(rx, "flags", 0)
    worst = (0.0, 0.0, "")
    source = rx.pattern.decode("latin-1") if isinstance(rx.pattern, bytes) else rx.pattern
    for small, large in zip(
        hostile_texts(source, flags, 3_000),
        hostile_texts(source, flags, 12_000),
        strict=True,
    ):
        t_small = min(_seconds(rx, small) for _ in range(3))
        t_large = min(_seconds(rx, large) for _ in range(3))
        if t_large / max(t_small, 0.004) > worst[1] / max(worst[0], 0.004):
            worst = (t_small, t_large, large[:40])
    t_small, t_large, sample = worst
    # four times the text: about four times the time (quadratic: sixteen); twice that for a
    # loaded machine's noise, and a floor under tiny times (a timer's resolution)
    ok = t_large < 8 * max(t_small, 0.004)
    return ok, f"{t_small * 1e3:.1f} ms at 3k, {t_large * 1e3:.1f} ms at 12k on {sample!r}"


@pytest.mark.parametrize(
    ("where", "rx"),
    [(w, p) for w, p in PATTERNS if isinstance(p, re.Pattern)],
    ids=[w for w, p in PATTERNS if isinstance(p, re.Pattern)],
)
def test_listed_re_patterns_take_linear_time_on_their_own_characters(where, rx):
    ok, detail = _grows_linearly(rx)
    assert ok, f"{where}: {detail}"


def test_re2_patterns_take_linear_time_on_their_own_characters():
    slow = []
    for where, rx in PATTERNS:
        if isinstance(rx, re.Pattern):
            continue
        ok, detail = _grows_linearly(rx)
        if not ok:
            slow.append(f"{where}: {detail}")
    assert not slow, slow


# --------------------------------------------------------------------------- the translation


@pytest.mark.parametrize(
    ("pattern", "flags", "text"),
    [
        (r"\w+", 0, "héllo wörld_1 ключ 東京 x²"),
        (r"[^\W\d_]+", 0, "héllo w0rld_x ключ"),
        (r"[^\W_]+", 0, "a_b1_ключ"),
        (r"\d+", 0, "12 ٣٤ x"),
        (r"\s+", 0, "a\u00a0b\u2003c\x0bd\ne"),
        (r"\S+", 0, "a\u00a0b c"),
        (r"[\W\d]+", 0, "ab12 !?cd"),
        (r"(?i)straße|ǅ", 0, "STRASSE Straße ǆ"),
        (r"a  b # a comment", re.X, "ab a b"),
        (r"^x$", re.M, "x\ny\nx"),
        (r"(?P<k>\w+)=(?P<v>[^;]*);?", 0, "a=1;ключ=значение;b="),
        (r"x{2,1500}", 0, "x" * 1600),
        (r"(?:ab|a)(?:bc)?", 0, "abc abbc"),
        (r".", re.S, "a\nb"),
    ],
)
def test_re2_finds_what_re_finds(pattern, flags, text):
    ours = linear_regex.compile(pattern, flags)
    theirs = re.compile(pattern, flags)
    assert [m.span() for m in ours.finditer(text)] == [m.span() for m in theirs.finditer(text)]
    assert ours.findall(text) == theirs.findall(text)
    assert ours.sub("<>", text) == theirs.sub("<>", text)
    assert ours.split(text) == theirs.split(text)


def test_a_lookaround_is_refused_unless_a_window_bounds_it():
    with pytest.raises(linear_regex.NotLinear):
        linear_regex.compile(r"a(?=b)")
    windowed = linear_regex.compile(r"(?<![0-9])[0-9]{3,}(?![0-9])", window=50)
    assert [m.group() for m in windowed.finditer("12 1234 x56789y 1")] == ["1234", "56789"]


def test_offsets_are_characters_in_text_that_is_not_ascii():
    rx = linear_regex.compile(r"(?P<word>ключ)=(\d+)")
    text = "é 東京 ключ=42 ключ=7"
    assert [(m.span(), m.span("word"), m[2]) for m in rx.finditer(text)] == [
        ((5, 12), (5, 9), "42"),
        ((13, 19), (13, 17), "7"),
    ]
    assert rx.search(text, 6).start() == 13  # a search from a position, in characters
