"""Relevance benchmarks of the retrieval engine on labelled sets, through the public store API.

    python benchmarks/relevance.py beir DIR [--split train|test] [--ranker lexical|vector|hybrid|all] [--json OUT]
    python benchmarks/relevance.py locomo FILE.json [--ranker ...] [--json OUT]
    python benchmarks/relevance.py errors DIR [--split test] [--ranker ...] [--json OUT]

Every run builds a fresh store in a temporary folder (``Engine(home, embedder)``), adds every
document with ``Engine.add`` and asks every labelled query with ``Engine.search``. Embeddings
are cached in ``.bench-cache/`` (keyed by model and text), so a rerun only pays for indexing.
Metrics (``benchmarks/harness/metrics.py``): recall@5, recall@10, nDCG@10 (binary gains), MRR@10.
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
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: benchmarks/ingest.py must not shadow the ingest package

from benchmarks.harness.data import (  # noqa: E402
    LOCOMO_CATEGORIES,
    evidence_ids,
    load_beir,
    locomo_date,
    locomo_sessions,
)
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.metrics import query_metrics  # noqa: E402
from benchmarks.harness.ranking import (  # noqa: E402
    AGENT,
    MAIN,
    RANKERS,
    Run,
    baseline_rows,
    open_engine,
    parse_fusion,
    rankers_of,
    run_set,
    summarize,
)
from benchmarks.harness.report import format_table, write_json  # noqa: E402
from benchmarks.harness.sets import (  # noqa: E402
    DEFAULT_LOCOMO_CONTEXT,
    beir_set,
    locomo_set,
)
from retrieval.records import RecordFilter  # noqa: E402


# ---------------------------------------------------------------------------- BEIR
def cmd_beir(args) -> dict:
    folder = Path(args.dir)
    records, qs, corpus, split = beir_set(folder, args.split, args.title)
    if args.limit:
        qs = qs[: args.limit]
    print(f"{folder.name}: {len(records)} docs, {len(qs)} queries with qrels ({split} split)")
    embedder = make_embedder(not args.no_cache)
    run, fusion = run_set(args, embedder, records, qs, "docs")
    results = {r: summarize(rows) for r, rows in run.rows.items()}
    docs = [
        (str(d["_id"]), f"{d.get('title') or ''}\n{d.get('text') or ''}".strip()) for d in corpus
    ]
    results.update(baseline_rows(embedder, docs, qs))
    print(format_table(f"{folder.name} ({split}), fusion {fusion}", list(results.items())))
    for r, s in run.seconds.items():
        print(f"  {r}: {1000 * s / max(1, len(qs)):.1f} ms/query")
    write_json(args.json, results)
    return results


# ---------------------------------------------------------------------------- LoCoMo


def cmd_locomo(args) -> dict:
    data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    records, qs = locomo_set(data, args.context)
    if args.limit:
        qs = qs[: args.limit]
    print(
        f"locomo: {len(data)} conversations, {len(records)} turns, {len(qs)} questions with evidence"
    )
    print(f"context: {args.context or '(none)'}")
    embedder = make_embedder(not args.no_cache)
    run, fusion = run_set(args, embedder, records, qs, "turns")
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
    print(f"fusion {fusion}")
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
        from retrieval.storage.buckets import bucket_of

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
        from benchmarks.harness.pg import postgres

        with postgres(args.store_url) as fresh:
            args.pg_fresh = fresh
            args.func(args)
        return 0
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
