"""The injection scan's rules of a text addressed to the model that reads it: notes to AI
assistants, a greeting to the model followed by an order, "if you are an AI reading this", a
text about its own processing, a new task for the reader. Data, like :mod:`.injection_rules`
(whose ``RULES`` hold them, in this order), applied by :mod:`.injection`.
"""

from __future__ import annotations

from server.service.trust.injection_scan.injection_rule import MEDIUM, STRONG, WEAK, Rule, rule

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

ADDRESSED: tuple[Rule, ...] = (
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
)
