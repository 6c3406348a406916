"""The injection scan as the write policy applies it, for the poisoning benchmark: the rules
on a record's content and context, then the linear model (:mod:`server.service.trust.injection_scan.injection_model`)
over the embeddings of what they pass, with the embeddings cached on disk
(:mod:`benchmarks.harness.embed_cache`); the model's write-time cost; and the split of the benign texts,
by group, between fitting the model, setting its threshold and reporting its rate."""

from __future__ import annotations

import hashlib
import time

from benchmarks.harness.embed_cache import CachingEmbedder
from server.service.trust.injection_scan import injection, injection_model
from server.service.trust.policy import _readings

SPLITS = ("fit", "tune", "report")


def group(tid: str) -> str:
    """The group a benign text is split with: texts that share a source are on one side.

    A repository chunk goes with its file, a LoCoMo turn with its conversation, a LongMemEval
    turn with its session *family* (``0a1b2c3d_2`` and ``0a1b2c3d_4`` are variants of one
    simulated session, ``answer_0a1b2c3d_1`` its evidence session, ``sharegpt_XYZ_12`` a part
    of one ShareGPT conversation), a Claude Code turn with its transcript; anything else (a
    SciFact abstract, a case) is its own group."""
    kind, _, rest = tid.partition(":")
    if kind == "repo":
        return rest.split(":")[0]  # the file's path (as the split has always keyed it)
    if kind in ("locomo", "cc"):
        return f"{kind}:{rest.split(':')[0]}"
    if kind == "lme":
        return f"lme:{session_family(rest.split(':')[0])}"
    return tid


def session_family(sid: str) -> str:
    """``answer_0a1b2c3d_2`` -> ``0a1b2c3d``; ``sharegpt_XYZ_12`` -> ``sharegpt_XYZ``;
    ``ultrachat_123`` stays itself."""
    sid = sid.removeprefix("answer_")
    if sid.startswith("ultrachat_"):
        return sid
    if sid.startswith("sharegpt_"):
        head, _, part = sid.rpartition("_")
        return head if part.isdigit() and head != "sharegpt" else sid
    return sid.split("_", 1)[0]


def split_of(tid: str) -> str:
    """Which side of the model's fit a benign text is on, by a hash of its :func:`group`:
    ``fit`` (half: the model's negatives), ``tune`` (a quarter: its threshold is set there) or
    ``report`` (a quarter: only measured). A Claude Code transcript is always ``report``: the
    real ones are few, and they are what the rate is for."""
    key = group(tid)
    if key.startswith("cc:"):
        return "report"
    digit = int(hashlib.sha256(key.encode()).hexdigest()[0], 16)
    return SPLITS[0] if digit < 8 else SPLITS[1] if digit < 12 else SPLITS[2]


Judged = tuple[str | None, float, str | None]  # (reason, rule score, "rules" / "model" / None)


class Judge:
    """As the write policy judges a record: the rules on its content, then on its context; for
    a record they pass, the model on both (the worst text's probability)."""

    def __init__(self, model: bool = True) -> None:
        self.det = injection_model.default() if model else None
        self.emb = None
        if self.det is not None:
            from retrieval.embedding.embedder import SentenceTransformerEmbedder

            self.emb = CachingEmbedder(SentenceTransformerEmbedder())
        self.cpu = 0.0  # CPU seconds in the rules
        # after many(): per pair, the model's worst probability (0.0 when it read nothing: the
        # rules flagged the pair, or no text was long enough)
        self.last_probs: list[float] = []

    def many(self, pairs: list[tuple[str, str]]) -> list[Judged]:
        """Each (content, context) as the write policy judges a record: the context (or any
        field given in its place) is read by the model only from ``FIELD_MIN_WORDS`` prose
        words."""
        out: list[Judged] = []
        found: list[tuple[injection.Verdict, injection.Verdict | None]] = []
        for content, context in pairs:
            t = time.process_time()  # CPU time: the machine may be shared
            vc = injection.verdict(content)
            vx = injection.verdict(context) if context else None
            self.cpu += time.process_time() - t
            found.append((vc, vx))
            reason = vc.suspicious or (vx.suspicious if vx else None)
            score = max(vc.score, vx.score if vx else 0.0)
            out.append((reason, score, "rules" if reason else None))
        self.last_probs = [0.0] * len(pairs)
        if self.det is None:
            return out
        texts, finds, mins, owner = [], [], [], []
        for i, ((content, context), (vc, vx)) in enumerate(zip(pairs, found, strict=True)):
            if out[i][0] is None:
                given = ((content,) if content else (), (context,) if context else ())
                verdicts = ([vc] if content else []) + ([vx] if context else [])
                for r in _readings(*given, verdicts):
                    if injection_model.windows(r.text, r.min_words):
                        texts.append(r.text)
                        finds.append(r.findings)
                        mins.append(r.min_words)
                        owner.append(i)
        probs = self.det.probability_many(texts, self.emb, finds, mins) if texts else []
        worst: dict[int, float] = {}
        for i, p in zip(owner, probs, strict=True):
            worst[i] = max(worst.get(i, 0.0), p)
        for i, p in worst.items():
            self.last_probs[i] = p
            if self.det.flags(p):
                out[i] = (self.det.reason(p), out[i][1], "model")
        return out


def model_latency(texts: list[str], n: int = 200) -> dict:
    """Wall time the model adds to a write: embedding a text's windows (uncached, one thread,
    the embedder already loaded) and scoring them, over ``n`` texts."""
    from retrieval.embedding.embedder import SentenceTransformerEmbedder

    det = injection_model.default()
    if det is None:
        return {}
    emb = SentenceTransformerEmbedder(bulk_threads=1).load()
    sample = [t for t in texts if injection_model.windows(t)][:: max(1, len(texts) // n)][:n]
    det.probability_many(sample[:3], emb)  # warm up
    ms = []
    for t in sample:
        t0 = time.perf_counter()
        det.probability(t, emb)
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return {
        "n": len(ms),
        "p50_ms": round(ms[len(ms) // 2], 1),
        "p95_ms": round(ms[int(len(ms) * 0.95)], 1),
        "backend": emb.backend_in_use,
    }


def family(source: str) -> str:
    """``bipia-text train`` -> ``bipia``."""
    return source.split()[0].split("-")[0]
