"""The failure gate: whether a lesson is worth injecting for a failed command, judged from the
(error, lesson) pair alone.

The PostToolUseFailure / PostToolUse hooks inject a lesson only when it clears this gate, so
its verdict must mean the same for a young project's one lesson and a big project's thousand.
Nothing here reads the store's own statistics (FTS5's IDF, how many lessons there are, the other
candidates): a young project's IDF is at or below zero, and a lexical score built on it
would make every lesson look irrelevant there. The features (:data:`FEATURES`) compare the two
errors' parts, each a share in [0, 1]:

- ``cosine``: the lesson record's best window's cosine with the error (the same text
  ``find_similar_errors`` embeds);
- ``frames``: the share of the error's application frames (``Class.method``: runner, reflection
  and runtime frames left out) that the lesson's trace passes through too;
- ``message``: the share of the information of the error's type and message that the lesson's
  type, message and failing test hold, words weighted by their rarity in general English
  (:mod:`.vocabulary`: wordfreq's background, not the store's vocabulary), identifiers split
  into their parts;
- ``exception``: both name the same exception class (1) or not (0);
- ``test_class``: both failing tests are in the same test class (1) or not (0);
- ``package``: how deep the error's application packages go into the lesson's (longest
  common prefix over the error's package length, best pair).

The relevance (:class:`FailureGateModel`) is a logistic model over them, fit on Defects4J
(``benchmarks/failure_gate.py``: each failing trace against its own bug's lesson and against
other bugs' lessons of its project and of another project, at project sizes 1, 8 and whole),
and one threshold serves every store size (docs/benchmarks.md, "The failure gate").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from graph import traces

from .vocabulary import Terms, coverage, stems

FEATURES = ("cosine", "frames", "message", "exception", "test_class", "package")


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@dataclass(frozen=True)
class ErrorView:
    """What the gate reads of one error (a failure, or a lesson's error pattern)."""

    message_terms: Terms  # of the type and message
    words: frozenset[str]  # stems of the type, message and failing test
    frames: frozenset[str]  # application frames, Class.method
    exceptions: frozenset[str]  # simple exception class names
    test_classes: frozenset[str]  # simple names of the failing tests' classes
    packages: frozenset[str]

    @classmethod
    def of(cls, type_: str, message: str, context: str, trace: str | None) -> ErrorView:
        return _view(type_ or "", message or "", context or "", trace or "")


@lru_cache(maxsize=8192)
def _view(type_: str, message: str, context: str, trace: str) -> ErrorView:
    head = f"{type_}: {message}" if type_ and message else (type_ or message)
    full = f"{head}\n{trace}"
    profile = traces.trace_profile(full, context)
    tests = {c.rsplit(".", 1)[-1] for c in profile.classes}
    tests |= {part.rsplit(".", 1)[-1] for part in _test_classes(context)}
    return ErrorView(
        message_terms=Terms.of(head, max_terms=48),
        words=frozenset(stems(f"{head}\n{context}")),
        frames=frozenset(traces.app_frames(full, 50)),
        exceptions=frozenset(e.rsplit(".", 1)[-1] for e in traces.exception_types(head)),
        test_classes=frozenset(t for t in tests if t),
        packages=profile.packages,
    )


def _test_classes(context: str) -> list[str]:
    """``pkg.FooTest::testBar`` / ``tests/test_db.py::test_pool`` -> the class or module."""
    out = []
    for word in context.split():
        if "::" in word:
            out.append(word.split("::", 1)[0].replace("/", ".").removesuffix(".py"))
    return out


def cosine(qvec: np.ndarray | None, windows: np.ndarray | None) -> float | None:
    """The best window's cosine (None when either vector is missing)."""
    if qvec is None or windows is None or not len(windows):
        return None
    q = qvec / (np.linalg.norm(qvec) or 1.0)
    w = windows / np.maximum(np.linalg.norm(windows, axis=1, keepdims=True), 1e-9)
    return float(np.max(w @ q))


def raw_features(q: ErrorView, lesson: ErrorView, cos: float | None) -> dict[str, float]:
    """Every measured feature of a pair (the model uses :data:`FEATURES`)."""
    frames = len(q.frames & lesson.frames) / len(q.frames) if q.frames else 0.0
    return {
        "cosine": LEXICAL_COSINE if cos is None else cos,
        "frames": frames,
        "message": coverage(q.message_terms, set(lesson.words)),
        "exception": float(bool(q.exceptions & lesson.exceptions)),
        "test_class": float(bool(q.test_classes & lesson.test_classes)),
        "package": traces.package_affinity(q.packages, lesson.packages),
        "no_frames": float(not q.frames),
    }


LEXICAL_COSINE = 0.3  # an unrelated error's typical cosine, while the model loads


@dataclass(frozen=True)
class FailureGateModel:
    """relevance = sigmoid(bias + coef · features); a lesson clears the gate at ``threshold``."""

    coef: tuple[float, ...]
    bias: float
    threshold: float
    features: tuple[str, ...] = FEATURES

    def relevance(self, feats: dict[str, float]) -> float:
        z = self.bias + sum(
            c * feats[name] for c, name in zip(self.coef, self.features, strict=True)
        )
        return _sigmoid(z)


# fit by benchmarks/failure_gate.py on Defects4J (docs/benchmarks.md, "The failure gate")
MODEL = FailureGateModel(coef=(6.0, 2.0, 2.0, 0.5, 1.0, 1.0), bias=-8.0, threshold=0.5)
THRESHOLD = MODEL.threshold


@dataclass(frozen=True)
class Judged:
    relevance: float
    features: dict[str, float]

    def explain(self) -> dict[str, float]:
        return {"relevance": round(self.relevance, 4),
                **{k: round(v, 4) for k, v in self.features.items()}}  # fmt: skip


class FailureGate:
    """Judges the candidate lessons of one failure (the failure is read once)."""

    def __init__(self, type_: str, message: str, context: str, trace: str | None,
                 model: FailureGateModel = MODEL) -> None:  # fmt: skip
        self.view = ErrorView.of(type_, message, context, trace)
        self.model = model

    def judge(self, lesson: ErrorView, cos: float | None) -> Judged:
        feats = raw_features(self.view, lesson, cos)
        return Judged(self.model.relevance(feats), feats)
