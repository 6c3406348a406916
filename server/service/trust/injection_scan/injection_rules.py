"""The injection detector's rule tables: data, applied by :mod:`.injection`.

Each :class:`Rule` is a pattern over folded text (case-folded, accents and format characters
dropped), its finding's kind and weight (``STRONG`` 1, ``MEDIUM`` 0.6, ``WEAK`` 0.5), and a
prefilter (``words``, ``subs``, ``need``) that keeps the scan cheap. ``RULES`` are the phrase
rules (the ``intent`` rules are in :mod:`.injection_intent`, the quote escapes in
:mod:`.injection_escape`), ``OVERRIDES`` the ones tried again on de-obfuscated text,
the rules of a text addressed to the model reading it are in :mod:`.injection_addressed`;
``MARKUP`` (the chat-template and tool-call syntax, with the patterns of hidden characters and
the words and quotes that make a phrase a *mention*) is in :mod:`.injection_markup`. What each
kind means is documented in :mod:`.injection`.
"""

from __future__ import annotations

from server.service.trust.injection_scan.injection_addressed import ADDRESSED
from server.service.trust.injection_scan.injection_rule import (
    MEDIUM,
    STRONG,
    WEAK,
    Rule,
    rule,
)
from server.service.trust.injection_scan.scan_text import VARIANTS

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
RULES: tuple[Rule, ...] = (
    # ---------------------------------------------------------------- override
    rule(
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
    rule(
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
    rule(
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
    rule(
        "override",
        STRONG,
        r"\b(?:ignore[rz]?|oublie[rz]?|ne (?:tiens|tenez) pas compte d)\b.{0,20}?"
        r"(?:instructions|consignes|directives|regles) (?:precedentes|anterieures|ci-dessus)",
        "precedentes anterieures dessus",
    ),
    rule(
        "override",
        STRONG,
        r"\b(?:ignora[r]?|ignore|olvida[r]?|olvide|omite|descarta|haz caso omiso de|"
        r"desconsidere|desconsidera[r]?|esqueca)\b.{0,20}?"
        r"(?:instrucciones|indicaciones|reglas|ordenes|directrices|instrucoes|orientacoes|"
        r"regras|diretrizes) (?:anteriores|previas|acima)",
        "anteriores previas acima",
    ),
    # "olvida lo que te dijeron", "oublie ce qu'on t'a dit", "vergiss, was man dir gesagt hat"
    rule(
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
    rule(
        "override",
        STRONG,
        r"\b(?:ignora(?:te|re)?|dimentica(?:te|re)?)\b.{0,20}?"
        r"(?:istruzioni|indicazioni|regole|direttive) (?:precedenti|di prima|sopra)",
        "istruzioni indicazioni regole direttive",
    ),
    rule(
        "override",
        STRONG,
        r"\b(?:ignorier(?:e|en sie)?|vergiss|vergessen sie|missachte)\b.{0,20}?"
        r"(?:vorherigen|bisherigen|vorigen|obigen|fruheren|vorangegangenen) "
        r"(?:anweisungen|instruktionen|regeln|befehle|vorgaben)",
        "anweisungen instruktionen regeln befehle vorgaben",
    ),
    rule(
        "override",
        STRONG,
        r"(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|не обращай внимания на)"
        r".{0,20}?(?:предыдущие|прошлые|прежние|вышеуказанные|все) "
        r"(?:инструкции|указания|правила|команды)",
        subs=("инструкц", "указани", "правила", "команды"),
    ),
    rule(
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
    rule(
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
    rule(
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
    *ADDRESSED,
    # ---------------------------------------------------------------- concealment
    rule(
        "concealment",
        STRONG,
        r"\b(?:do not|don't|never|must not) (?:mention|reveal|disclose|show|explain) "
        r"(?:this|these|that you|any of this|the (?:note|instructions?|message|step|memory))\b"
        r"|\b(?:do not|don't|never|must not) tell (?:anyone|the user) about (?:this|these)\b",
        "mention reveal disclose show explain tell",
        need="not don't never",
    ),
    rule(
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
    rule(
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
    rule(
        "concealment",
        WEAK,
        r"\b(?:silently|secretly|quietly|covertly) (?:append|add|run|execute|send|upload|delete|"
        r"remove|change|modify|insert|install|copy|email|post|forward|disable)\b",
        "silently secretly quietly covertly",
        mentionable=False,
    ),
    # ---------------------------------------------------------------- dangerous actions (weak)
    rule(
        "action",
        WEAK,
        r"\bcurl [^\n|]{0,120}\|\s*(?:sudo )?(?:ba|z)?sh\b"
        r"|\brm -rf? (?:~|/|\$home|\.\./)"
        r"|~/\.ssh\b|\bauthorized_keys\b|~/\.aws/credentials|/etc/(?:passwd|shadow)\b"
        r"|--no-verify\b|\bgit push (?:-f|--force)\b|\bverify\s*=\s*false\b",
        "curl rm ssh authorized aws etc verify push",
        mentionable=False,
    ),
    rule(
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
    rule(
        "action",
        WEAK,
        r"!\[[^\]]*\]\(https?://[^)\s]*\?[^)\s]*=",
        subs=("](http",),
        mentionable=False,
    ),
    rule(
        "obfuscated",
        STRONG,
        r"\bbase64 (?:-d|--decode|-D)\b[^\n|]{0,40}\|\s*(?:sudo )?(?:ba|z)?sh\b",
        subs=("base64",),
        mentionable=False,
    ),
    rule(
        "obfuscated",
        MEDIUM,
        r"\bdecode (?:the |this )?(?:following |below )?(?:base64|rot13|hex)\b.{0,40}?"
        r"\b(?:follow|execute|run|obey|do)\b",
        "decode",
    ),
)

OVERRIDES = tuple(r for r in RULES if r.kind in ("override", "jailbreak", "addressed"))
for _rule in OVERRIDES:  # tried again on each variant of a text, asked about in one pass
    _rule.register(VARIANTS)
