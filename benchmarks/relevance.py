"""Relevance benchmarks of the retrieval engine on labelled sets, through the public store API.

    python benchmarks/relevance.py beir DIR [--split train|test] [--ranker lexical|vector|hybrid|all] [--json OUT]
    python benchmarks/relevance.py locomo FILE.json [--ranker ...] [--json OUT]
    python benchmarks/relevance.py errors DIR [--split test] [--ranker ...] [--json OUT]

Every run builds a fresh store in a temporary folder (``Engine(home, embedder)``), adds every
document with ``Engine.add`` and asks every labelled query with ``Engine.search``. Embeddings
are cached in ``.bench-cache/`` (keyed by model and text), so a rerun only pays for indexing.
Metrics (``benchmarks/metrics.py``): recall@5, recall@10, nDCG@10 (binary gains), MRR@10.
``--store-url URL|pgserver``: PostgreSQL is the canonical store (a fresh database each run) and
the folder the node's replica (docs/postgres.md); the ranking must equal the SQLite store's.

beir    BEIR layout: corpus.jsonl (_id, title, text), queries.jsonl, qrels/<split>.tsv.
        A document is stored as one record; its title is the record's context (``--title``):
        indexed in the context column and put in front of every embedding window.
locomo  LoCoMo evidence retrieval: one project (bucket) per conversation, one memory per turn
        ("Speaker: text"); each question with evidence is asked against its conversation only;
        recall@k = fraction of the evidence turns in the top k. Rows per category 1-5 and
        "all (1-4)" (peers report 1-4). The conversational context a client has when it stores
        a turn (session date, neighbouring turns, shared image caption) goes in the record's
        ``context`` field (``--context``).

errors  Similar-error search over lessons (``graph.lessons``), BEIR layout where each corpus doc
        is a lesson (title = the failing test, text = its stack trace) and each query another
        failure's trace. Every doc is stored with ``create_lesson`` (errorPattern parsed from the
        trace: type and message from its header, context = the test, stackTrace = the frames),
        every query asked with ``find_similar_errors`` — its context is the query's failing test
        (``metadata.test``) when it has one, as an agent that ran the test knows it
        (``--query-context none``: the trace only): ``hybrid`` is the tool itself,
        ``lexical`` / ``vector`` its two halves, and ``bm25 (engine)`` the engine's default
        lexical search over the same lesson records (no stack-trace features) for scale.

The parser uses subcommands so more sets can be added as further subcommands.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: benchmarks/ingest.py must not shadow the ingest package

from benchmarks.metrics import METRICS, mean_metrics, query_metrics  # noqa: E402
from ingest.turns import DEFAULT_CONTEXT, turn_context, turn_text  # noqa: E402
from ingest.turns import context_spec as turns_spec  # noqa: E402
from retrieval.engine import Engine, FusionConfig  # noqa: E402
from retrieval.records import Record, RecordFilter, Scope  # noqa: E402

RANKERS = ("lexical", "vector", "hybrid")
# today's main in the same run: hybrid without the time prior and the update order
MAIN = "main"
AGENT = "bench-agent"


# ---------------------------------------------------------------------------- shared
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


def make_embedder(cache: bool = True):
    from retrieval.embedder import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    if cache:
        from benchmarks.embed_cache import CachingEmbedder

        emb = CachingEmbedder(emb)
    return emb


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


def format_table(title: str, table: list[tuple[str, dict]]) -> str:
    head = f"{'':<22}" + "".join(f"{m:>11}" for m in METRICS) + f"{'queries':>9}"
    lines = [title, head, "-" * len(head)]
    for name, res in table:
        vals = "".join(f"{res[m]:>11.4f}" for m in METRICS)
        lines.append(f"{name:<22}{vals}{res['queries']:>9}")
    return "\n".join(lines)


def write_json(path: str | None, payload: dict) -> None:
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    print(f"wrote {out}")


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
    """The plain baselines of the same data (``benchmarks/baselines.py``): a stdlib BM25 over
    the whole texts, the model alone (one vector per whole text), their 50/50 min-max blend."""
    from benchmarks import baselines as bl

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


# ---------------------------------------------------------------------------- BEIR
def load_beir(folder: Path, split: str | None):
    corpus = [json.loads(line) for line in open(folder / "corpus.jsonl", encoding="utf-8")]
    queries = {}
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        queries[str(q["_id"])] = q["text"]
    if split is None:
        split = "test" if (folder / "qrels" / "test.tsv").exists() else "train"
    qrels: dict[str, set[str]] = defaultdict(set)
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for row in reader:
            if len(row) >= 3 and float(row[2]) > 0:
                qrels[str(row[0])].add(str(row[1]))
    return corpus, queries, dict(qrels), split


def beir_record(doc: dict, project: str, title_mode: str) -> Record:
    title = (doc.get("title") or "").strip()
    text = (doc.get("text") or "").strip()
    content, context = text, ""
    if title and title_mode == "content":
        content = f"{title}\n{text}" if text else title
    elif title and title_mode == "context":
        context = title
    return Record(
        project_id=project,
        agent_id=AGENT,
        scope=Scope.team,
        category="learnings",
        content=content or title,
        context=context,
        metadata={"doc_id": str(doc["_id"])},
    )


def cmd_beir(args) -> dict:
    folder = Path(args.dir)
    corpus, queries, qrels, split = load_beir(folder, args.split)
    project = f"beir-{folder.name}"
    records = [beir_record(d, project, args.title) for d in corpus]
    bucket = records[0].bucket
    qs = [Query(qid, queries[qid], rel, bucket) for qid, rel in qrels.items() if qid in queries]
    if args.limit:
        qs = qs[: args.limit]
    print(f"{folder.name}: {len(records)} docs, {len(qs)} queries with qrels ({split} split)")
    embedder = make_embedder(not args.no_cache)
    with tempfile.TemporaryDirectory(prefix="pm-bench-") as home:
        engine = open_engine(args, embedder, Path(home))
        try:
            index(engine, records, "docs")
            run = run_queries(engine, qs, rankers_of(args.ranker))
        finally:
            engine.close()
    results = {r: summarize(rows) for r, rows in run.rows.items()}
    docs = [
        (str(d["_id"]), f"{d.get('title') or ''}\n{d.get('text') or ''}".strip()) for d in corpus
    ]
    results.update(baseline_rows(embedder, docs, qs))
    print(
        format_table(
            f"{folder.name} ({split}), fusion {engine.ranker.config}", list(results.items())
        )
    )
    for r, s in run.seconds.items():
        print(f"  {r}: {1000 * s / max(1, len(qs)):.1f} ms/query")
    write_json(args.json, results)
    return results


# ---------------------------------------------------------------------------- LoCoMo
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_DIA = re.compile(r"D\d+:\d+")
DEFAULT_LOCOMO_CONTEXT = DEFAULT_CONTEXT


def locomo_date(text: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> datetime (None when unparseable)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except (ValueError, AttributeError):
        return None


def locomo_sessions(conv: dict) -> list[tuple[int, str, list[dict]]]:
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m.group(1)), conv.get(f"{key}_date_time", ""), turns))
    return sorted(out)


def locomo_now(sample: dict) -> datetime | None:
    """When a conversation's questions are asked: its last session's date."""
    sessions = locomo_sessions(sample["conversation"])
    return locomo_date(sessions[-1][1]) if sessions else None


def locomo_records(sample: dict, context_spec: str) -> list[Record]:
    spec = turns_spec(context_spec)
    project = f"locomo-{sample['sample_id']}"
    recs = []
    for _n, date, turns in locomo_sessions(sample["conversation"]):
        when = locomo_date(date)
        for i, turn in enumerate(turns):
            extra = {"created_at": when, "updated_at": when} if when else {}
            recs.append(
                Record(
                    project_id=project,
                    agent_id=AGENT,
                    scope=Scope.team,
                    category="learnings",
                    content=turn_text(turn),
                    context=turn_context(turns, i, date, spec),
                    metadata={"doc_id": turn["dia_id"], "session_date": date},
                    **extra,
                )
            )
    return recs


def evidence_ids(evidence: Iterable[str], known: set[str]) -> set[str]:
    """Evidence turn ids, with malformed entries ("D8:6; D9:17") split and unknown ids dropped."""
    out = set()
    for ev in evidence or []:
        for part in _DIA.findall(str(ev)):
            if part in known:
                out.add(part)
    return out


def cmd_locomo(args) -> dict:
    data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    records: list[Record] = []
    qs: list[Query] = []
    for sample in data:
        recs = locomo_records(sample, args.context)
        records.extend(recs)
        known = {r.metadata["doc_id"] for r in recs}
        bucket = recs[0].bucket
        now = locomo_now(sample)
        for i, qa in enumerate(sample.get("qa", [])):
            rel = evidence_ids(qa.get("evidence", []), known)
            if rel and qa.get("question"):
                qid = f"{sample['sample_id']}#{i}"
                qs.append(Query(qid, qa["question"], rel, bucket, str(qa.get("category")), now))
    if args.limit:
        qs = qs[: args.limit]
    print(
        f"locomo: {len(data)} conversations, {len(records)} turns, {len(qs)} questions with evidence"
    )
    print(f"context: {args.context or '(none)'}")
    embedder = make_embedder(not args.no_cache)
    with tempfile.TemporaryDirectory(prefix="pm-bench-") as home:
        engine = open_engine(args, embedder, Path(home))
        try:
            index(engine, records, "turns")
            run = run_queries(engine, qs, rankers_of(args.ranker))
        finally:
            engine.close()
    payload = {}
    for ranker, rows in run.rows.items():
        table = []
        cats = {}
        for c in sorted({g for _, g, _ in rows}):
            res = summarize(rows, {c})
            cats[c] = res
            table.append((f"{c} {LOCOMO_CATEGORIES.get(int(c), '')}" if c.isdigit() else c, res))
        headline = summarize(rows, {"1", "2", "3", "4"})
        table.append(("all (1-4)", headline))
        print(format_table(f"LoCoMo, {ranker}", table))
        print(f"  {1000 * run.seconds[ranker] / max(1, len(qs)):.1f} ms/query")
        payload[ranker] = {**headline, "categories": cats}
    print(f"fusion {engine.ranker.config}")
    if args.via_sessions:
        from benchmarks import sessions_bench

        helpers = (locomo_sessions, locomo_date, evidence_ids)
        via = sessions_bench.run(args, data, embedder, helpers, summarize, format_table,
                                 LOCOMO_CATEGORIES)  # fmt: skip
        direct = payload.get("hybrid", {}).get("recall@10")
        for label, res in via.items():
            if "recall@10" in res and direct is not None:
                res["delta_recall@10_vs_direct"] = round(res["recall@10"] - direct, 4)
                print(f"{label}: recall@10 {res['recall@10']:.4f} vs direct {direct:.4f} "
                      f"({res['recall@10'] - direct:+.4f})")  # fmt: skip
        if "long prompts" in via:
            gap = via["long prompts"]["recall@10"] - via["via sessions"]["recall@10"]
            via["long prompts"]["delta_recall@10_vs_bare"] = round(gap, 4)
            print(f"long prompts vs bare questions: recall@10 {gap:+.4f}")
        payload["sessions"] = via
    write_json(args.json, payload)
    return payload


# ---------------------------------------------------------------------------- errors (lessons)
class BenchCaller:
    """The identity the lessons are stored under (one team graph)."""

    def __init__(self, project_id: str, agent_id: str = AGENT) -> None:
        self.project_id, self.agent_id = project_id, agent_id

    def bucket(self, scope: str) -> str:
        from retrieval.buckets import bucket_of

        return bucket_of(scope, self.project_id, self.agent_id)


def error_pattern(trace: str, context: str = "") -> dict:
    """A raw failure trace -> the seed's errorPattern {type, message, context, stackTrace}."""
    from graph.traces import split_trace

    typ, msg, frames = split_trace(trace)
    return {"type": typ or "error", "message": msg or typ or trace.strip()[:200] or "(none)",
            "context": context, "stackTrace": frames or None}  # fmt: skip


def lesson_of(doc: dict) -> dict:
    meta = doc.get("metadata") or {}
    return {
        "name": str(doc["_id"]),
        "entityType": "lesson",
        "observations": [],
        "errorPattern": error_pattern(doc.get("text") or "", (doc.get("title") or "").strip()),
        "metadata": {
            "severity": "medium",
            "frequency": 1,
            "successRate": 1.0,
            "environment": {k: v for k, v in meta.items() if k == "project"},
        },
        "verificationSteps": [],
    }


def cmd_errors(args) -> dict:
    from graph.entities import GraphService
    from graph.lesson_ranking import error_text
    from graph.lessons import LessonService
    from retrieval.records import Kind

    folder = Path(args.dir)
    corpus, queries, qrels, split = load_beir(folder, args.split)
    qmeta = {}
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        qmeta[str(q["_id"])] = q.get("metadata") or {}
    qs = [(qid, queries[qid], rel) for qid, rel in qrels.items() if qid in queries]
    if args.limit:
        qs = qs[: args.limit]
    print(f"{folder.name}: {len(corpus)} lessons, {len(qs)} queries with qrels ({split} split)")
    who = BenchCaller(f"errors-{folder.name}")
    bucket = who.bucket("team")
    embedder = make_embedder(not args.no_cache)
    rankers = [r for r in rankers_of(args.ranker) if r != MAIN]  # lessons rank on their own
    run = Run()
    with tempfile.TemporaryDirectory(prefix="pm-bench-") as home:
        engine = open_engine(args, embedder, Path(home))
        try:
            fusion = parse_fusion(args.fusion) if args.fusion else None  # the lessons' own fusion
            lessons = LessonService(GraphService(engine), fusion=fusion)
            t0 = time.perf_counter()
            docs = [lesson_of(d) for d in corpus]
            for i in range(0, len(docs), 500):
                lessons.create_lessons(who, docs[i : i + 500])
            hits = getattr(embedder, "hits", None)
            cache = f", cache hits {hits} misses {embedder.misses}" if hits is not None else ""
            took = time.perf_counter() - t0
            print(f"created {len(docs)} lessons in {took:.1f}s{cache}", flush=True)
            with_test = args.query_context == "test"
            patterns = {
                qid: error_pattern(text, qmeta.get(qid, {}).get("test", "") if with_test else "")
                for qid, text, _ in qs
            }
            for ranker in [*rankers, "bm25 (engine)"]:
                t0 = time.perf_counter()
                for qid, _text, rel in qs:
                    if ranker == "bm25 (engine)":
                        p = patterns[qid]
                        f = RecordFilter(buckets=[bucket], kinds=[Kind.lesson])
                        text = error_text(p["type"], p["message"], p["context"], p["stackTrace"])
                        hits = engine.search(text, f, 10, mode="lexical")
                        ranked = [h.record.entity_name for h in hits]
                    else:
                        res = lessons.find_similar_errors(who, patterns[qid], limit=10, mode=ranker)
                        ranked = [m.name for m in res.lessons]
                    run.rows[ranker].append((qid, "", query_metrics(ranked, rel)))
                run.seconds[ranker] = time.perf_counter() - t0
        finally:
            engine.close()
    results = {r: summarize(rows) for r, rows in run.rows.items()}
    label = {
        "hybrid": "find_similar_errors",
        "lexical": "  its lexical half",
        "vector": "  its vector half",
    }
    table = [(label.get(r, r), res) for r, res in results.items()]
    print(format_table(f"{folder.name} ({split}), lessons fusion {lessons.ranker.config}", table))
    for r, sec in run.seconds.items():
        print(f"  {r}: {1000 * sec / max(1, len(qs)):.1f} ms/query")
    if args.abstain:
        from benchmarks import lesson_noise

        tests = {q: m.get("test", "") for q, m in qmeta.items()}
        results["abstain"] = lesson_noise.run(corpus, queries, qrels, embedder, lesson_of,
                                              BenchCaller, args.limit or 300, tests)  # fmt: skip
    write_json(args.json, results)
    return results


# ---------------------------------------------------------------------------- localize
def cmd_localize(args) -> dict:
    from benchmarks import localize

    embedder = make_embedder(not args.no_cache)
    results = localize.run(args, embedder, [r for r in rankers_of(args.ranker) if r != MAIN])
    write_json(args.json, results)
    return results


def cmd_longmemeval(args) -> dict:
    from benchmarks import longmemeval

    embedder = make_embedder(not args.no_cache)
    results = longmemeval.run(args, embedder, rankers_of(args.ranker))
    write_json(args.json, results)
    return results


# ---------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--ranker", choices=[*RANKERS, MAIN, "all"], default="all")
        sp.add_argument("--json", metavar="OUT", help="write {ranker: {metric: value}} here")
        sp.add_argument("--fusion", metavar="K=V,...", help="override FusionConfig fields")
        sp.add_argument(
            "--window-words",
            type=int,
            default=0,
            help="words per embedded window (default: the model's)",
        )
        sp.add_argument("--limit", type=int, default=0, help="only the first N queries")
        sp.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
        sp.add_argument(
            "--store-url",
            metavar="URL|pgserver",
            help="PostgreSQL as the canonical store (a fresh database on this server, or a "
            "temporary pgserver); the ranking is then answered by the node's replica",
        )

    b = sub.add_parser("beir", help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/)")
    b.add_argument("dir")
    b.add_argument("--split", choices=["train", "test", "dev"], default=None)
    b.add_argument(
        "--title",
        choices=["content", "context", "none"],
        default="context",
        help="where the document title goes",
    )
    common(b)
    b.set_defaults(func=cmd_beir)

    lo = sub.add_parser("locomo", help="LoCoMo evidence retrieval (locomo10.json format)")
    lo.add_argument("file")
    lo.add_argument(
        "--context",
        default=DEFAULT_LOCOMO_CONTEXT,
        help="what goes in each turn's context: comma list of date, caption, "
        "prevN, nextN ('' = nothing)",
    )
    lo.add_argument(
        "--via-sessions",
        action="store_true",
        help="also: conversations as Claude Code transcripts, indexed by the session "
        "indexer, asked through the UserPromptSubmit hook's selection code",
    )
    lo.add_argument(
        "--long-prompts",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="with --via-sessions: also ask each question wrapped in a long prompt "
        "(JSON list of texts with {question}; default "
        "benchmarks/data/long_prompts.json)",
    )
    lo.add_argument("--abstain", action="store_true",
                    help="with --via-sessions: the noise-control threshold curve")  # fmt: skip
    common(lo)
    lo.set_defaults(func=cmd_locomo)

    loc = sub.add_parser("localize", help="which file an issue needs (SWE-bench layout)")
    loc.add_argument("dir")
    loc.add_argument("--details", action="store_true", help="per instance: gold and top files")
    loc.add_argument("--dump", metavar="JSONL",
                     help="per instance: every hybrid candidate chunk's path, title and both "
                          "sides' scores, for offline fusion experiments")  # fmt: skip
    common(loc)
    loc.set_defaults(func=cmd_localize)

    lme = sub.add_parser("longmemeval", help="LongMemEval_S through the session indexer")
    lme.add_argument("dir")
    lme.add_argument(
        "--types",
        nargs="+",
        metavar="TYPE",
        default=(),
        help="only these question types (e.g. knowledge-update temporal-reasoning)",
    )
    common(lme)
    lme.set_defaults(func=cmd_longmemeval)

    er = sub.add_parser("errors", help="similar-error search over lessons (BEIR layout of traces)")
    er.add_argument("dir")
    er.add_argument("--split", choices=["train", "test", "dev"], default=None)
    er.add_argument("--query-context", choices=["none", "test"], default="test",
                    help="errorPattern.context of a query: its failing test (default, when the "
                         "query has one) or nothing")  # fmt: skip
    er.add_argument(
        "--abstain",
        action="store_true",
        help="also: the failed-command hooks' lesson-threshold curve (per project)",
    )
    common(er)
    er.set_defaults(func=cmd_errors)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.store_url:
        from benchmarks.pg_util import postgres

        with postgres(args.store_url) as fresh:
            args.pg_fresh = fresh
            args.func(args)
        return 0
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
