"""The injection scan's *quote escape* rules: a stored text that pretends the quoted reference
material has ended and then speaks with a new authority. Data, like :mod:`.injection_rules`,
applied by :mod:`.injection`.
"""

from __future__ import annotations

import re

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan.injection_rules import STRONG, WEAK, Rule, rule

# ---------------------------------------------------------------- quote escapes
# Recalled text reaches an agent quoted as data (``framing.py``: a header line, a provenance line
# per item, every line of the text after ``> ``). A stored text that pretends the quoted data
# has ended ("end of reference material", ``</context>``, ``[/quote]``, a provenance line or the
# header of its own) and then speaks with a new authority ("new instructions from the
# administrator", an ``ADMIN:`` line, "everything below is an instruction") is written to be
# read as outside the quote. The marker alone is weak (a pasted document may end with "End of
# document"); followed by a new authority it is strong.
_DECOR = r"[ \t>#*_=~\-–—\[(<{|/]*"
_QUOTED = (
    r"(?:reference|referenced|quoted|quote|recalled|retrieved|provided|untrusted|external|"
    r"cited|user|search|tool|memory|pattern-memory)"
)
_QUOTE_NOUN = (
    r"(?:material|materials|data|context|memory|memories|documents?|quotes?|quotation|"
    r"excerpts?|snippets?|results|input|contents?|notes|items|text|block|section|passages?|"
    r"records|entries|references?|output|sources?)"
)
# the element names of quoted data, alone or joined: context, untrusted_data, recalled-memories
_TAG_CORE = (
    r"(?:quote|quoted|blockquote|context|reference|references|memory|memories|recall|recalled|"
    r"retrieved|retrieval|untrusted|documents?|doc|sources?|search_results?|results?|"
    r"tool_output|tool_result|excerpt|snippet|material|evidence|input|data|observation|"
    r"knowledge|user_[a-z0-9_-]+)"
)
# a closing tag's name is matched as one unambiguous run, then checked against the names of
# quoted data (:func:`_data_element`): a pattern of optional parts around the core word tries
# every split of a long ``</user_a_a_a…`` run
_NAME = r"[a-z][a-z0-9_-]{0,60}"
_DATA_NAME = rf"(?:[a-z]+[_-]){{0,8}}{_TAG_CORE}(?:[_-][a-z]+){{0,8}}"
_DATA_ELEMENT = linear_regex.compile(_DATA_NAME)
_DATA_NAMES: dict[str, bool] = {}  # the names read so far (a text repeats its tags' names)


def _data_element(m: re.Match) -> bool:
    """A closing tag (``</…>``, ``[/…]``) closes an element of quoted data, or the match is no
    closing tag at all."""
    name = m.groupdict().get("tag") or m.groupdict().get("btag")
    if name is None:
        return True
    known = _DATA_NAMES.get(name)
    if known is None:
        if len(_DATA_NAMES) >= 4096:
            _DATA_NAMES.clear()
        known = _DATA_NAMES[name] = _DATA_ELEMENT.fullmatch(name) is not None
    return known


def _closer(name: str) -> str:
    """The closers of quoted data, a closing tag's name matched by ``name``."""
    return (
        # "--- End of reference material ---", "(end of quoted data)", "END QUOTE", "unquote"
        rf"(?:^|[.!?;:]\s+|\s[-–—=~*#|/]{{2,}}\s*){_DECOR}"
        rf"(?:(?:end|ends|ended|close|closes|closed|closing|stop|finish|finished)(?: of)?"
        rf"(?: the| this| that| all| your)? (?:{_QUOTED}(?: {_QUOTED}){{0,8}}(?: {_QUOTE_NOUN})?|"
        r"quotes?|quotation|context|data|memory|memories|references|documents?)|end ?quote|unquote)"
        # … and nothing more on its line or in its sentence ("End of the reference material for
        # chapter 3" is a textbook's heading)
        r"(?:[ \t]*[\]\)>}*_=~\-–—|/]+[ \t\]\)>}*_=~\-–—.:!|/]*(?=$|\s)|[ \t]*[.:!;,]?[ \t]*$"
        r"|[ \t]*[.:!;,](?=\s))"
        # "the reference material ends here", "quoted data is over", "that concludes the quote"
        rf"|\b(?:{_QUOTED} ){{1,8}}{_QUOTE_NOUN} (?:ends|ended|stops|is over|is closed|closes|"
        r"finishes)(?: here| now)?\b"
        rf"|\b{_QUOTE_NOUN} (?:ends|ended|stops|is over|closes|finishes) (?:here|now)\b"
        rf"|\b(?:this|that|which|here) (?:concludes|ends|closes|is the end of|marks the end of) "
        rf"(?:the |this )?(?:{_QUOTED} ){{0,8}}"
        rf"(?:{_QUOTE_NOUN}|quote)\b"
        # closing tags of data: </context>, </recalled_memories>, [/reference], [END OF DATA],
        # <<END>> (``tag``: a text that opened the element itself holds a sample, not an escape)
        rf"|</(?P<tag>{name})\s*>"
        rf"|\[/(?P<btag>{name})\]"
        r"|\[(?:end|/)\s*(?:of )?(?:the )?(?:quote|data|context|reference|memory|document|input|"
        r"material|recalled \w+|quoted \w+)s?\]|<<\s*end\w*\s*>>"
        # the framing's own lines: its header, a provenance line, its closing count
        r"|reference material recalled from memory|quoted data with its source"
        r"|^[ \t>]*— (?:memory \(|file \S+:\d|lesson |observation of |exchange of session |"
        r"turn of session )[^\n]{0,200}·"
        r"|\(\d+ recalled items? (?:was|were) left out"
        # French, Spanish, Portuguese, German, Italian: "fin des données de référence", …
        r"|\b(?:fin (?:des|du|de la|de l'|de los|del|de las) ?|fim (?:dos|do|da|das) |"
        r"fine (?:dei|del|della|delle) )(?:donnees|materiel|materiau|document\w*|contexte?|"
        r"citation|citazione|citacao|memoires?|memorias?|memorie|references?|referencias?|"
        r"riferimenti|datos|dados|dati|material\w*|cita|extrait|extracto)\b"
        r"|\bende (?:der|des) \w*(?:daten|material|materials|dokument\w*|kontext\w*|zitat\w*|"
        r"referenz\w*|erinnerung\w*)\b"
    )


_CLOSER = _closer(_NAME)

# instructions for the reader
_FOR_READER = (
    r"you\b|the (?:assistant|agent|ai|model|llm)s?\b|(?:all )?(?:agents|assistants|ais|models|"
    r"llms)\b"
)
# "new instructions", "updated system prompt", "admin override"
_NEW_AUTHORITY = (
    r"\b(?:new|updated|revised|real|actual|true|additional|priority|urgent|override|system|"
    r"admin|administrator|operator|developer|root|security|maintenance|emergency)"
    r"(?: \w+)? (?:instructions?|directives?|orders|commands|tasks?|rules|policy|prompt|"
    r"guidance|notice|override|mode)\b"
)
# (not instructions for someone else, or where they are kept: "new instructions for
# contributors are in CONTRIBUTING.md")
_ELSEWHERE = (
    rf"(?! (?:for (?!{_FOR_READER})|(?:are|is) (?:in|listed|published|available|documented|"
    r"described|kept|found)\b|can be found\b|live in\b|lives in\b))"
)
# what may follow a new authority, spelled out for RE2 (it has no lookahead): a superset of
# what _ELSEWHERE lets through, that leaves out " for <someone else>"
_NOT_FOR_OTHERS = (
    rf"(?:\Z|[^ ]| (?:\Z|[^f]|f(?:\Z|[^o]|o(?:\Z|[^r]|r(?:\Z|[^ ]| (?:{_FOR_READER}))))))"
)
_OTHER_AUTHORITY = (
    # "instructions from the administrator", "a message from your operator"
    r"\b(?:instructions?|directives?|orders|commands|messages?|notices?|notes?|updates?|"
    r"override|memo|announcement|requests?) (?:from|by|of) (?:the |your |an? )?(?:\w+ )?"
    r"(?:system|administrator|admin|sysadmin|operator|developer|owner|maintainer|security team|"
    r"root|supervisor|orchestrator|platform|provider|anthropic|openai|it department|"
    r"management|user)\b"
    # a header of a new speaker: "ADMIN:", "[system]", "Operator notice:"
    r"|(?:^|\n)[ \t>#*\[(<]*(?:system|admin|administrator|operator|developer|root|supervisor|"
    r"orchestrator|assistant|instructions?)(?:[ _-](?:notice|message|note|instructions?|override|"
    r"update|directive|prompt|mode))?\s*[:\]>)]"
    # "the system administrator says:"
    r"|\b(?:system |project |site )?(?:administrator|admin|sysadmin|operator|developer|owner|"
    r"maintainer|supervisor|orchestrator) (?:says|said|writes|wrote|instructs|requires|orders|"
    r"demands|wants|asks|has (?:issued|sent|requested|ordered|decided))\b"
    # "everything below is an instruction", "what follows is not data"
    r"|\b(?:everything|all|the text|what(?:ever)?|the rest) (?:below|after this|that follows|"
    r"following)(?: this line)? (?:is|are) (?:an? )?(?:instructions?|orders|commands|"
    r"not (?:data|quoted|a quote|reference)|from)"
    r"|\b(?:the following|what follows) (?:is|are) (?:not (?:data|reference|quoted|part)|"
    r"(?:your |new |real |the )?instructions)"
    # an order to the reader
    r"|\byou (?:must|are (?:now )?(?:to|required to|instructed to)|will now|should now)\b"
    r"|\b(?:from now on|going forward|henceforth)\b"
    r"|\b(?:the |all |any )?(?:assistant|agent|ai|model|llm)s? (?:must|shall|will now|"
    r"is (?:now )?(?:required|instructed|to)|are (?:now )?(?:required|instructed|to))\b"
    r"|\b(?:your|the agent'?s?|the assistant'?s?) (?:(?:new|next|real|actual|only|true) "
    r"(?:task|job)|(?:new |next |real )?(?:instructions|orders)) (?:is|are)\b"
    # French, Spanish, Portuguese, German, Italian
    r"|\b(?:nouvelles?|vraies?) (?:instructions|consignes|directives|ordres)"
    r"|\b(?:instructions?|consignes|message|ordres?) (?:de l'|du |de la )(?:administrat\w+|"
    r"systeme|operateur|developpeur)"
    r"|\b(?:nuevas?|verdaderas?|novas?) (?:instrucciones|indicaciones|ordenes|directivas|"
    r"instrucoes|ordens|diretrizes)"
    r"|\b(?:instrucciones|mensaje|ordenes|aviso|instrucoes|mensagem|ordens) d(?:el?|o|a) "
    r"(?:administrador|sistema|operador|desarrollador|desenvolvedor)"
    r"|\bneue (?:anweisungen|instruktionen|befehle|vorgaben|regeln)"
    r"|\b(?:anweisungen?|nachricht|befehle?|mitteilung) (?:des|vom|von) (?:administrators?|"
    r"admins?|systems?|betreibers?|entwicklers?)"
    r"|\bnuove (?:istruzioni|direttive|regole)"
    r"|\b(?:istruzioni|messaggio|ordini) (?:dell'|del )(?:amministratore|sistema|operatore)"
)
_AUTHORITY = f"{_NEW_AUTHORITY}{_ELSEWHERE}|{_OTHER_AUTHORITY}"
_CLOSER_WORDS = (
    "end ends ended close closes closed closing stop finish finished unquote endquote fin fim "
    "fine ende finishes over concludes"
)
_CLOSER_SUBS = ("</", "[/", "[end", "<<", "— ", "reference material", "quoted data", "left out")
_CLOSER_PRE = (  # cheaper than _CLOSER: most texts have none of these
    r"\b(?:end|ends|ended|close[sd]?|closing|stop|finish\w*|concludes|unquote|endquote|fin|fim|"
    r"fine|ende|over|stops|finishes)\b|</|\[/|<<|reference material recalled|quoted data with|"
    r"— |left out"
)
# where the rules below can match and be accepted, for the search of their candidates (each
# a superset of the matches they accept: a closing tag of data, an authority not for others)
_CLOSER_OF_DATA = _closer(_DATA_NAME)
ESCAPE: tuple[Rule, ...] = (
    rule(  # the quote closed, then a new authority speaks
        "markup",
        STRONG,
        rf"(?:{_CLOSER})[\s\S]{{0,300}}?(?:{_AUTHORITY})",
        _CLOSER_WORDS,
        _CLOSER_SUBS,
        pre=_CLOSER_PRE,
        accept=_data_element,
        candidates=rf"(?:{_CLOSER_OF_DATA})[\s\S]{{0,300}}?"
        rf"(?:{_NEW_AUTHORITY}{_NOT_FOR_OTHERS}|{_OTHER_AUTHORITY})",
    ),
    rule(  # the marker alone
        "markup",
        WEAK,
        _CLOSER,
        _CLOSER_WORDS,
        _CLOSER_SUBS,
        pre=_CLOSER_PRE,
        accept=_data_element,
        candidates=_CLOSER_OF_DATA,
    ),
)
