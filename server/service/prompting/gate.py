"""The prompt gate: whether a record recalled for a prompt is worth injecting, judged from the
(prompt, record) pair alone.

The hooks inject only what clears the gate, so its verdict must mean the same in a young
project's handful of records and in a big one's thousands. Nothing here reads the store's own
statistics (FTS5's IDF, the number of records, the other candidates). The two features:

- ``cosine``: the record's best embedding window's cosine with the prompt (the search's vector
  similarity);
- ``coverage``: the share of the prompt's information that the record's words hold, each word
  weighed by its rarity in general English, a name by more (:mod:`.vocabulary`: a fixed
  background, not the store's vocabulary).

The relevance (:class:`GateModel`) is a logistic model over the two, fit on the dev sets'
questions at every project size (``benchmarks/lab/gate_fit.py``), or, for a record very close in
meaning, the cosine alone (a question asked in other words than the memory's). One threshold
serves every store: the search looks at 30 candidates in any store of more than 30 records, and
the threshold is the lowest at which the best of them stays below it for questions about
something else asked of a whole conversation (``hook_sizes.py``); that is how the gate accounts
for the candidates searched, once, for every store. While the embedding model loads, the
cosine is taken as an unrelated text's (:data:`LEXICAL_COSINE`): only a record holding nearly
all of the prompt's telling words clears it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from retrieval.ranking.guard import guarded
from retrieval.records import Record
from server.service.prompting.vocabulary import Terms, coverage, held

FEATURES = ("cosine", "coverage")
LEXICAL_COSINE = 0.2  # what an unrelated text's cosine typically is (while the model loads)
SEMANTIC_SLOPE = 20.0  # the semantic route's odds grow e-fold every 0.05 of cosine


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@dataclass(frozen=True)
class GateModel:
    """relevance = max(P(the record holds what the prompt asks | cosine, coverage), the
    semantic route): a logistic model over both features (``coef``, ``bias``), or the cosine
    alone from ``semantic_cosine`` up, which then clears ``threshold`` whatever words the
    record shares (a question asked in other words than the memory's). The semantic route is
    ``sigmoid(logit(threshold) + SEMANTIC_SLOPE * (cosine - semantic_cosine))``: exactly the
    threshold at ``semantic_cosine``."""

    coef: tuple[float, float]
    bias: float
    semantic_cosine: float
    threshold: float

    def relevance(self, cosine: float, coverage: float) -> float:
        p = _sigmoid(self.bias + self.coef[0] * cosine + self.coef[1] * coverage)
        t = self.threshold
        route = _sigmoid(math.log(t / (1.0 - t)) + SEMANTIC_SLOPE * (cosine - self.semantic_cosine))
        return max(p, route)


# fit by benchmarks/lab/gate_fit.py on LoCoMo dev and LongMemEval_S dev at project sizes 1, 8, 64
# and whole (docs/benchmarks.md, "The prompt gate")
MODEL = GateModel(coef=(4.0646, 5.7701), bias=-4.6168, semantic_cosine=0.5, threshold=0.5)
THRESHOLD = MODEL.threshold


def prompt_terms(prompt: str) -> Terms:
    """The prompt's informative words; none when they cannot be read (the gate then judges
    by the cosine alone)."""
    return guarded("prompt gate: the prompt's words", Terms.of, prompt, default=Terms({}))


def _coverage(terms: Terms, rec: Record) -> float:
    wanted = frozenset(terms.weights)
    found = set()
    for text in (rec.content, rec.context, rec.entity_name):
        if text and len(found) < len(wanted):
            found |= held(text, wanted - found)
    return coverage(terms, found)


def features(terms: Terms, rec: Record, cosine: float | None) -> tuple[float, float]:
    """The gate's features of a (prompt, record) pair (:data:`FEATURES`): the words a record
    holds are its content's, its context's (a chunk's path and title, an exchange's time) and
    its entity's name (an observation's). A coverage that cannot be computed (a text the
    stemmer cannot read) is 0 for that record; a cosine that is not a finite number is taken
    as an unrelated text's (:data:`LEXICAL_COSINE`)."""
    cov = guarded("prompt gate: coverage", _coverage, terms, rec, default=0.0, record=rec.id)
    cos = LEXICAL_COSINE if cosine is None or not math.isfinite(cosine) else float(cosine)
    return (cos, cov if math.isfinite(cov) else 0.0)


@dataclass(frozen=True)
class Judged:
    """The gate's reading of one candidate: its relevance and the features it came from."""

    relevance: float
    cosine: float | None
    coverage: float


class PromptGate:
    """Judges a prompt's candidates; the prompt's terms are read once."""

    def __init__(self, prompt: str, model: GateModel = MODEL) -> None:
        self.terms = prompt_terms(prompt)
        self.model = model

    def judge(self, rec: Record, cosine: float | None) -> Judged:
        cos, cov = features(self.terms, rec, cosine)
        return Judged(self.model.relevance(cos, cov), cosine, cov)
