"""The injection detector's second line: a linear model over the text's MiniLM embedding and the
rule findings of :mod:`.injection`.

The rules (:func:`.injection.verdict`) catch the phrasings they were written for; this model
catches paraphrases of the same intents (a polite request to disable the tests and keep it from
the user, a request to rewrite the reply, …). A text is suspicious when the rules say so *or*
the model's probability reaches its threshold. The protection against a poisoned memory is the
framing of recalled text as quoted data; this detector is a second line.

Model: logistic regression over 384 + :data:`N_FEATURES` features: the all-MiniLM-L6-v2 vector
of one window of the text (at most :data:`WINDOW_WORDS` whitespace-separated words; a longer
text is read in windows of that size, at most :data:`MAX_WINDOWS`, and scored by its worst
window) and the text's :func:`rule_features` (per rule kind the weight of the strongest
finding, the rule score, how much the text says "you", talks about attacks, talks about its
reader's instructions and prompt, and steers what its reader outputs). The weights ship beside
this module (``injection_model.npz``): ``scripts/fit_injection_model.py`` rebuilds them and
documents the data they were fit on; the threshold was chosen there on benign text of groups
(sessions, conversations, files) the fit did not see. Pure numpy at run time: no scikit-learn,
no torch.

Only texts of at least :data:`MIN_WORDS` *prose* words are scored (:func:`prose_words`: words
of letters, not numbers, dates, times, ids, paths or URLs): a tag, a name, a path, a timestamp
say nothing a linear model can judge (it flagged 165 of 200 exchange timestamps such as
``[20 November 2026 10:01]``), and only with the embedder the weights were fit for
(:data:`MODEL_ID`); otherwise the rules alone decide (:meth:`Detector.usable`). The labels the
session indexer puts before an exchange's parts (``Prompt:``, ``Tools:``, ``Reply:``,
``ingest/sessions/exchanges.py``) are the server's layout, not words of the exchange: the model reads
the exchange without them (:func:`unlabelled`), as the turns it was fit on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from retrieval.regexes import linear_regex
from server.service.trust.injection_scan import injection

WEIGHTS = Path(__file__).with_name("injection_model.npz")
MODEL_ID = "all-MiniLM-L6-v2"
WINDOW_WORDS = 150  # about what fits the model's 256 word pieces
MAX_WINDOWS = 16
MIN_WORDS = 3  # prose words of a text (a memory, an observation, a turn) the model reads
# prose words of a field (a context, a title, a tag, a name, a metadata value) the model reads:
# a short label is the rules' alone (the model, fit on passages, read "Command Line Tools" and
# "def cos, def tan" as instructions; per-field rates in benchmarks/poisoning.py)
FIELD_MIN_WORDS = 8
KINDS = (
    "override",
    "jailbreak",
    "addressed",
    "concealment",
    "markup",
    "hidden",
    "obfuscated",
    "intent",
    "action",
)


# month and weekday names (and their abbreviations) are part of a date, not prose
_CALENDAR = frozenset(
    """january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday mon tue tues wed thu thur thurs fri sat sun am pm utc gmt""".split()
)
_EDGES = "()[]{}<>\"'`.,;:!?*_#|~"


def prose_words(text: str) -> int:
    """How many whitespace-separated tokens of ``text`` are words of prose: two letters or
    more once their surrounding punctuation is stripped (an inner apostrophe or hyphen
    allowed), and not a month or weekday name. Numbers, dates, times, ids, hashes, paths, URLs,
    ``key=value`` pairs and code tokens are not."""
    n = 0
    for token in text.split():
        word = token.strip(_EDGES)
        if len(word) < 2 or not word.replace("'", "").replace("-", "").isalpha():
            continue
        n += word.lower() not in _CALENDAR
    return n


# an exchange's part labels, at the start of a line (ingest/sessions/exchanges.py)
_EXCHANGE_LABEL = linear_regex.compile(r"^(?:Prompt|Tools|Reply): ?", re.M)


def unlabelled(text: str) -> str:
    """``text`` without the session indexer's part labels: the model, fit on single turns,
    read the label "Prompt:" as a text about its reader's prompt (a short exchange such as
    "Prompt: hello / Reply: Hello! How can I help?" scored 0.87)."""
    return _EXCHANGE_LABEL.sub("", text)


def windows(text: str, min_words: int = MIN_WORDS) -> list[str]:
    """The windows of ``text`` the model reads: [] when it has fewer than ``min_words`` prose
    words (:func:`prose_words`); a
    longer text's windows all have WINDOW_WORDS words (the last one ends at the text's end and
    overlaps the one before: a tail of a word or two says nothing the model can judge), at most
    MAX_WINDOWS (the first ones and the last)."""
    if prose_words(text) < min_words:
        return []
    words = text.split()
    n = len(words)
    if n <= WINDOW_WORDS:
        return [text]
    starts = list(range(0, n - WINDOW_WORDS, WINDOW_WORDS))[: MAX_WINDOWS - 1] + [n - WINDOW_WORDS]
    return [" ".join(words[i : i + WINDOW_WORDS]) for i in starts]


_YOU = linear_regex.compile(r"\b(?:you|your|yours|yourself|you'?re|you'?ll|you'?ve|u)\b", re.I)
# words by which a text talks about its reader's own set-up (its instructions, its prompt, what
# came before it) and words that steer or override what the reader outputs: an attack's cues
# that a user's request to an assistant seldom has ("continue writing", "write it in python")
_SETUP = linear_regex.compile(
    r"\b(?:instructions?|prompts?|system|above|previous|prior|preceding|earlier|rules|"
    r"guidelines|directives|polic(?:y|ies)|restrictions?|filters?|programming)\b",
    re.I,
)
_CONTROL = linear_regex.compile(
    r"\b(?:output|print|repeat|say|begin|prefix|only|ignore|disregard|forget|reveal)\b", re.I
)
CUES = ("score", "you", "mention", "setup", "control")
N_FEATURES = len(KINDS) + len(CUES)


def _rate(rx: re.Pattern, text: str, n: int) -> float:
    return min(1.0, 10.0 * len(rx.findall(text)) / n)


def rule_features(findings: Sequence[injection.Finding], text: str = "") -> np.ndarray:
    """Per kind the weight of its strongest finding, the rule score (capped at 2) / 2, and
    cues of who the text is written to and about, each per word, x10, capped at 1: how often
    it says "you", how often it talks *about* attacks ("injection", "for example", …: the
    rules' mention words), how often it talks about its reader's set-up ("instructions",
    "prompt", "above", "previous", "rules", …) and how often it steers the reader's output
    ("output", "print", "repeat", "say", "only", "ignore", …)."""
    out = np.zeros(N_FEATURES, dtype=np.float32)
    for f in findings:
        if f.kind in KINDS:
            i = KINDS.index(f.kind)
            out[i] = max(out[i], f.weight)
    k = len(KINDS)
    out[k] = min(injection.score_of(list(findings)), 2.0) / 2.0
    if text:
        n = max(1, len(text.split()))
        out[k + 1] = _rate(_YOU, text, n)
        out[k + 2] = _rate(injection.DISCUSSION, text.lower(), n)
        out[k + 3] = _rate(_SETUP, text, n)
        out[k + 4] = _rate(_CONTROL, text, n)
    return out


@dataclass(frozen=True)
class Detector:
    """The fitted model: ``coef`` over [embedding, rule features], ``bias``, ``threshold``."""

    coef: np.ndarray
    bias: float
    threshold: float
    meta: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path = WEIGHTS) -> Detector:
        """The weights at ``path``; ``ValueError`` when they were fit for other features."""
        with np.load(path, allow_pickle=False) as z:
            det = cls(
                coef=z["coef"].astype(np.float32),
                bias=float(z["bias"]),
                threshold=float(z["threshold"]),
                meta=json.loads(str(z["meta"])),
            )
        if det.coef.shape != (384 + N_FEATURES,):
            raise ValueError(f"{path}: {det.coef.shape[0]} weights, expected {384 + N_FEATURES}")
        return det

    def save(self, path: str | Path) -> None:
        np.savez(
            path,
            coef=self.coef.astype(np.float32),
            bias=np.float64(self.bias),
            threshold=np.float64(self.threshold),
            meta=np.str_(json.dumps(self.meta, sort_keys=True)),
        )

    @staticmethod
    def usable(embedder) -> bool:
        """True when ``embedder`` is the model the weights were fit for, loaded."""
        if embedder is None or getattr(embedder, "model_id", None) != MODEL_ID:
            return False
        return bool(getattr(embedder, "loaded", True))

    def probabilities(self, vectors: np.ndarray, rules: np.ndarray) -> np.ndarray:
        """P(attack) of each row: ``vectors`` (n x 384) with the ``rules`` features (n x k or
        one row for all)."""
        rules = np.broadcast_to(rules, (len(vectors), N_FEATURES))
        x = np.hstack([np.asarray(vectors, dtype=np.float32), rules])
        z = x @ self.coef + np.float32(self.bias)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def probability(self, text: str, embedder, findings=None) -> float:
        """The worst window's P(attack) (0.0 for a text too short to judge)."""
        return self.probability_many([text], embedder, [findings])[0]

    def probability_many(
        self, texts: Sequence[str], embedder, findings: Sequence | None = None,
        min_words: Sequence[int] | None = None,
    ) -> list[float]:  # fmt: skip
        """:meth:`probability` of each text, their windows embedded in one batch; ``min_words``:
        per text, the prose words it needs to be read (:data:`MIN_WORDS` when not given)."""
        texts = [unlabelled(t) for t in texts]
        spans, flat = [], []
        for j, text in enumerate(texts):
            ws = windows(text, MIN_WORDS if min_words is None else min_words[j])
            spans.append((len(flat), len(flat) + len(ws)))
            flat += ws
        if not flat:
            return [0.0] * len(texts)
        mat = np.asarray(embedder.embed_documents(flat), dtype=np.float32)
        out = []
        for j, (a, b) in enumerate(spans):
            if a == b:
                out.append(0.0)
                continue
            found = findings[j] if findings is not None and findings[j] is not None else None
            if found is None:
                found = injection.scan(texts[j])
            p = self.probabilities(mat[a:b], rule_features(found, texts[j]))
            out.append(float(p.max()))
        return out

    def flags(self, p: float) -> bool:
        return p >= self.threshold

    def reason(self, p: float) -> str:
        return f"model: reads like instructions to the model (p={p:.2f} ≥ {self.threshold:.2f})"


@cache
def default() -> Detector | None:
    """The shipped model (None when its file is missing or unreadable: the rules decide)."""
    try:
        return Detector.load()
    except (OSError, KeyError, ValueError):
        return None


__all__ = [
    "CUES",
    "KINDS",
    "MODEL_ID",
    "N_FEATURES",
    "Detector",
    "default",
    "rule_features",
    "unlabelled",
    "windows",
]
