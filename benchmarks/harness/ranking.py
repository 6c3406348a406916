"""One labelled set asked of the engine: the queries, the rankers a run compares (``lexical``,
``vector``, ``hybrid`` and today's ``main`` beside it), the store built in a temporary folder,
and the per-query metrics summed up (``metrics.py``)."""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path

from benchmarks.harness import baselines as bl
from benchmarks.harness.metrics import mean_metrics, query_metrics
from retrieval.engine import Engine, FusionConfig
from retrieval.records import Record, RecordFilter

RANKERS = ("lexical", "vector", "hybrid")
# today's main in the same run: hybrid without the time prior and the update order
MAIN = "main"
AGENT = "bench-agent"


@dataclass
class Query:
    qid: str
    text: str
    relevant: set[str]
    bucket: str
    group: str = ""  # e.g. the LoCoMo category
    now: datetime | None = None  # when the question is asked (its time words are read so)


@dataclass
class Run:
    """Per ranker: per query (qid, group, metrics)."""

    rows: dict[str, list[tuple[str, str, dict]]] = field(default_factory=lambda: defaultdict(list))
    seconds: dict[str, float] = field(default_factory=dict)


def parse_fusion(spec: str | None) -> FusionConfig:
    """``method=convex,alpha=0.6,norm=minmax,...`` -> FusionConfig (unknown keys are errors)."""
    cfg = FusionConfig()
    if not spec:
        return cfg
    types = {f.name: type(getattr(cfg, f.name)) for f in fields(cfg)}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in types:
            raise SystemExit(f"unknown fusion setting {key!r}; known: {', '.join(types)}")
        typ = types[key]
        if typ is bool:
            setattr(cfg, key, value.strip().lower() in ("1", "true", "yes", "on"))
        else:
            setattr(cfg, key, typ(value.strip()))
    return cfg


def open_engine(args, embedder, home: Path) -> Engine:
    kwargs = {}
    if getattr(args, "window_words", None):
        kwargs["window_words"] = args.window_words
    if getattr(args, "pg_fresh", None):  # --store-url: PostgreSQL canonical, home = the replica
        kwargs["store_url"] = args.pg_fresh(f"pm_relevance_{home.name.replace('-', '_')}")
    return Engine(home, embedder, fusion=parse_fusion(args.fusion), **kwargs)


def main_config(cfg: FusionConfig) -> FusionConfig:
    """``cfg`` as today's main ranks: no time prior, no update order."""
    return replace(cfg, window_weight=0.0, event_weight=0.0, when_weight=0.0, recent_weight=0.0,
                   current_first=False)  # fmt: skip


@contextmanager
def ranking_as(engine: Engine, ranker: str):
    """The engine's mode for ``ranker`` (``main``: hybrid under :func:`main_config`)."""
    if ranker != MAIN:
        yield ranker
        return
    cfg = engine.ranker.config
    engine.ranker.config = main_config(cfg)
    try:
        yield "hybrid"
    finally:
        engine.ranker.config = cfg


def run_queries(engine: Engine, queries: list[Query], rankers: Iterable[str], k: int = 10) -> Run:
    run = Run()
    for ranker in rankers:
        t0 = time.perf_counter()
        with ranking_as(engine, ranker) as mode:
            for q in queries:
                f = RecordFilter(buckets=[q.bucket], now=q.now)
                hits = engine.search(q.text, f, k, mode=mode)
                ranked = [h.record.metadata.get("doc_id", h.record.id) for h in hits]
                run.rows[ranker].append((q.qid, q.group, query_metrics(ranked, q.relevant)))
        run.seconds[ranker] = time.perf_counter() - t0
    return run


def summarize(rows: list[tuple[str, str, dict]], groups: Iterable[str] | None = None) -> dict:
    keep = [m for _, g, m in rows if groups is None or g in groups]
    return mean_metrics(keep)


def rankers_of(choice: str) -> list[str]:
    """The rankers of a run; hybrid always brings today's main beside it (``main``)."""
    out = list(RANKERS) if choice == "all" else [choice]
    return [*out, MAIN] if "hybrid" in out else out


def index(engine: Engine, records: list[Record], label: str) -> None:
    t0 = time.perf_counter()
    engine.add(records)
    emb = engine.embedder
    cache = f", cache hits {emb.hits} misses {emb.misses}" if hasattr(emb, "hits") else ""
    print(f"indexed {len(records)} {label} in {time.perf_counter() - t0:.1f}s{cache}", flush=True)


def baseline_rows(embedder, docs: list[tuple[str, str]], qs: list[Query]) -> dict:
    """The plain baselines of the same data (``baselines.py``): a stdlib BM25 over
    the whole texts, the model alone (one vector per whole text), their 50/50 min-max blend."""
    ids = [i for i, _ in docs]
    bm25 = bl.StdlibBM25([t for _, t in docs])
    vecs = bl.whole_vectors(embedder, [t for _, t in docs])
    rows: dict[str, list] = {"bm25_stdlib": [], "minilm_whole": [], "blend_50_50": []}
    for q in qs:
        lex, dense = bm25.scores(q.text), bl.dense_scores(embedder, q.text, vecs)
        for name, s in (("bm25_stdlib", lex), ("minilm_whole", dense),
                        ("blend_50_50", bl.blend(lex, dense))):  # fmt: skip
            rows[name].append((q.qid, q.group, query_metrics(bl.top_ids(s, ids), q.relevant)))
    return {name: summarize(r) for name, r in rows.items()}


def run_set(args, embedder, records: list[Record], queries: list[Query], label: str):
    """A fresh store in a temporary folder (:func:`open_engine`) holding ``records``, and every
    query asked of it by every ranker of ``args.ranker``: (the run, the store's fusion)."""
    with tempfile.TemporaryDirectory(prefix="pm-bench-") as home:
        engine = open_engine(args, embedder, Path(home))
        try:
            index(engine, records, label)
            run = run_queries(engine, queries, rankers_of(args.ranker))
        finally:
            engine.close()
    return run, engine.ranker.config
