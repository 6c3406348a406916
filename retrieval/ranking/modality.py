"""Is a text source code, and is a query plain prose? The two facts behind the fusion weight of a
natural-language question asked of code.

bm25 matches words, and a question in words ("check if a variable is iterable") shares few of
them with the code that answers it (``def is_iterable(obj): try: iter(obj) …``): the vocabulary
mismatch that makes lexical retrieval weak for text-to-code search (Husain et al.,
"CodeSearchNet Challenge", 2019; Huang et al., "CoSQA", ACL 2021). When a prose query's best
vector candidates are mostly code, the ranker trusts its vector side more
(:class:`retrieval.ranking.hybrid.FusionConfig` ``code_alpha``). A query that names an identifier
(``snake_case``, ``CamelCase``, ``a.b``, a call) keeps the usual weight: there bm25 is the
sharper side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# a line that reads as a statement: a keyword at its start, an assignment, a bare call, a
# closing bracket, or a line ending in ``:``, ``{`` or ``;``
_CODE_LINE = re.compile(
    r"^\s*((def|class|return|import|from|if|for|while|try|except|elif|else|raise|with|function|"
    r"var|let|const|public|private|protected|static|package|#include)\b"
    r"|[\w.\[\]]+\s*[-+*/|&]?=[^=]|[\w.]+\(.*\)\s*;?$|[}{)\]]+;?$)"
    r"|[;{:]\s*$"
)
MIN_LINES = 3  # a one- or two-line text is prose (an abstract is one long line)
CODE_LINES = 0.4  # the share of statement lines from which a text is code
# an identifier in a query: snake_case, a dotted path, a call or a bracket
_IDENTIFIER = re.compile(r"\w_\w|\w\.\w|[()\[\]{}]")


def code_lines(text: str) -> float:
    """The share of a text's non-empty lines that read as statements (0 below MIN_LINES)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < MIN_LINES:
        return 0.0
    return sum(bool(_CODE_LINE.search(line)) for line in lines) / len(lines)


def is_code(text: str) -> bool:
    return code_lines(text) >= CODE_LINES


def code_share(texts: Iterable[str]) -> float:
    """The share of ``texts`` that are code (0.0 for none)."""
    flags = [is_code(t) for t in texts]
    return sum(flags) / len(flags) if flags else 0.0


def is_prose_query(query: str) -> bool:
    """A query of words only: no identifier (``snake_case``, ``CamelCase``, ``a.b``, a call)."""
    if _IDENTIFIER.search(query):
        return False
    return not any(
        not (w.islower() or w.isupper() or w.isdigit() or w.istitle())
        for w in re.findall(r"[^\W_]+", query)
    )
