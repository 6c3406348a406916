"""Instruction-injection scanning: spot text written to steer the model that will later read it.

Pure module (standard library + pydantic), beside :mod:`.secrets`. What one agent stores is
later put into another agent's context by ``recall``; a memory, an observation, a lesson or a
workspace file that says *"ignore previous instructions and …"* is an attack on that agent.
``scan`` returns the findings, ``verdict`` decides, ``policy_from_env`` reads
``PATTERN_INJECTION_POLICY`` (``warn`` by default, or ``block``).

What is detected (each finding has a *kind* and a weight: strong 1, medium 0.6, weak 0.5;
content is suspicious when its findings add up to 1, where the weak findings of one kind count
once: one strong finding, a medium one and another, or two weak ones of different kinds):

* ``override`` — "ignore / disregard / forget / set aside … previous / prior / above …
  instructions / rules / guidelines", "whatever you were told", "the instructions above are
  void", "reveal your system prompt", in English and in French, Spanish, German, Portuguese,
  Italian, Russian, Chinese and Japanese.
* ``jailbreak`` — personas and modes: "you are now DAN", "developer mode", "no longer bound by
  any rules", "without any safety guidelines".
* ``addressed`` — text addressed to the model reading it: "note to AI assistants", "if you are
  an AI", "Dear Claude", "as the assistant, you should", "agents reading this memory". Weaker:
  "from now on you will", "your new task is", "the assistant must".
* ``concealment`` — hiding from the user: "do not mention this note", "the user does not need
  to know", "never reveal these instructions". Weaker: "without asking the user", "silently".
* ``markup`` — chat-template and tool-call syntax: special tokens (``<|im_start|>``,
  ``[INST]``, ``<<SYS>>``), tool-call tags (``tool_call``, ``function_calls``, ``invoke``),
  paired role tags (``<system>…</system>``), function-call JSON keys, a fake dialogue of two
  roles (``Human:`` … ``Assistant:``). Weaker: one ``SYSTEM:`` header line.
* ``hidden`` — characters a reader does not see: Unicode tag characters (outside an emoji flag),
  bidi embedding / override / isolate controls, zero-width characters inside a word or in runs,
  invisible operators.
* ``obfuscated`` — an override phrase found only after undoing an obfuscation: homoglyphs
  (Cyrillic/Greek letters inside Latin words), leetspeak, letter spacing, base64, text smuggled
  in tag characters.
* ``intent`` — a request to the reader ("I'd like you to", "please", "make sure to", "you
  should", an imperative aimed at "your response / answer") paired with an out-of-task action:
  turning off tests or checks, sending credentials somewhere, ignoring the user's request,
  changing credentials or force-pushing (medium unless it hands over secrets or overrides the
  user), rewriting or extending the reply (strong), code to be slipped into the reader's output
  (medium, with ``action`` for a snippet that reaches the network, the shell or the user's
  files). A polite request alone weighs 0.6: it takes a second finding, such as concealment.
* ``action`` (weak) — a dangerous command or exfiltration (``curl … | sh``, ``rm -rf ~``,
  ``~/.ssh``, ``--no-verify``, "send the credentials to https://…"): only counts together with
  a finding of another kind, because install guides say the same things.

Documents *about* prompt injection stay quiet: an override phrase in quotes, or near words such
as "attack", "injection", "such as", "for example", is a mention, not an instruction. A README
that says "you must run make test" is not addressed to a model. Measured by
``benchmarks/poisoning.py`` (docs/security.md).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from .secrets import env_policy

__all__ = [
    "Finding",
    "InjectionPolicy",
    "Verdict",
    "policy_from_env",
    "scan",
    "verdict",
]

POLICY_ENV = "PATTERN_INJECTION_POLICY"
DISABLE_ENV = "PATTERN_DISABLE_CONTENT_SCAN"
THRESHOLD = 1.0
STRONG, MEDIUM, WEAK = 1.0, 0.6, 0.5


class InjectionPolicy(StrEnum):
    """What to do with content that reads like instructions to the model."""

    warn = "warn"
    block = "block"


def policy_from_env(environ: Mapping[str, str] = os.environ) -> InjectionPolicy | None:
    """The configured ``PATTERN_INJECTION_POLICY``, or ``None`` when content scanning is
    disabled (``PATTERN_DISABLE_CONTENT_SCAN``); see :func:`.secrets.env_policy`."""
    return env_policy(environ, POLICY_ENV, InjectionPolicy)


class Finding(BaseModel):
    """One instruction-like passage: its kind, weight and a short excerpt."""

    model_config = ConfigDict(frozen=True)

    kind: str
    weight: float
    excerpt: str


class Verdict(BaseModel):
    """The scan of one text: ``suspicious`` is the reason to store, or None."""

    model_config = ConfigDict(frozen=True)

    suspicious: str | None
    findings: tuple[Finding, ...] = ()
    score: float = 0.0


# --------------------------------------------------------------------------- normalisation

_CF = re.compile(  # format characters: invisible, dropped before phrases are matched
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\U000e0000-\U000e007f]"
)
_ACCENT = re.compile(r"(?<=[a-z])[\u0300-\u036f]+")
# Cyrillic and Greek letters that look like Latin ones (text is case-folded first)
_CONFUSABLE = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04cf\u0261"
    "\u03bf\u03b1\u03b5\u03ba\u03bd\u03c1\u03c4\u03c5\u03c7",
    "aeopcyxijsdlgoaeknptux",
)
_MIXED_SCRIPT = re.compile(r"[a-z][\u0370-\u04ff]|[\u0370-\u04ff][a-z]")
_LEET = str.maketrans("013457@$", "oieastas")
_PUNCT = ".,;:!?()[]{}\"'`*"
_LEET_TRIGGERS = frozenset(
    "ignore disregard forget override bypass previous prior instructions rules guidelines "
    "prompt system assistant".split()
)
_SPACED_HINT = re.compile(r"\b\w \w \w \w \w\b")
_SPACED = re.compile(r"(?<!\S)(?:\w {1,3}){4,}\w(?!\S)")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _fold(text: str) -> str:
    """Case-folded, compatibility-normalised, invisible format characters removed, accents of
    Latin letters dropped (``précédentes`` -> ``precedentes``)."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", _CF.sub("", text).casefold())
    return unicodedata.normalize("NFC", _ACCENT.sub("", text))


def _despaced(folded: str) -> str:
    """``i g n o r e   a l l`` -> ``ignore all``: letter-spaced words joined again."""

    def join(m: re.Match) -> str:
        return re.sub(r" {2,}", "\0", m.group(0)).replace(" ", "").replace("\0", " ")

    return _SPACED.sub(join, folded)


def _decoded_b64(text: str) -> list[str]:
    out = []
    for tok in text.split():
        if len(tok) < 24 or not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}[.,;:)\"']?", tok):
            continue
        blob = tok.rstrip(".,;:)\"'")
        try:
            s = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if " " in s and sum(c.isprintable() for c in s) >= 0.95 * len(s):
            out.append(s)
    return out


def _tag_payload(text: str) -> str:
    """ASCII smuggled in Unicode tag characters (U+E0020-E007E), decoded."""
    return "".join(chr(ord(c) - 0xE0000) for c in text if 0xE0020 <= ord(c) <= 0xE007E)


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class _Rule:
    """A pattern over folded text, tried only when its prefilter passes: one of its ``words``
    (whole words) or ``subs`` (substrings) occurs, and one of the ``need`` words when it has
    some. A rule with no words and no subs always runs. The prefilter keeps the scan cheap."""

    kind: str
    weight: float
    rx: re.Pattern
    words: frozenset[str] = frozenset()
    subs: tuple[str, ...] = ()
    need: frozenset[str] = frozenset()
    mentionable: bool = True  # a quoted or discussed phrase is not an instruction

    def applies(self, folded: str, words: set[str], ascii_only: bool) -> bool:
        if self.need and self.need.isdisjoint(words):
            return False
        if not self.words and not self.subs:
            return True
        if not self.words.isdisjoint(words):
            return True
        if ascii_only and self.subs and not self.subs[0].isascii():
            return False  # Cyrillic / CJK triggers cannot occur in ASCII text
        return any(map(folded.__contains__, self.subs))


def _rule(
    kind: str,
    weight: float,
    pattern: str,
    words: str = "",
    subs: tuple[str, ...] = (),
    need: str = "",
    mentionable: bool = True,
) -> _Rule:
    rx = re.compile(pattern, re.M)
    return _Rule(
        kind, weight, rx, frozenset(words.split()), subs, frozenset(need.split()), mentionable
    )


_W = r"[\w'’-]+"  # one word
_GAP = rf"(?:{_W}[ ,]+){{0,3}}?"  # up to three words in between
_VERB = (
    r"(?:ignore|ignoring|disregard|disregarding|forget|override|overriding|bypass|abandon|"
    r"set aside|put aside|pay no (?:attention|heed) to|do not (?:follow|obey)|"
    r"don't (?:follow|obey)|stop (?:following|obeying)|no longer (?:follow|obey)|discard|"
    r"throw out|throw away|drop|scrap|dismiss|nullify|forget about)"
)
_VERBS = (
    "ignore ignoring disregard disregarding forget override overriding bypass abandon aside "
    "heed follow obey following obeying discard throw drop scrap dismiss nullify"
)
_BEFORE = (
    r"(?:previous|previously given|prior|preceding|earlier|above|foregoing|original|initial|"
    r"old|former|system|developer|existing|default|current)"
)
_OBJ = (
    r"(?:instructions?|prompts?|system prompt|directives?|directions|guidelines|guidance|"
    r"rules|programming|commands|orders|constraints|restrictions|safeguards|"
    r"safety (?:rules|guidelines|filters))(?! of\b)"
)
_AI = (
    r"(?:ai|a\.i\.|llms?|(?:large )?language models?|ai (?:assistants?|agents?|models?)|"
    r"assistants?|chat ?bots?|copilot|claude|chatgpt|gpt(?:-?\d\w*)?|gemini|cursor|agents?|"
    r"models?|bots?|bard)"
)
# a text naming the model it addresses names one of these ("model" alone is too common)
_AI_WORDS = (
    "ai llm llms language assistant assistants chatbot chatbots bot copilot claude chatgpt gpt "
    "gemini cursor agent agents bard"
)

_RULES: tuple[_Rule, ...] = (
    # ---------------------------------------------------------------- override
    _rule(
        "override",
        STRONG,
        rf"\b{_VERB} (?:"
        # "ignore all previous instructions", "forget your prior guidelines"
        rf"{_GAP}{_BEFORE} (?:{_W} ){{0,2}}?{_OBJ}\b"
        # "set aside the rules you were given", "the guidance you received before this message"
        rf"|{_GAP}{_OBJ} (?:that )?(?:you(?:'ve| have)? (?:were |been )?"
        r"(?:given|received|told|got)|above|before this|so far|up to now|until now)"
        # "disregard whatever you were told"
        r"|(?:whatever|everything|anything|all(?: that)?|what) "
        r"(?:you(?:'ve| have)? (?:were|been|was) (?:told|instructed|given|asked|taught)|"
        r"(?:was|has been) (?:said|written|stated) (?:above|before|earlier))"
        # "ignore your instructions", "disregard all rules"
        r"|(?:all (?:of )?(?:your |the |my )?|your |any (?:of )?(?:your )?)(?:rules|instructions|"
        r"guidelines|restrictions|programming|directives|safety (?:rules|guidelines))\b(?! of\b)"
        # "ignore the retrieved documents": an order to drop the context it arrives with
        r"|(?:all )?(?:of )?(?:the |these |those )?(?:retrieved|provided|supplied|search|"
        r"recalled|given) (?:documents?|context|results|sources|passages|memories)\b)",
        _VERBS,
    ),
    # "the instructions above are void", "previous directives are obsolete"
    _rule(
        "override",
        STRONG,
        rf"\b(?:{_BEFORE} (?:{_W} ){{0,2}}?{_OBJ}|{_OBJ} above) (?:are|is|were|was|have been|"
        r"has been) (?:now )?(?:all )?(?:void|null|obsolete|revoked|cancell?ed|invalid|outdated|"
        r"superseded|replaced|withdrawn|deprecated|no longer (?:valid|apply|applicable|in effect)|"
        r"lifted|suspended|rescinded|removed|(?:just |only )?a test|fake|wrong)",
        "void null obsolete revoked cancelled canceled invalid outdated superseded replaced "
        "lifted suspended rescinded removed "
        "withdrawn deprecated longer test fake wrong",
    ),
    # prompt leaks and rewrites
    _rule(
        "override",
        STRONG,
        r"\b(?:reveal|print|output|show|repeat|disclose|display|leak|dump) (?:me )?"
        r"(?:the |your |all )?(?:full |entire |complete |hidden |original |initial |exact )?"
        r"(?:system prompt|system message|initial instructions|hidden instructions|"
        r"developer (?:message|instructions))"
        r"|\bsystem prompt (?:override|update)\b"
        r"|\b(?:override|replace|rewrite) (?:the |your )?system prompt\b",
        "prompt message instructions",
        need="system initial hidden developer",
    ),
    # French, Spanish and Portuguese, Italian, German, Russian, Chinese and Japanese
    _rule(
        "override",
        STRONG,
        r"\b(?:ignore[rz]?|oublie[rz]?|ne (?:tiens|tenez) pas compte d)\b.{0,20}?"
        r"(?:instructions|consignes|directives|regles) (?:precedentes|anterieures|ci-dessus)",
        "precedentes anterieures dessus",
    ),
    _rule(
        "override",
        STRONG,
        r"\b(?:ignora[r]?|ignore|olvida[r]?|olvide|omite|descarta|haz caso omiso de|"
        r"desconsidere|desconsidera[r]?|esqueca)\b.{0,20}?"
        r"(?:instrucciones|indicaciones|reglas|ordenes|directrices|instrucoes|orientacoes|"
        r"regras|diretrizes) (?:anteriores|previas|acima)",
        "anteriores previas acima",
    ),
    # "olvida lo que te dijeron", "oublie ce qu'on t'a dit", "vergiss, was man dir gesagt hat"
    _rule(
        "override",
        STRONG,
        r"\b(?:olvida|olvide|ignora|ignore|esquece|esqueca|desconsidere)\b (?:todo )?(?:lo|o) que "
        r"(?:te|le|lhe) (?:dijeron|han dicho|indicaron|ordenaron|pidieron|disseram|mandaram)"
        r"|\b(?:oublie[zr]?|ignore[zr]?)\b (?:tout )?ce qu'on (?:t'a|vous a) (?:dit|demande|ordonne)"
        r"|\b(?:vergiss|vergessen sie|ignoriere)\b,? (?:alles,? )?was (?:man )?(?:dir|ihnen) "
        r"(?:gesagt|befohlen|aufgetragen)",
        "dijeron dicho indicaron ordenaron pidieron disseram mandaram dit demande ordonne "
        "gesagt befohlen aufgetragen",
    ),
    _rule(
        "override",
        STRONG,
        r"\b(?:ignora(?:te|re)?|dimentica(?:te|re)?)\b.{0,20}?"
        r"(?:istruzioni|indicazioni|regole|direttive) (?:precedenti|di prima|sopra)",
        "istruzioni indicazioni regole direttive",
    ),
    _rule(
        "override",
        STRONG,
        r"\b(?:ignorier(?:e|en sie)?|vergiss|vergessen sie|missachte)\b.{0,20}?"
        r"(?:vorherigen|bisherigen|vorigen|obigen|fruheren|vorangegangenen) "
        r"(?:anweisungen|instruktionen|regeln|befehle|vorgaben)",
        "anweisungen instruktionen regeln befehle vorgaben",
    ),
    _rule(
        "override",
        STRONG,
        r"(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|не обращай внимания на)"
        r".{0,20}?(?:предыдущие|прошлые|прежние|вышеуказанные|все) "
        r"(?:инструкции|указания|правила|команды)",
        subs=("инструкц", "указани", "правила", "команды"),
    ),
    _rule(
        "override",
        STRONG,
        r"(?:忽略|无视|忘记|忘掉|不要理会|忽视)(?:掉)?(?:你)?(?:之前|以前|上面|先前|前面|以上|上述)?"
        r"(?:的)?(?:所有|全部|一切)?(?:的)?(?:指令|指示|说明|规则|提示|要求)"
        r"|(?:以前|これまで|前|上記|先|今まで)の(?:指示|命令|指令|ルール|プロンプト)"
        r"(?:は|を)(?:すべて|全て)?無視"
        r"|(?:指示|命令|指令|ルール)を(?:すべて|全て)?無視(?:して|しろ|せよ)",
        subs=("忽略", "无视", "忘记", "忘掉", "不要理会", "忽视", "無視"),
    ),
    # ---------------------------------------------------------------- jailbreak
    _rule(
        "jailbreak",
        STRONG,
        r"\byou are (?:now )?(?:dan|in (?:developer|god|jailbreak|unrestricted|dan) mode)\b"
        r"|\bdo anything now\b"
        r"|\b(?:enable|enter|activate|switch to) (?:developer|god|jailbreak|dan) mode\b"
        r"|\b(?:developer|god|jailbreak) mode (?:is )?(?:now )?(?:on|enabled|activated)\b"
        r"|\b(?:system|admin|administrator|developer|security|safety) override (?:is )?(?:now )?"
        r"(?:enabled|activated|engaged|accepted|granted|mode|on)\b",
        "dan mode override",
        ("anything now",),
    ),
    _rule(
        "jailbreak",
        STRONG,
        r"\b(?:no longer|not) (?:bound|restricted|limited) by (?:any|your|the) "
        r"(?:rules|guidelines|restrictions|policies)"
        r"|\bbroken free of the (?:typical )?confines\b"
        r"|\b(?:act|behave|pretend|respond|answer) as (?:an? )?(?:unrestricted|unfiltered|"
        r"jailbroken|uncensored|evil)\b"
        r"|\b(?:with no|without (?:any )?)(?:safety|ethical|content) (?:guidelines|restrictions|"
        r"filters|limits)"
        r"|\ball safety (?:checks|filters|guidelines|rules) (?:are |have been )?(?:now )?"
        r"(?:disabled|off)",
        "bound restricted limited confines unrestricted unfiltered jailbroken uncensored evil "
        "guidelines filters disabled",
    ),
    # ---------------------------------------------------------------- addressed to the model
    # "Note to AI assistants:", "Instructions for the LLM -"
    _rule(
        "addressed",
        STRONG,
        rf"\b(?:note|message|instructions?|reminder|hint|memo|directive)s? "
        rf"(?:to|for) (?:the |all |any |every )?{_AI}\s*[:\-–—]",
        "note notes message messages instruction instructions reminder reminders hint hints "
        "memo memos directive directives",
        need=_AI_WORDS,
    ),
    # "AI agent instructions:"
    _rule(
        "addressed",
        STRONG,
        rf"\b{_AI} (?:instructions|directives)\s*:",
        "instructions directives",
        need=_AI_WORDS,
    ),
    # "Dear Claude,", "Hey Copilot -", "Attention AI:"
    _rule(
        "addressed",
        STRONG,
        r"\b(?:dear|hey|hi|hello|attention|ok|okay|yo) (?:claude|chatgpt|gpt(?:-?\d\w*)?|"
        r"copilot|gemini|bard|cursor|assistant|ai|llm|(?:ai |coding )?agent)\b\s*[,:!\-–—]",
        "dear hey hi hello attention ok okay yo",
        need=_AI_WORDS,
    ),
    # "if you are an AI model reading this"
    _rule(
        "addressed",
        STRONG,
        rf"\bif you(?:'re| are) (?:an? |the )?{_AI}(?:\s*[,.;:!)]|\s*$| (?:reading|processing|"
        r"parsing|summari[sz]ing|that|who|and|or|model|assistant|agent|system|tool|bot)\b)",
        "you you're",
        need=_AI_WORDS,
    ),
    # "to any language model processing this text", "AI reading this", "agents reading this"
    _rule(
        "addressed",
        STRONG,
        rf"\b(?:any|all|every|each|whichever|whatever) (?:\w+ ){{0,2}}?{_AI}(?: \w+){{0,3}}? "
        r"(?:reading|processing|parsing|summari[sz]ing|seeing|viewing|ingesting|indexing|"
        r"that reads|who reads)"
        rf"|\b{_AI} (?:reading|processing|parsing|summari[sz]ing|recalling|retrieving) "
        r"(?:this|these)\b",
        "reading processing parsing summarizing summarising seeing viewing reads recalling "
        "retrieving ingesting indexing",
        need=_AI_WORDS,
    ),
    # "whenever an agent recalls this"
    _rule(
        "addressed",
        STRONG,
        rf"\b(?:whenever|when|if) (?:an?|the|any) {_AI} (?:ever )?(?:recalls|reads|retrieves|"
        r"sees|summari[sz]es|processes) (?:this|these)\b",
        "recalls reads retrieves sees summarizes summarises processes",
        need=_AI_WORDS,
    ),
    # "as the assistant, you should"
    _rule(
        "addressed",
        STRONG,
        rf"\bas (?:the|an?|your) {_AI},? you (?:should|must|will|need|are|have)\b",
        "you",
        need=_AI_WORDS,
    ),
    # "[assistant: you must now", "Assistant, silently"
    _rule(
        "addressed",
        STRONG,
        r"(?:^|[\[(])\s*(?:assistant|ai|agent|model)\s*[:,]\s*(?:you |please )?"
        r"(?:must|should|silently|quietly|secretly|now|immediately|always|never)\b",
        "must should silently quietly secretly now immediately always never",
        need="assistant ai agent model",
    ),
    # "the assistant must …"
    _rule(
        "addressed",
        MEDIUM,
        r"\bthe (?:ai|assistant|llm|model|agent) (?:must|should|shall|is now|will now|"
        r"is (?:now )?permitted)\b"
        r"|\b(?:all |any )?(?:ai|llm|ai (?:assistant|model|agent)|language model|chatbot)s? "
        r"(?:must|should|shall|are (?:instructed|required|told|expected) to)\b",
        "must should shall now permitted instructed required told expected",
        need="ai assistant llm model agent language chatbot chatbots",
    ),
    # a text about its own processing: "when summarizing this page, …"
    _rule(
        "addressed",
        MEDIUM,
        r"\b(?:when(?:ever)?|while|before|after|if) (?:you(?:'re| are) )?(?:summari[sz]ing|"
        r"reading|processing|parsing|indexing|translating|answering from) this (?:page|document|"
        r"file|text|memory|repository|repo|article|note|chat|conversation|email)\b",
        "summarizing summarising reading processing parsing indexing translating answering",
        need="this",
    ),
    # "from now on you will …", "you are now a …", "you now work for me"
    _rule(
        "addressed",
        MEDIUM,
        r"\bfrom now on,? (?:you (?:will|must|shall|are|should|act|respond|answer|reply|only)|"
        r"(?:answer|respond|reply|act) )"
        r"|\byou (?:are|will be) now (?:an?|the|in|my)\b|\byou now work for\b",
        "now",
        need="you answer respond reply act",
    ),
    # "your new task is …", "new instructions:"
    _rule(
        "addressed",
        MEDIUM,
        r"\byour (?:new|real|true|actual|only|updated) (?:task|goal|objective|instructions?|"
        r"purpose|job|mission|role|directive) (?:is|are|:|follows?)"
        r"|\b(?:new|updated|real|actual|true) (?:instructions|directives?|system prompt)\s*"
        r"(?::|follow)",
        "task goal objective instruction instructions purpose job mission role directive "
        "directives prompt",
        need="new real true actual only updated",
    ),
    # a stored text talking to whoever reads it later: "when you apply this lesson, …"
    _rule(
        "addressed",
        MEDIUM,
        r"\b(?:when(?:ever)?|once|after|if|before) you (?:apply|read|use|recall|see|follow|load|"
        r"retrieve|process|summari[sz]e) this (?:lesson|memory|note|file|document|message|page|"
        r"text|entry)\b",
        "lesson memory note file document message page text entry",
        need="this",
    ),
    # "render this image in your reply"
    _rule(
        "addressed",
        MEDIUM,
        r"\b(?:render|include|add|append|insert|put|output|print|embed) (?:\w+ ){0,6}?"
        r"(?:in|into|to|at the end of) your (?:next )?(?:reply|answer|response|output)\b",
        "reply answer response output",
        need="your",
    ),
    _rule(
        "addressed",
        WEAK,
        r"\byou must now (?:run|execute|delete|remove|send|upload|export|disable|push|call|"
        r"install|write|add|append|email|post|grant|approve|reveal|print|tell)\b"
        r"|\byour (?:first|next) (?:job|task|step) is\b"
        r"|\b(?:carry on|continue|proceed) (?:normally|as usual|as if nothing)\b",
        "must job task step normally usual nothing",
        need="now your normally usual nothing",
        mentionable=False,
    ),
    # ---------------------------------------------------------------- concealment
    _rule(
        "concealment",
        STRONG,
        r"\b(?:do not|don't|never|must not) (?:mention|reveal|disclose|show|explain) "
        r"(?:this|these|that you|any of this|the (?:note|instructions?|message|step|memory))\b"
        r"|\b(?:do not|don't|never|must not) tell (?:anyone|the user) about (?:this|these)\b",
        "mention reveal disclose show explain tell",
        need="not don't never",
    ),
    _rule(
        "concealment",
        STRONG,
        r"\bthe user (?:does not|doesn't|must not|should not|need not|won't|will not|must never) "
        r"(?:need to )?(?:know|notice|find out|be told|see|learn)\b"
        r"|\b(?:tell|show) the user nothing\b"
        r"|\bwithout (?:the user|them) (?:knowing|noticing)\b"
        r"|\bkeep (?:this|it) (?:secret|hidden) from the user\b",
        "know notice find told see learn nothing knowing noticing secret hidden",
        need="user them",
    ),
    _rule(
        "concealment",
        WEAK,
        r"\b(?:without|no need (?:to|for)|do not|don't|never) (?:ask(?:ing)?|tell(?:ing)?|"
        r"inform(?:ing)?|notify(?:ing)?|report(?:ing)?|alert(?:ing)?|consult(?:ing)?) "
        r"(?:the (?:user|maintainers?|owner|admin\w*)|anyone|for (?:confirmation|permission|"
        r"approval)|it)\b"
        r"|\bwithout (?:asking for |any )?(?:confirmation|permission|approval|review)\b",
        "ask asking tell telling inform informing notify notifying report reporting alert "
        "alerting consult consulting confirmation permission approval review",
        need="without need not don't never",
        mentionable=False,
    ),
    _rule(
        "concealment",
        WEAK,
        r"\b(?:silently|secretly|quietly|covertly) (?:append|add|run|execute|send|upload|delete|"
        r"remove|change|modify|insert|install|copy|email|post|forward|disable)\b",
        "silently secretly quietly covertly",
        mentionable=False,
    ),
    # ---------------------------------------------------------------- dangerous actions (weak)
    _rule(
        "action",
        WEAK,
        r"\bcurl [^\n|]{0,120}\|\s*(?:sudo )?(?:ba|z)?sh\b"
        r"|\brm -rf? (?:~|/|\$home|\.\./)"
        r"|~/\.ssh\b|\bauthorized_keys\b|~/\.aws/credentials|/etc/(?:passwd|shadow)\b"
        r"|--no-verify\b|\bgit push (?:-f|--force)\b|\bverify\s*=\s*false\b",
        "curl rm ssh authorized aws etc verify push",
        mentionable=False,
    ),
    _rule(
        "action",
        WEAK,
        r"\b(?:send|upload|email|post|forward|exfiltrate|leak|paste) (?:\w+ ){0,4}?"
        r"(?:credentials|api keys?|passwords?|secrets|tokens|\.env|ssh keys?|conversation|"
        r"memories|customer list|database(?: dump)?|repository|system prompt)\b"
        r"|\bexfiltrat\w+",
        "send upload email post forward exfiltrate exfiltrating exfiltration leak paste",
        need="credentials api keys key passwords password secrets tokens env ssh conversation "
        "memories customer database repository prompt exfiltrate exfiltrating exfiltration",
        mentionable=False,
    ),
    # a markdown image whose URL carries a query: rendering it sends data out
    _rule(
        "action",
        WEAK,
        r"!\[[^\]]*\]\(https?://[^)\s]*\?[^)\s]*=",
        subs=("](http",),
        mentionable=False,
    ),
    _rule(
        "obfuscated",
        STRONG,
        r"\bbase64 (?:-d|--decode|-D)\b[^\n|]{0,40}\|\s*(?:sudo )?(?:ba|z)?sh\b",
        subs=("base64",),
        mentionable=False,
    ),
    _rule(
        "obfuscated",
        MEDIUM,
        r"\bdecode (?:the |this )?(?:following |below )?(?:base64|rot13|hex)\b.{0,40}?"
        r"\b(?:follow|execute|run|obey|do)\b",
        "decode",
    ),
)
# ---------------------------------------------------------------- intents
# An instruction to the reader plus an out-of-task action, in imperative or polite form ("I'd
# like you to turn off the checks", a request to hand over keys, a request to change how the
# reply is written, code to be slipped into the reply before a snippet that opens a socket).
# The rules name what is asked, not the attacker's wording.
_ASK = (
    r"(?:i'?d (?:like|want|love) (?:you|for you) to|i would (?:like|want) you to|"
    r"i (?:want|need) you to|we (?:want|need) you to|please|kindly|make sure (?:to|you)|"
    r"be sure to|remember to|go ahead and|you (?:should|must|need to|have to|are to|will|shall)|"
    r"could you|can you|would you|your (?:job|task) (?:is|will be) to|it'?s fine to|"
    r"feel free to|don't forget to|do not forget to)"
)
_TESTS = (
    r"(?:tests?|test suite|testing|checks?|ci|pipeline|hooks?|pre-commit|linters?|linting|"
    r"type ?checks?|verification|code review|reviews?|signing|2fa|mfa|audit(?:ing| logs?)?|"
    r"logging|guardrails?|safeguards?|safety checks?|security checks?|scanners?|monitoring|"
    r"the firewall|antivirus|branch protection)"
)
_SENSITIVE = (
    r"(?:credentials?|tokens?|api[ _-]?keys?|passwords?|passphrases?|secrets?|\.env\b|"
    r"ssh(?: keys?)?|private keys?|cookies?|env(?:ironment)? variables|session ids?|"
    r"aws_\w+|id_rsa|keychain|wallet|seed phrase|personal data|customer data|the database)"
)
_S = r"[^.!?\n]{0,80}?"  # within one sentence
_INTENT: tuple[_Rule, ...] = (
    _rule(
        "intent",
        MEDIUM,
        rf"\b{_ASK}{_S}\b(?:disable|skip|turn off|switch off|comment out|delete|remove|bypass|"
        rf"silence|xfail|mute|circumvent|get around|work around|deactivate|suppress)\b"
        rf"(?:[ -]\w+){{0,3}} {_TESTS}\b",
        "disable skip turn switch comment delete remove bypass silence xfail mute circumvent "
        "around deactivate suppress",
        mentionable=False,
    ),
    _rule(
        "intent",
        STRONG,
        rf"\b{_ASK}{_S}\b(?:send|upload|post|forward|e-?mail|exfiltrate|transmit|copy|leak|share|"
        rf"paste|dump|publish|push)\b{_S}(?<!\w){_SENSITIVE}"
        rf"|\b{_ASK}{_S}\b(?:ignore|disregard|override|overrule|forget|skip)\b(?: \w+){{0,2}} "
        rf"(?:the user'?s?|what the user|your (?:instructions|rules|guidelines|task)|the "
        rf"(?:original|actual|real|user'?s?) (?:task|request|question|instructions))",
        "send upload post forward email mail exfiltrate transmit copy leak share paste dump "
        "publish push ignore disregard override overrule forget skip",
        mentionable=False,
    ),
    _rule(
        "intent",
        MEDIUM,
        rf"\b(?:send|upload|post|forward|e-?mail|exfiltrate|transmit|leak)\b{_S}(?<!\w){_SENSITIVE}"
        rf"{_S}\b(?:to|at) (?:https?://|[\w.-]+@[\w-]+\.|an? (?:external|remote|outside)|"
        rf"my (?:server|email|address|endpoint))"
        rf"|\b{_ASK}{_S}\b(?:change|reset|rotate|replace|add|grant|give)\b{_S}"
        rf"(?:password|credentials|api key|ssh key|admin (?:rights|access)|sudo|permissions|"
        rf"deploy key|owner)"
        rf"|\b{_ASK}{_S}\b(?:force[- ]push|push (?:directly |straight )?to (?:main|master|"
        rf"production|prod))\b",
        "send upload post forward email mail exfiltrate transmit leak change reset rotate "
        "replace add grant give force push",
        mentionable=False,
    ),
    _rule(  # hiding it from the person the assistant serves
        "concealment",
        MEDIUM,
        r"\b(?:no need to|there'?s no need to|don't|do not|never|without|you needn't|"
        r"don't bother to|do not bother to) (?:mention|mentioning|tell|telling|inform|informing|"
        r"notify|notifying|flag|flagging|bring(?:ing)? (?:it |this |that )?up|report|reporting|let)\b"
        r"(?: (?:it|this|that|anything|them|him|her))?(?: (?:to|about it to|with))? "
        r"(?:the user|the users|the human|the developer|the team|the maintainers?|anyone|"
        r"the owner|the reviewer|them|him|her)\b",
        "mention mentioning tell telling inform informing notify notifying flag flagging bring "
        "bringing report reporting let",
        mentionable=False,
    ),
    _rule(  # the reply itself rewritten or extended: addressed to the model that answers
        "intent",
        STRONG,
        r"\b(?:in|into|to|within|throughout|of|with|using|at the (?:end|start|beginning) of|"
        r"(?:add|include|insert|integrate|incorporate|embed|append|prepend|weave|inject|encode|"
        r"encrypt|translate|reverse|rewrite|convert|format|express|represent|end|begin|start|"
        r"conclude|present|compose|phrase|structure|modify|enhance|augment|provide|apply|"
        r"introduce|give|deliver|write|render|output|display|scramble|shift|group|sign|"
        r"replace|substitute|spell|misspell|rearrange|jumble|combine|remove|invert|"
        r"anagram))\b(?: \w+){0,2} your (?:response|answer|reply|output|responses|answers|"
        r"replies|message|elucidation)s?\b"
        r"|(?:^|[.!?:]\s+|\n)\s*(?:please |can you |could you )?(?:reply|respond|answer) "
        r"(?:in|using|with|only in|entirely in)\b",
        "response answer reply output responses answers replies message elucidation respond",
        mentionable=False,
    ),
    _rule(  # code to be slipped into the reader's output
        "intent",
        MEDIUM,
        r"\b(?:following|below|subsequent|this|above|given|provided|next) (?:code|snippet|"
        r"code snippet|code block|code excerpt|code segment|code fragment|code section|script|"
        r"lines? of code|piece of code|function)\b[^.!?\n]{0,100}?\b(?:your|the code you)"
        r" (?:code|response|solution|implementation|codebase|program|script|answer|output|"
        r"algorithm|project|function|application|app|software|elucidation|develop|write)\b"
        r"|\byour (?:code|response|solution|implementation|codebase|program|answer|algorithm)\b"
        r"[^.!?\n]{0,100}?\b(?:following|below|subsequent) (?:code|snippet|code snippet|"
        r"code block|code excerpt|code segment|code section|script)\b"
        r"|\b(?:utilize|use|integrate|include|incorporate|embed|merge|execute|run|add|insert|"
        r"leverage|apply|deploy) the (?:following|below|subsequent) (?:code|snippet|"
        r"code snippet|code block|code excerpt|code segment|code section)\b[^\n]{0,40}:\s*"
        r"\n\s*```",
        "following below subsequent this above given provided next",
        mentionable=False,
    ),
    _rule(  # code that reaches the network, the shell or the user's files
        "action",
        MEDIUM,
        r"\brequests\.(?:post|put|get)\(|\bsocket\.socket\(|\bsubprocess\.\w+\(|"
        r"\bos\.system\(|\bshutil\.rmtree\(|\burllib\.request\b|\bpyautogui\b|\bpynput\b|"
        r"\bkeyboard\.on_|\bgetpass\.getuser\(|\bfernet\b|\bos\.remove\(|\bparamiko\b|"
        r"\bctypes\.windll\b|\bsmtplib\b|\bftplib\b|\bhttp\.(?:client|cookiejar)\b|"
        r"\bhttpx\b|\baiohttp\b|\bpexpect\b|\bpyperclip\b|\bpaho\b|\btwisted\b|"
        r"/etc/(?:hosts|passwd|shadow)\b|\bdd if=|\bos\.rename\(|\bos\.walk\(",
        "",
        subs=(
            "requests.",
            "socket.",
            "subprocess.",
            "os.system",
            "shutil.rmtree",
            "urllib",
            "pyautogui",
            "pynput",
            "keyboard.",
            "getpass",
            "fernet",
            "os.remove",
            "paramiko",
            "ctypes",
            "smtplib",
            "ftplib",
            "http.",
            "httpx",
            "aiohttp",
            "pexpect",
            "pyperclip",
            "paho",
            "twisted",
            "/etc/",
            "dd if=",
            "os.rename",
            "os.walk",
        ),  # fmt: skip
        need="following below subsequent your",
        mentionable=False,
    ),
)
_RULES = _RULES + _INTENT
_OVERRIDES = tuple(r for r in _RULES if r.kind in ("override", "jailbreak", "addressed"))

# ---------------------------------------------------------------- markup (not mentionable)
_MARKUP: tuple[_Rule, ...] = (
    _rule(
        "markup",
        STRONG,
        r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|"
        r"end_header_id|begin_of_text|end_of_text|tool|function|ipython)\|>"
        r"|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>",
        subs=("<|", "inst]", "sys>>", "_of_turn>"),
    ),
    _rule(
        "markup",
        STRONG,
        r"</?(?:tool_call|tool_calls|tool_use|tool_code|function_calls?|function_results?|"
        r"tool_result)\b[^>]{0,80}>"
        r"|<invoke\s+name\s*=|<parameter\s+name\s*=[^>]*>[^<]{0,300}</parameter>|<function=\w+",
        subs=("<tool_", "<function", "</function", "<invoke", "<parameter"),
    ),
    _rule(
        "markup",
        STRONG,
        r"<(system|system[_-]prompt|assistant|human|instructions?|developer|im_system)>"
        r"[\s\S]{2,2000}?</\1\s*>"
        r"|</(?:context|document|data|memory|user|search_results)>\s*"
        r"<(?:system|assistant|instructions?)>",
        subs=("<system", "<assistant>", "<human>", "<instruction", "<developer>", "<im_system>"),
    ),
    _rule(
        "markup",
        STRONG,
        r"[\"'](?:function_call|tool_calls|tool_use)[\"']\s*:",
        subs=("function_call", "tool_calls", "tool_use"),
    ),
    _rule(
        "markup",
        MEDIUM,
        r"<(important|secret|hidden)>[\s\S]{10,4000}?</\1\s*>",
        "important secret hidden",
    ),
    _rule(
        "markup",
        MEDIUM,
        r"^#{2,4} ?(?:instruction|system|response)s?:?\s*$",
        "instruction instructions system response responses",
    ),
)
_ROLE_HEADER = re.compile(
    r"^[ \t>#*]*(system|assistant|human|user|ai)(?: (?:message|prompt|instructions?|notice|"
    r"override|update))?\s*:[ \t]*\S",
    re.M,
)

# ---------------------------------------------------------------- hidden characters
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_INVISIBLE_OPS = re.compile("[\u2061-\u2064]")
_ZW = "\u200b\u200c\u200d\u2060\ufeff\u180e"
_ZW_RUN = re.compile(f"[{_ZW}\u2061-\u2064]{{3,}}")
_ZW_IN_WORD = re.compile("[A-Za-z][\u200b\u2060\ufeff\u180e]+[A-Za-z]")
_ZWJ_IN_ASCII = re.compile("[A-Za-z][\u200c\u200d]+[A-Za-z]")
_FLAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f")
_TAGS = re.compile("[\U000e0000-\U000e007f]")

# ---------------------------------------------------------------- mentions
# words of a text *about* attacks (also a feature of the model in .injection_model)
DISCUSSION = _DISCUSSION = re.compile(
    r"\b(?:such as|e\.g\.|eg\.|i\.e\.|for example|for instance|phrases?|strings?|"
    r"attacks?|attackers?|attacking|injections?|injected|jailbreak\w*|malicious|adversar\w+|"
    r"detect\w*|flag\w*|known as|called|quoted?|quoting|patterns?|classifiers?|threats?|"
    r"payloads?|poison\w*|mitigat\w+|defen[cs]e\w*|red[- ]team\w*|hoping|tricks?|examples?)\b"
)
_URL = re.compile(r"\S+://\S*")
_OPENING = "\"“'‘«「`"
_CLOSING = "\"”'’»」`"


def _excerpt(text: str, start: int, end: int, width: int = 60) -> str:
    snippet = " ".join(text[start:end].split())
    return snippet if len(snippet) <= width else snippet[: width - 1] + "…"


def _is_mention(text: str, start: int, end: int) -> bool:
    """A phrase in a sentence about attacks, or quoted (inside a short quotation on its line),
    is discussed rather than issued."""
    before = _URL.sub(" ", text[max(0, start - 160) : start])
    sentence = re.split(r"(?<=[.!?])\s+|\n\s*\n", before)[-1]
    if _DISCUSSION.search(sentence):
        return True
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start]
    tail = text[end : end + 60].split("\n", 1)[0]
    if head and head[-1] in _OPENING and any(q in tail for q in _CLOSING):
        return True
    for open_, close in (('"', '"'), ("“", "”"), ("'", "'"), ("‘", "’"), ("«", "»"), ("「", "」")):
        opened = head.count(open_) - (head.count(close) if close != open_ else 0)
        if open_ == close:
            opened = head.count(open_) % 2
        if opened > 0 and close in tail:
            return True
    return False


def _in_inline_code(text: str, start: int, end: int) -> bool:
    """Inside a one-line `code span` (a document naming a token, not a payload)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return (
        text[line_start:start].replace("``", "`").count("`") % 2 == 1
        and "`" in text[end:line_end]
        and "```" not in text[line_start:line_end]
    )


def _apply(
    rules: tuple[_Rule, ...], folded: str, words: set[str], kind: str | None = None
) -> dict[int, Finding]:
    """{id of the rule: its first finding} for the rules that fire on ``folded``."""
    found: dict[int, Finding] = {}
    ascii_only = folded.isascii()
    for rule in rules:
        if not rule.applies(folded, words, ascii_only):
            continue
        for m in rule.rx.finditer(folded):
            if rule.mentionable and _is_mention(folded, m.start(), m.end()):
                continue
            if rule.kind == "markup" and _in_inline_code(folded, m.start(), m.end()):
                continue
            found[id(rule)] = Finding(
                kind=kind or rule.kind,
                weight=rule.weight,
                excerpt=_excerpt(folded, m.start(), m.end()),
            )
            break
    return found


def _roles(folded: str, found: dict[object, Finding]) -> None:
    """A fake dialogue: two role headers, one of them the model's (``Human:`` …
    ``Assistant:``), or a ``SYSTEM:`` line (medium: a log may have one)."""
    heads = list(_ROLE_HEADER.finditer(folded))
    roles = {m.group(1) for m in heads}
    if not heads:
        return
    first = heads[0]
    if len(roles) >= 2 and roles & {"assistant", "ai", "system"}:
        weight = STRONG
    elif "system" in roles:
        weight = MEDIUM
    else:
        return
    found.setdefault(
        "roles",
        Finding(kind="markup", weight=weight, excerpt=_excerpt(folded, first.start(), first.end())),
    )


def _hidden(text: str, found: dict[object, Finding]) -> None:
    def add(what: str) -> None:
        found.setdefault(f"hidden:{what}", Finding(kind="hidden", weight=STRONG, excerpt=what))

    if _TAGS.search(text) and _TAGS.search(_FLAG_SEQUENCE.sub("", text)):
        add("Unicode tag characters")
    if m := _BIDI.search(text):
        add(f"bidi control U+{ord(m.group(0)):04X}")
    if m := _INVISIBLE_OPS.search(text):
        add(f"invisible operator U+{ord(m.group(0)):04X}")
    if _ZW_RUN.search(text):
        add("a run of zero-width characters")
    elif _ZW_IN_WORD.search(text) or _ZWJ_IN_ASCII.search(text):
        add("a zero-width character inside a word")


def _variants(text: str, folded: str) -> list[str]:
    """The text with each obfuscation undone (only those it shows signs of)."""
    out = []
    if not text.isascii():
        if _MIXED_SCRIPT.search(folded):
            out.append(folded.translate(_CONFUSABLE))
        if payload := _tag_payload(text):
            out.append(_fold(payload))
    leet = {w.strip(_PUNCT).translate(_LEET) for w in folded.split() if not w.isalpha()}
    if not _LEET_TRIGGERS.isdisjoint(leet):
        out.append(folded.translate(_LEET))
    if _SPACED_HINT.search(folded):
        out.append(_despaced(folded))
    out += [_fold(s) for s in _decoded_b64(text)]
    return out


def scan(text: str) -> list[Finding]:
    """Every instruction-like finding in ``text`` (at most one per rule)."""
    if not text or not text.strip():
        return []
    found: dict[object, Finding] = {}
    folded = _fold(text)
    if not text.isascii():
        _hidden(text, found)
        if _MIXED_SCRIPT.search(folded):
            found["mixed"] = Finding(
                kind="hidden", weight=MEDIUM, excerpt="Latin and Cyrillic/Greek letters mixed"
            )
    words = set(_WORD.findall(folded))
    found.update(_apply(_MARKUP, folded, words))
    _roles(folded, found)
    found.update(_apply(_RULES, folded, words))
    for variant in _variants(text, folded):
        # a rule that fires only once an obfuscation is undone
        vwords = set(_WORD.findall(variant))
        for key, f in _apply(_OVERRIDES, variant, vwords, kind="obfuscated").items():
            if f.weight >= MEDIUM and key not in found:
                found[key] = f
    return list(found.values())


def _reason(findings: list[Finding]) -> str:
    ranked = sorted(findings, key=lambda f: -f.weight)
    kinds = list(dict.fromkeys(f.kind for f in ranked))
    return f"{', '.join(kinds)}: “{ranked[0].excerpt}”"


def score_of(findings: list[Finding]) -> float:
    """The weights added up, the weak findings of one kind counted once."""
    weak: dict[str, float] = {}
    total = 0.0
    for f in findings:
        if f.weight <= WEAK:
            weak[f.kind] = max(weak.get(f.kind, 0.0), f.weight)
        else:
            total += f.weight
    return round(total + sum(weak.values()), 2)


def verdict(text: str) -> Verdict:
    """Scan ``text`` and decide: suspicious when its findings weigh 1 or more (:func:`score_of`)."""
    findings = scan(text)
    score = score_of(findings)
    if score < THRESHOLD:
        return Verdict(suspicious=None, findings=tuple(findings), score=score)
    return Verdict(suspicious=_reason(findings), findings=tuple(findings), score=score)
