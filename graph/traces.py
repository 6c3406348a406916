"""Stack-trace analysis for lessons: frames, exception classes, and lexical fingerprints.

A stack trace is mostly noise to a bag-of-words ranker (``at``, ``java``, ``invoke``) and its
most telling parts are compound: *which* method at *which* line, *which* exception class.
:func:`fingerprint_terms` turns those into single opaque tokens that are added to the FTS5
``terms`` column of a lesson record and to the query of ``find_similar_errors``:

- ``xc<class>``  — every exception class named in the text (``NullPointerException``,
  ``junit.framework.ComparisonFailure``, ``Caused by: …``), simple and qualified name;
- ``fl<frame><line>`` — every frame with its line number (``CategoryPlot.java:2166``). Two
  traces of the same defect pass through the same lines of the same version of the code, so
  shared frame-line tokens are strong evidence; frames of test runners and reflection included
  (their lines tell library versions and assertion kinds apart, and bm25's IDF makes the
  ubiquitous ones cheap);
- ``fm<class><method>`` — the first application frames without their line (the code that
  failed, robust to line shifts between versions);
- ``dd<word>`` — the words that differ between the expected and the actual value of a failed
  assertion (``expected:<…> but was:<…>``, ``Expected: … Result: …``, ``assert a == b``,
  ``a != b``; JUnit's ``[…]`` difference markers are used when present, else a token diff).
  Failing tests of one defect often disagree with the expectation in the same way
  (``@return {undefined}`` missing, an ``inline`` name numbered differently) even when
  their tests, messages and frames differ; :data:`DIFF_WEIGHT` counts them twice in a query;
- ``de<word>`` / ``da<word>`` — the same words with their side: ``de`` expected but missing
  from the actual value, ``da`` in the actual value only (unexpected). "``undefined``
  expected, ``?`` found" and "``undefined`` found where ``None`` was expected" share
  ``ddundefined`` but are different failures; also counted twice in a query;
- ``dx<op><shape>`` — the shape of each edit between expected and actual, identifiers masked:
  ``function(a){}`` expected, ``function(){}`` found gives ``dxdellpwxrp`` (a word deleted
  between parentheses); ``b$$inline_1`` vs ``b$$inline_3`` gives ``dxrepnum`` (names that
  differ only in a number); ``dxws`` when the two values differ only in whitespace (indentation,
  trimming, line endings) and ``dxsame`` when they print alike yet are not equal (a type,
  identity or tree-structure problem). JUnit's ``expected:<…> but was:<…>`` is read up to the
  frames (a trace cut inside the actual value is compared over the part that is left).

Recognised frame syntaxes: Java/Kotlin/Scala/C# (``at pkg.Class.method(File.java:12)``),
Python (``File "x.py", line 12, in func``), JavaScript/Node (``at fn (file.js:10:5)``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from retrieval.regexes import linear_regex

# Frames of test runners, reflection and the runtime: not the application's code.
FRAMEWORK_PREFIXES = (
    "junit.", "org.junit.", "sun.", "java.lang.reflect.", "java.lang.Thread", "jdk.internal.",
    "org.apache.tools.ant.", "org.testng.", "org.gradle.", "org.apache.maven.", "kotlin.",
    "scala.", "_pytest", "pytest", "pluggy", "unittest", "node:internal", "internal/",
    "System.RuntimeMethodHandle", "System.Reflection",
)  # fmt: skip

_JAVA = re.compile(
    r"^\s*at\s+([\w$.<>-]+)\.([\w$<>-]+)\(([\w$.-]*\.\w+(?::\d+)?|Native Method|Unknown Source)\)",
    re.M,
)
_PY = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in ([\w<>.]+))?', re.M)
_JS = re.compile(r"^\s*at\s+(?:([\w$.<>\[\] ]+?)\s+\()?([^()\s]+?):(\d+)(?::\d+)?\)?\s*$", re.M)
_EXC = linear_regex.compile(
    r"\b((?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Exception|Error|Failure|Fault|Panic|Interrupt))\b"
)
_ALNUM = re.compile(r"[^0-9A-Za-z]+")
_FRAME_LINE = re.compile(r'^\s*(?:at\s|File\s")')


@dataclass(frozen=True)
class Frame:
    module: str  # package.Class / file path
    function: str
    line: str  # "" when unknown
    framework: bool

    @property
    def simple(self) -> str:
        """Simple class (or file) name + function: ``CategoryPlot.removeDomainMarker``."""
        mod = self.module.replace("\\", "/").rsplit("/", 1)[-1]
        mod = mod.rsplit(".", 1)[0] if mod.endswith((".py", ".js", ".ts", ".mjs")) else mod
        return f"{mod.rsplit('.', 1)[-1].split('$')[0]}.{self.function}"


def _is_framework(module: str) -> bool:
    return (
        module.startswith(FRAMEWORK_PREFIXES)
        or "site-packages" in module
        or "node_modules" in module
    )


def parse_frames(text: str) -> list[Frame]:
    """Frames in order of appearance (innermost first for Java/JS, outermost first for Python)."""
    found: list[tuple[int, Frame]] = []
    for m in _JAVA.finditer(text):
        loc = m.group(3)
        line = loc.rsplit(":", 1)[-1] if ":" in loc else ""
        module = m.group(1)
        found.append(
            (
                m.start(),
                Frame(module, m.group(2), line if line.isdigit() else "", _is_framework(module)),
            )
        )
    for m in _PY.finditer(text):
        module = m.group(1)
        found.append(
            (m.start(), Frame(module, m.group(3) or "<module>", m.group(2), _is_framework(module)))
        )
    taken = {pos for pos, _ in found}
    for m in _JS.finditer(text):
        if m.start() not in taken:
            module, fn = m.group(2), (m.group(1) or "<anonymous>").strip()
            frame = Frame(module, fn.rsplit(".", 1)[-1], m.group(3), _is_framework(module))
            found.append((m.start(), frame))
    return [f for _, f in sorted(found, key=lambda p: p[0])]


def exception_types(text: str) -> list[str]:
    """Exception class names in order of appearance, qualified as written, de-duplicated."""
    return list(dict.fromkeys(m.group(1) for m in _EXC.finditer(text)))


def split_trace(text: str) -> tuple[str, str, str]:
    """A raw trace -> (type, message, frames): the header ``pkg.SomeError: message`` (which may
    span several lines, up to the first frame line) and the rest."""
    lines = text.strip("\n").splitlines()
    head: list[str] = []
    i = 0
    while (
        i < len(lines) and not _FRAME_LINE.match(lines[i]) and not lines[i].startswith("Traceback")
    ):
        head.append(lines[i])
        i += 1
    rest = "\n".join(lines[i:])
    header = "\n".join(head).strip()
    if not header:  # Python: the exception is the last line
        last = lines[-1] if lines else ""
        m = re.match(r"^([\w.$]+):\s*(.*)$", last.strip())
        if m:
            return m.group(1), m.group(2), "\n".join(lines[:-1])
        return "", "", rest
    m = re.match(r"^([\w.$]+)(?::\s*(.*))?$", header, re.S)
    if m and (":" in header or _EXC.fullmatch(m.group(1))):
        return m.group(1), (m.group(2) or "").strip(), rest
    return "", header, rest


def _tok(text: str) -> str:
    return _ALNUM.sub("", text).lower()


_PAIRS = (
    # JUnit: the actual value ends at the last ``>`` closing a line before the first frame line
    # (a plain greedy ``.*>`` ran on into a frame's ``<init>``); a trace cut inside the actual
    # value keeps what is left of it, up to the frames (or the query's ``Context:`` line)
    re.compile(r"expected:\s*<(.*?)>\s*but was:\s*<((?:(?!\n\s*at\s).)*)>[ \t]*(?=\r?\n|\Z)", re.S),
    _CUT := re.compile(
        r"expected:\s*<(.*?)>\s*but was:\s*<(.*?)\s*(?=\n\s*at\s|\nContext: |\Z)", re.S
    ),
    linear_regex.compile(
        r"Expected:\s*(.*?)\n\s*(?:Result|Actual|Received|but was):\s*(.*?)(?:\n|$)", re.S
    ),
    re.compile(r"expected \[(.*?)\] but found \[(.*?)\]", re.S),
    linear_regex.compile(
        r"expected:?\s*(.*?),?\s+but (?:was|got|found)\s*:?\s*(.*?)(?:\n|$)", re.S | re.I
    ),
    linear_regex.compile(r"\bassert\s+(.*?)\s*==\s*(.*?)(?:\n|$)"),
    re.compile(r"^(.*?)\s+!=\s+(.*?)$", re.M),
)
_DIFF_TOKEN = re.compile(r"[A-Za-z0-9_$]+|[^\sA-Za-z0-9_$]")
_ALPHA = re.compile(r"[A-Za-z]+")
_WS = re.compile(r"\s+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
DIFF_WEIGHT = 2  # how many times a query counts each assertion-difference term
DIFF_PREFIXES = ("dd", "de", "da")  # the assertion-difference terms
MAX_DIFF_TERMS = 40


def assertion_pair(text: str) -> tuple[str, str] | None:
    """(expected, actual) of the first failed assertion found in ``text``."""
    for rx in _PAIRS:
        m = rx.search(text)
        if m:
            expected, actual = m.group(1), m.group(2)
            if rx is _CUT:  # the actual value was cut: compare as much of the expected
                expected = _prefix(expected, len(re.sub(r"\s+", "", actual)))
            return expected, actual
    return None


def _prefix(text: str, n: int) -> str:
    """The start of ``text`` holding its first ``n`` non-whitespace characters."""
    seen = 0
    for i, ch in enumerate(text):
        if not ch.isspace():
            if seen == n:
                return text[:i]
            seen += 1
    return text


def _changed(expected: str, actual: str) -> tuple[str, str]:
    marked_e = re.findall(r"\[(.*?)\]", expected, re.S)
    marked_a = re.findall(r"\[(.*?)\]", actual, re.S)
    if ("..." in expected or "..." in actual) and (marked_e or marked_a):  # JUnit ComparisonFailure
        return " ".join(marked_e), " ".join(marked_a)
    te, ta = _DIFF_TOKEN.findall(expected), _DIFF_TOKEN.findall(actual)
    ce: list[str] = []
    ca: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, te, ta, autojunk=False).get_opcodes():
        if op != "equal":
            ce += te[i1:i2]
            ca += ta[j1:j2]
    return " ".join(ce), " ".join(ca)


def _words(side: str) -> list[str]:
    """Words of a changed part and their camelCase parts, lower-cased, letters only, > 1 char."""
    out: dict[str, None] = {}
    for word in _ALPHA.findall(side):
        parts = _CAMEL.findall(word)
        for part in [word, *(parts if len(parts) > 1 else [])]:
            if len(part) > 1:
                out.setdefault(part.lower(), None)
    return list(out)


def diff_words(text: str) -> list[str]:
    """The words (and camelCase parts, lower-cased, letters only) that differ between the
    expected and the actual value of the first failed assertion in ``text``."""
    pair = assertion_pair(text[:20_000])
    if pair is None:
        return []
    expected, actual = (_words(side) for side in _changed(*pair))
    return list(dict.fromkeys(expected + actual))[:MAX_DIFF_TERMS]


def diff_sides(text: str) -> list[str]:
    """``de<word>`` for a word only the expected value's changed part has (missing from the
    actual), ``da<word>`` for one only the actual's has (unexpected)."""
    pair = assertion_pair(text[:20_000])
    if pair is None:
        return []
    expected, actual = (_words(side) for side in _changed(*pair))
    out = [f"de{w}" for w in expected if w not in actual]
    out += [f"da{w}" for w in actual if w not in expected]
    return out[:MAX_DIFF_TERMS]


_PUNCT = {
    "(": "lp", ")": "rp", "{": "lb", "}": "rb", "[": "ls", "]": "rs", ",": "cm", ".": "dt",
    ";": "sc", "=": "eq", ":": "cl", '"': "qt", "'": "qt", "<": "lt", ">": "gt", "+": "pl",
    "-": "mi", "*": "st", "/": "sl", "!": "ex", "?": "qm", "&": "am", "|": "br", "@": "at",
}  # fmt: skip


def _mask(tok: str) -> str:
    if re.fullmatch(r"\d+(?:\.\d+)?", tok):
        return "n"
    if re.match(r"[A-Za-z0-9_$]", tok):
        return "w"
    return _PUNCT.get(tok, "p")


def edit_shapes(text: str, limit: int = 20) -> list[str]:
    """``dx`` tokens: the masked shape of each edit from expected to actual (see module doc)."""
    pair = assertion_pair(text[:20_000])
    if pair is None:
        return []
    out: dict[str, None] = {}
    if pair[0] == pair[1]:  # printed alike, yet not equal (type, identity, tree structure)
        out["dxsame"] = None
    elif _WS.sub("", pair[0]) == _WS.sub("", pair[1]):  # only whitespace differs
        out["dxws"] = None
    te, ta = _DIFF_TOKEN.findall(pair[0]), _DIFF_TOKEN.findall(pair[1])
    if len(te) * len(ta) > 4_000_000:  # quadratic diff: skip pathological sizes
        return list(out)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, te, ta, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        ce, ca = te[i1:i2], ta[j1:j2]
        if len(ce) > 4 or len(ca) > 4:
            out.setdefault(f"dx{op[:3]}long", None)
            continue
        if (
            op == "replace"
            and len(ce) == len(ca)
            and all(
                re.sub(r"\d+", "0", x) == re.sub(r"\d+", "0", y)
                for x, y in zip(ce, ca, strict=True)
            )
        ):
            sig = "num"
        else:
            sig = "".join(map(_mask, ce)) + "x" + "".join(map(_mask, ca))
        left = _mask(te[i1 - 1]) if i1 > 0 else "bos"
        right = _mask(te[i2]) if i2 < len(te) else "eos"
        out.setdefault(f"dx{op[:3]}{left}{sig}{right}", None)
        out.setdefault(f"dx{op[:3]}{sig}", None)
    return list(out)[:limit]


def fingerprint_terms(*texts: str, app_frames: int = 8) -> list[str]:
    """Opaque FTS tokens for the exception classes and frames found in ``texts`` (de-duplicated,
    in order of appearance). See the module docstring."""
    out: dict[str, None] = {}
    for text in texts:
        if not text:
            continue
        for exc in exception_types(text):
            out.setdefault("xc" + _tok(exc.rsplit(".", 1)[-1]), None)
            if "." in exc:
                out.setdefault("xc" + _tok(exc), None)
        out.update(("dd" + w, None) for w in diff_words(text))
        out.update((t, None) for t in diff_sides(text))
        out.update((t, None) for t in edit_shapes(text))
        n_app = 0
        for fr in parse_frames(text):
            key = _tok(fr.simple)
            if fr.line:
                out.setdefault(f"fl{key}{fr.line}", None)
            if not fr.framework and n_app < app_frames:
                out.setdefault(f"fm{key}", None)
                n_app += 1
    return list(out)


def app_frames(text: str, limit: int = 12) -> list[str]:
    """The distinct application frames (``Class.method``), innermost first."""
    seen: dict[str, None] = {}
    for fr in parse_frames(text):
        if not fr.framework:
            seen.setdefault(fr.simple, None)
    return list(seen)[:limit]


def summarize_trace(trace: str, limit: int = 12) -> str:
    """A compact, readable rendering of a trace for embedding and for context injection:
    ``at Class.method, Class.method, …`` over the application frames (runner and
    reflection frames dropped)."""
    frames = app_frames(trace, limit)
    return "at " + ", ".join(frames) if frames else ""


# ---------------------------------------------------------------- trace affinity (reranking)
# Two failures in the same code are related even when they share no frame, line or message
# word: a failing ``InvocationMatcherTest`` and an exception thrown inside ``InvocationMatcher``,
# two tests of ``org.apache.commons.cli``. These features compare a query's and a lesson's
# *code units* (classes / modules, a test mapped to the unit it tests) and *packages*.
_QUALIFIED = re.compile(r"\b((?:[a-z_][\w]*\.)+)([A-Z][\w$]*)")
_TEST_AFFIX = re.compile(r"(?:Tests?|TestCase|IT|_tests?)$|^(?:Test(?=[A-Z])|test_)")


def code_unit(name: str) -> str:
    """The unit a class or module name is about: ``InvocationMatcherTest`` -> ``InvocationMatcher``,
    ``TestHelpFormatter`` -> ``HelpFormatter``, ``test_db`` -> ``db``, ``C$Inner`` -> ``C``."""
    base = name.split("$")[0]
    return _TEST_AFFIX.sub("", base) or base


def _package(fr: Frame) -> str:
    mod = fr.module.replace("\\", "/")
    if "/" in mod:  # a file path: its directories
        return ".".join(p for p in mod.split("/")[:-1] if p and p != ".")
    return ".".join(p for p in mod.split(".") if p[:1].islower() or p[:1] == "_")


@dataclass(frozen=True)
class TraceProfile:
    units: frozenset[str]
    packages: frozenset[str]
    # qualified classes named in the context (the failing test's class): ``pkg.FooTest``
    classes: frozenset[str] = frozenset()
    # issue / bug numbers in the names of the tests the context names (``testIssue772``)
    issues: frozenset[str] = frozenset()
    # the words of the failing test's class and method names (``skip``, ``input``, ``stream``)
    test_words: frozenset[str] = frozenset()
    # the trace has no application frame (runner frames only, or no frame at all: an
    # ``Expected exception`` failure, a message cut before its frames), so where the failure
    # is can only come from the failing test named in the context
    frameless: bool = False


# a test named after an issue or bug: the number in ``pkg.FooTest::testIssue772``,
# ``test_bug_1234``, ``should_fix_COMPRESS178`` (3+ digits; the test method, not the class)
_TEST_METHOD = re.compile(r"(?:::|#)\s*([\w$]+)|\b(test\w*)", re.I)
_ISSUE_NUMBER = re.compile(r"(?<![0-9])[0-9]{3,}(?![0-9])")


_NAME_STOPWORDS = frozenset(
    "test tests testcase should when then with the and for not does issue bug can has".split()
)


def test_words(context: str) -> frozenset[str]:
    """The words (camelCase / snake_case parts, lower-cased, 3+ letters, ``test`` and the like
    left out) of the test classes and test methods written in ``context``:
    ``codec.binary.Base64InputStreamTest::testSkipWrongArgument`` -> base, input, stream,
    skip, wrong, argument."""
    names = [m.group(2) for m in _QUALIFIED.finditer(context or "")]
    names += [m.group(1) or m.group(2) for m in _TEST_METHOD.finditer(context or "")]
    out = {
        w.lower()
        for name in names
        for w in _CAMEL.findall(name)
        if len(w) > 2 and w.lower() not in _NAME_STOPWORDS
    }
    return frozenset(out)


def issue_numbers(context: str) -> frozenset[str]:
    """The numbers (3+ digits) in the test method names written in ``context``: a failing test
    and a lesson whose tests are named after the same issue are about the same bug."""
    out: set[str] = set()
    for m in _TEST_METHOD.finditer(context or ""):
        out.update(n.lstrip("0") for n in _ISSUE_NUMBER.findall(m.group(1) or m.group(2)))
    out.discard("")
    return frozenset(out)


def trace_profile(trace: str, context: str = "") -> TraceProfile:
    """Code units and packages of the application frames of ``trace``, plus the qualified class
    names written in ``context`` (``org.mockito.internal.InvocationMatcherTest::should_…``);
    runner, reflection and runtime frames left out. ``classes``: the qualified classes named in
    ``context`` only (``org.mockito.internal.InvocationMatcherTest``); ``issues``: the issue
    numbers of the tests ``context`` names (:func:`issue_numbers`); ``frameless``: ``trace``
    has no application frame."""
    units: set[str] = set()
    pkgs: set[str] = set()
    classes: set[str] = set()
    frameless = True
    for fr in parse_frames(trace):
        if fr.framework:
            continue
        frameless = False
        units.add(code_unit(fr.simple.rsplit(".", 1)[0]))
        if pkg := _package(fr):
            pkgs.add(pkg)
    for m in _QUALIFIED.finditer(context or ""):
        pkg = m.group(1).rstrip(".")
        if not pkg.startswith(FRAMEWORK_PREFIXES) and not pkg.startswith(("java.", "javax.")):
            units.add(code_unit(m.group(2)))
            pkgs.add(pkg)
            classes.add(f"{pkg}.{m.group(2).split('$')[0]}")
    units.discard("")
    return TraceProfile(
        frozenset(units),
        frozenset(pkgs),
        frozenset(classes),
        issue_numbers(context),
        test_words(context),
        frameless,
    )


def jaccard(a: frozenset | set, b: frozenset | set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def package_prefixes(packages: Iterable[str]) -> set[str]:
    """Every leading run of segments of the packages: ``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``."""
    out: set[str] = set()
    for pkg in packages:
        parts = pkg.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


def idf(sets: Iterable[frozenset | set]) -> Callable[[str], float]:
    """Inverse frequency of each item among ``sets`` (e.g. the candidates of a search):
    ``log((n + 1) / (df + 1))``; an item every set has weighs ~0."""
    sets = list(sets)
    df = Counter(x for s in sets for x in s)
    n = len(sets)
    return lambda item: math.log((n + 1) / (df.get(item, 0) + 1))


def prefix_idf(profiles: Iterable[frozenset | set]) -> Callable[[str], float]:
    """Inverse frequency of each package prefix among the package sets ``profiles`` (the
    candidates of a search). A prefix every candidate shares (``org.apache.commons``,
    ``com.google``) weighs ~0, the one that tells them apart much."""
    return idf(package_prefixes(p) for p in profiles)


def weighted_overlap(query: frozenset | set, other: frozenset | set, weight) -> float:
    """The share of the query's weight (``weight(item)``, e.g. :func:`idf`) that ``other``
    has too, in [0, 1]."""
    total = sum(weight(x) for x in query)
    return sum(weight(x) for x in query & other) / total if total > 0 else 0.0


def package_affinity(
    query: frozenset | set, lesson: frozenset | set, weight: Callable[[str], float] | None = None
) -> float:
    """How deep the query's packages go into the lesson's, in [0, 1]: the longest common prefix
    of a query package and a lesson package over the query package's length, best pair.
    ``org.apache.commons.cli`` vs ``org.apache.commons.cli.help`` -> 1.0, vs
    ``org.apache.commons.codec`` -> 0.75. With ``weight`` (e.g. :func:`prefix_idf`) each
    segment counts by the weight of the prefix it ends rather than 1: sharing the prefixes
    everyone has then scores little, sharing the distinctive ones much."""
    best = 0.0
    for q in query:
        qs = q.split(".")
        seg = [weight(".".join(qs[: i + 1])) if weight else 1.0 for i in range(len(qs))]
        total = sum(seg)
        if total <= 0:
            continue
        for le in lesson:
            n = 0
            for x, y in zip(qs, le.split("."), strict=False):
                if x != y:
                    break
                n += 1
            best = max(best, sum(seg[:n]) / total)
    return best
