"""The injection scan's markup rules: chat-template and tool-call syntax (``MARKUP``, never a
mention: a quoted token is still a token), role headers of a fake dialogue; then the patterns of
hidden characters, and the words and quotes that make a phrase a *mention* rather than an
instruction. Data, like :mod:`.injection_rules`, applied by :mod:`.injection`.
"""

from __future__ import annotations

import re

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan.injection_rule import (
    MEDIUM,
    STRONG,
    PairedTags,
    Rule,
    paired,
    rule,
)

# ---------------------------------------------------------------- markup (not mentionable)
MARKUP: tuple[Rule, ...] = (
    rule(
        "markup",
        STRONG,
        r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|"
        r"end_header_id|begin_of_text|end_of_text|tool|function|ipython)\|>"
        r"|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>",
        subs=("<|", "inst]", "sys>>", "_of_turn>"),
    ),
    rule(
        "markup",
        STRONG,
        r"</?(?:tool_call|tool_calls|tool_use|tool_code|function_calls?|function_results?|"
        r"tool_result)\b[^>]{0,80}>"
        r"|<invoke\s+name\s*=|<parameter\s+name\s*=[^>]*>[^<]{0,300}</parameter>|<function=\w+",
        subs=("<tool_", "<function", "</function", "<invoke", "<parameter"),
    ),
    paired(
        "markup",
        STRONG,
        PairedTags(
            "system|system[_-]prompt|assistant|human|instructions?|developer|im_system",
            2,
            2000,
            also=r"</(?:context|document|data|memory|user|search_results)>\s*"
            r"<(?:system|assistant|instructions?)>",
        ),
        subs=("<system", "<assistant>", "<human>", "<instruction", "<developer>", "<im_system>"),
    ),
    rule(
        "markup",
        STRONG,
        r"[\"'](?:function_call|tool_calls|tool_use)[\"']\s*:",
        subs=("function_call", "tool_calls", "tool_use"),
    ),
    paired(
        "markup", MEDIUM, PairedTags("important|secret|hidden", 10, 4000), "important secret hidden"
    ),
    rule(
        "markup",
        MEDIUM,
        r"^#{2,4} ?(?:instruction|system|response)s?:?\s*$",
        "instruction instructions system response responses",
    ),
)
ROLE_HEADER = linear_regex.compile(
    r"^[ \t>#*]*(system|assistant|human|user|ai)(?: (?:message|prompt|instructions?|notice|"
    r"override|update))?\s*:[ \t]*\S",
    re.M,
)

# ---------------------------------------------------------------- hidden characters
BIDI = linear_regex.compile("[\u202a-\u202e\u2066-\u2069]")
INVISIBLE_OPS = linear_regex.compile("[\u2061-\u2064]")
_ZW = "\u200b\u200c\u200d\u2060\ufeff\u180e"
ZW_RUN = linear_regex.compile(f"[{_ZW}\u2061-\u2064]{{3,}}")
ZW_IN_WORD = linear_regex.compile("[A-Za-z][\u200b\u2060\ufeff\u180e]+[A-Za-z]")
ZWJ_IN_ASCII = linear_regex.compile("[A-Za-z][\u200c\u200d]+[A-Za-z]")
FLAG_SEQUENCE = linear_regex.compile(
    "\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f"
)
TAGS = linear_regex.compile("[\U000e0000-\U000e007f]")
HIDDEN = linear_regex.compile(
    f"[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069{_ZW}\u2061-\u2064]"
)

# ---------------------------------------------------------------- mentions
# words of a text *about* attacks (also a feature of the model in .injection_model)
DISCUSSION = linear_regex.compile(
    r"\b(?:such as|e\.g\.|eg\.|i\.e\.|for example|for instance|phrases?|strings?|"
    r"attacks?|attackers?|attacking|injections?|injected|jailbreak\w*|malicious|adversar\w+|"
    r"detect\w*|flag\w*|known as|called|quoted?|quoting|patterns?|classifiers?|threats?|"
    r"payloads?|poison\w*|mitigat\w+|defen[cs]e\w*|red[- ]team\w*|hoping|tricks?|examples?)\b"
)
URL = linear_regex.compile(r"\S+://\S*")
OPENING = "\"“'‘«「`"
CLOSING = "\"”'’»」`"
