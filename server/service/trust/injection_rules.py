"""The injection detector's rule tables: data, applied by :mod:`.injection`.

Each :class:`Rule` is a pattern over folded text (case-folded, accents and format characters
dropped), its finding's kind and weight (``STRONG`` 1, ``MEDIUM`` 0.6, ``WEAK`` 0.5), and a
prefilter (``words``, ``subs``, ``need``) that keeps the scan cheap. ``RULES`` are the phrase
rules (the ``intent`` rules are in :mod:`.injection_intent`, the quote escapes in
:mod:`.injection_escape`), ``OVERRIDES`` the ones tried again on de-obfuscated text,
``MARKUP`` the chat-template and tool-call syntax; then the patterns of hidden characters and
the words and quotes that make a phrase a *mention* rather than an instruction. What each kind
means is documented in :mod:`.injection`.
"""

from __future__ import annotations

import re

from retrieval import linear_regex

from .injection_rule import (  # noqa: F401 - the tables' vocabulary, for the other tables
    MEDIUM,
    STRONG,
    WEAK,
    WINDOW,
    PairedTags,
    Rule,
    paired,
    rule,
)
from .scan_text import VARIANTS

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

_GREETING = (
    r"\b(?:dear|hey|hi|hello|greetings|attention|ok|okay|yo),? (?:claude|chatgpt|"
    r"gpt(?:-?\d\w*)?|copilot|gemini|bard|cursor|assistant|ai|llm|(?:ai |coding )?agent)\b"
    r"\s*[,.:!\-–—]"
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
    # ---------------------------------------------------------------- addressed to the model
    # "Note to AI assistants:", "Instructions for the LLM -"
    rule(
        "addressed",
        STRONG,
        rf"\b(?:note|message|instructions?|reminder|hint|memo|directive)s? "
        rf"(?:to|for) (?:the |all |any |every )?{_AI}\s*[:\-–—]",
        "note notes message messages instruction instructions reminder reminders hint hints "
        "memo memos directive directives",
        need=_AI_WORDS,
    ),
    # "AI agent instructions:"
    rule(
        "addressed",
        STRONG,
        rf"\b{_AI} (?:instructions|directives)\s*:",
        "instructions directives",
        need=_AI_WORDS,
    ),
    # "Dear Claude, from now on you will …", "Hey Copilot - ignore …": a greeting to the model
    # followed by an order about its rules or persona (a greeting and a question is how users
    # talk to their assistant: "Hey AI, have you tried this recipe?")
    rule(
        "addressed",
        STRONG,
        rf"{_GREETING}[^\n]{{0,200}}?\b(?:from now on|you (?:will|shall|are going to|are to)\b|"
        r"you (?:must|have to)\b(?! be\b)|(?:act|pretend|roleplay|role-play|behave) as\b|"
        r"let'?s (?:play|do a role-?play|roleplay|role-play)\b|i want you to\b|"
        r"you are (?:now|going to be)\b|ignore\b|disregard\b|forget (?:all|every|your|the|what)\b|"
        r"simulate\b|stay in character|do anything now|jailbr|developer mode|"
        r"your (?:new |real |only )?(?:task|job|goal|role|instructions)\b)",
        "dear hey hi hello greetings attention ok okay yo",
        need=_AI_WORDS,
    ),
    rule(  # the greeting alone: "Attention AI:" (not a user's question or request to the
        # assistant it talks to: "Hey AI, can you help me …", "Hi assistant, what is …")
        "addressed",
        MEDIUM,
        rf"{_GREETING}(?!\s*(?:please |thanks?\b|thank you\b)?(?:(?:can|could|would|will|do|does|"
        r"did|have|has|are|is|was|were|should|what|what's|how|why|where|when(?! you)|which|who|"
        r"is there|"
        r"help|i|i'm|i've|i'd|i'll|my|me|we|let's|tell me|give me|show me|explain|write|"
        r"summari[sz]e|thanks?|thank you)\b))",
        "dear hey hi hello greetings attention ok okay yo",
        need=_AI_WORDS,
    ),
    # "if you are an AI model reading this"
    rule(
        "addressed",
        STRONG,
        rf"\bif you(?:'re| are) (?:an? |the )?{_AI}(?:\s*[,.;:!)]|\s*$| (?:reading|processing|"
        r"parsing|summari[sz]ing|that|who|and|or|model|assistant|agent|system|tool|bot)\b)",
        "you you're",
        need=_AI_WORDS,
    ),
    # "to any language model processing this text", "AI reading this", "agents reading this"
    rule(
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
    rule(
        "addressed",
        STRONG,
        rf"\b(?:whenever|when|if) (?:an?|the|any) {_AI} (?:ever )?(?:recalls|reads|retrieves|"
        r"sees|summari[sz]es|processes) (?:this|these)\b",
        "recalls reads retrieves sees summarizes summarises processes",
        need=_AI_WORDS,
    ),
    # "as the assistant, you should"
    rule(
        "addressed",
        STRONG,
        rf"\bas (?:the|an?|your) {_AI},? you (?:should|must|will|need|are|have)\b",
        "you",
        need=_AI_WORDS,
    ),
    # "[assistant: you must now", "Assistant, silently"
    rule(
        "addressed",
        STRONG,
        r"(?:^|[\[(])\s*(?:assistant|ai|agent|model)\s*[:,]\s*(?:you |please )?"
        r"(?:must|should|silently|quietly|secretly|now|immediately|always|never)\b",
        "must should silently quietly secretly now immediately always never",
        need="assistant ai agent model",
    ),
    # "the assistant must …"
    rule(
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
    rule(
        "addressed",
        MEDIUM,
        r"\b(?:when(?:ever)?|while|before|after|if) (?:you(?:'re| are) )?(?:summari[sz]ing|"
        r"reading|processing|parsing|indexing|translating|answering from) this (?:page|document|"
        r"file|text|memory|repository|repo|article|note|chat|conversation|email)\b",
        "summarizing summarising reading processing parsing indexing translating answering",
        need="this",
    ),
    # "from now on you will …", "you are now a …", "you now work for me"
    rule(
        "addressed",
        MEDIUM,
        r"\bfrom now on,? (?:you (?:will|must|shall|are|should|act|respond|answer|reply|only)|"
        r"(?:answer|respond|reply|act) )"
        r"|\byou (?:are|will be) now (?:an?|the|in|my)\b|\byou now work for\b",
        "now",
        need="you answer respond reply act",
    ),
    # "your new task is …", "new instructions:"
    rule(
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
    rule(
        "addressed",
        MEDIUM,
        r"\b(?:when(?:ever)?|once|after|if|before) you (?:apply|read|use|recall|see|follow|load|"
        r"retrieve|process|summari[sz]e) this (?:lesson|memory|note|file|document|message|page|"
        r"text|entry)\b",
        "lesson memory note file document message page text entry",
        need="this",
    ),
    # "render this image in your reply"
    rule(
        "addressed",
        MEDIUM,
        r"\b(?:render|include|add|append|insert|put|output|print|embed) (?:\w+ ){0,6}?"
        r"(?:in|into|to|at the end of) your (?:next )?(?:reply|answer|response|output)\b",
        "reply answer response output",
        need="your",
    ),
    rule(
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
