"""Long chat histories: LongMemEval_S questions over their haystacks, through the session indexer.

    python benchmarks/relevance.py longmemeval DIR [--ranker all] [--limit N] [--json OUT]

``DIR`` holds ``questions.jsonl`` and ``sessions.jsonl.gz`` (``../shared/data/longmemeval_s``).
Abstention questions (ids ending ``_abs``) are skipped. Each question's haystack becomes one
transcript in the generic JSONL format (``{"session", "role", "content", "timestamp", "cwd"}``
per line, the sessions in haystack order at their dates), exactly as a user's own transcripts
would arrive, with ``cwd`` ``/longmemeval/<question id>``: the indexer puts it in a project of
its own (``server/service/indexing/sessions.py``: exchanges of at most 500 words). The question is then
asked of that project (``Engine.search``, the ranker ``recall`` and the hooks use).

- turn level: a returned unit counts when it holds an answer turn (``answer_turns``);
  ``turn_recall_any@k``: one among the first k units.
- session level: the units grouped by session (``retrieval.ranking.grouping``, as files group chunks);
  ``session_recall_any@k``: an answer session among the first k sessions; ``ndcg@10`` over the
  sessions.

Baselines of the same data in the same run: ``bm25_stdlib_sessions`` (BM25 over each whole
session), ``bm25_stdlib_turns`` (over each turn; a session scores by its best turn) and
``minilm_turns`` (the model over each turn, one vector, its first ``BASELINE_WORDS`` words).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np

from benchmarks.harness import baselines as bl
from benchmarks.harness import time_metrics as tm
from benchmarks.harness.data import load_longmemeval, session_date
from benchmarks.harness.metrics import ndcg_at_k
from benchmarks.harness.ranking import ranking_as
from retrieval.engine import Engine
from retrieval.ranking import grouping
from retrieval.records import Kind, RecordFilter
from server.service.core.identity import Identity, identity_fields
from server.service.indexing.sessions import SessionIndexer
from server.service.memories.memory import MemoryService

KS = (5, 10)
DEPTH = 50  # units asked for (enough for 10 sessions)
BASELINE_WORDS = 128
METRICS = [f"session_recall_any@{k}" for k in KS] + [f"turn_recall_any@{k}" for k in KS]
METRICS += ["ndcg@10", "recall_all@10", "newest_first"]


def positions(turns: list[dict]) -> dict[int, int]:
    """{turn index in the data: position the indexer gives it} (empty turns are not read)."""
    out, n = {}, 0
    for i, t in enumerate(turns):
        if t["content"].strip():
            out[i] = n
            n += 1
    return out


def write_transcript(q: dict, sessions: dict, folder: Path) -> Path:
    path = folder / f"{q['question_id']}.jsonl"
    cwd = f"/longmemeval/{q['question_id']}"
    with open(path, "w", encoding="utf-8") as fh:
        for sid, date in zip(q["haystack_session_ids"], q["haystack_dates"], strict=True):
            start = session_date(date)
            for i, t in enumerate(sessions[sid]):
                when = (start + timedelta(seconds=30 * i)).isoformat().replace("+00:00", "Z")
                fh.write(json.dumps({"session": sid, "role": t["role"], "content": t["content"],
                                     "timestamp": when, "cwd": cwd}) + "\n")  # fmt: skip
    return path


def who_of(q: dict) -> Identity:
    return Identity(**identity_fields({}, Path(f"/longmemeval/{q['question_id']}")))


def answer_positions(q: dict, sessions: dict) -> set[tuple[str, int]]:
    out = set()
    for sid, i in q["answer_turns"]:
        pos = positions(sessions[sid]).get(i)
        if pos is not None:
            out.add((sid, pos))
    return out


def holds(meta: dict, answers: set[tuple[str, int]]) -> bool:
    """The unit (its session and turn range) holds an answer turn."""
    first, last = meta.get("turn"), meta.get("last_turn", meta.get("turn"))
    session = meta.get("session")
    return any(s == session and first <= i <= last for s, i in answers)


def scores(units: Sequence[tuple[str, bool]], gold: set[str]) -> dict[str, float]:
    """``units``: (session, holds an answer turn) best first."""
    sessions = list(dict.fromkeys(s for s, _ in units))
    out = {f"session_recall_any@{k}": float(bool(gold & set(sessions[:k]))) for k in KS}
    out.update({f"turn_recall_any@{k}": float(any(h for _, h in units[:k])) for k in KS})
    out["ndcg@10"] = ndcg_at_k(sessions, gold, 10)
    return out


def ranked_units(engine: Engine, who: Identity, question: str, mode: str, now=None):
    f = RecordFilter(buckets=who.visible_buckets(), kinds=[Kind.turn], now=now)
    hits = engine.search(question, f, DEPTH, mode=mode)
    groups = grouping.group(hits, key=lambda h: str(h.record.metadata.get("session")),
                            score=lambda h: h.score)  # fmt: skip
    return hits, [g.key for g in groups]


def baseline_rows(q: dict, sessions: dict, embedder, answers) -> dict[str, dict]:
    sids = q["haystack_session_ids"]
    gold = set(q["answer_session_ids"])
    turns = [(sid, pos, t["content"]) for sid in sids
             for i, t in enumerate(sessions[sid]) if (pos := positions(sessions[sid]).get(i)) is not None]  # fmt: skip
    whole = bl.StdlibBM25(["\n".join(t["content"] for t in sessions[s]) for s in sids])
    by_turn = bl.StdlibBM25([text for _, _, text in turns])
    vecs = bl.whole_vectors(embedder, [" ".join(text.split()[:BASELINE_WORDS])
                                       for _, _, text in turns])  # fmt: skip
    out = {}
    s_order = [sids[i] for i in np.argsort(-whole.scores(q["question"]), kind="stable")]
    out["bm25_stdlib_sessions"] = {
        **{f"session_recall_any@{k}": float(bool(gold & set(s_order[:k]))) for k in KS},
        "ndcg@10": ndcg_at_k(s_order, gold, 10),
    }
    for name, sc in (("bm25_stdlib_turns", by_turn.scores(q["question"])),
                     ("minilm_turns", bl.dense_scores(embedder, q["question"], vecs))):  # fmt: skip
        order = np.argsort(-sc, kind="stable")[:DEPTH]
        units = [(turns[i][0], (turns[i][0], turns[i][1]) in answers) for i in order]
        out[name] = scores(units, gold)
    return out


def run(args, embedder, rankers: list[str]) -> dict:
    qs, sessions = load_longmemeval(Path(args.dir), args.limit, getattr(args, "types", None) or ())
    print(f"longmemeval: {len(qs)} questions, {len(sessions)} sessions", flush=True)
    rows: dict[str, list[dict]] = {}
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pm-lme-") as tmp:
        engine = Engine(Path(tmp) / "store", embedder)
        try:
            indexer = SessionIndexer(MemoryService(engine))
            t0, units = time.perf_counter(), 0
            for n, q in enumerate(qs, 1):
                path = write_transcript(q, sessions, Path(tmp))
                units += indexer.index_file(who_of(q), path, flush=True, final=True).added
                if n % 10 == 0 or n == len(qs):
                    print(f"indexed {n} haystacks, {units} units, {time.perf_counter() - t0:.0f}s "
                          f"(cache hits {getattr(embedder, 'hits', 0)} misses "
                          f"{getattr(embedder, 'misses', 0)})", flush=True)  # fmt: skip
            for q in qs:
                who, gold = who_of(q), list(q["answer_session_ids"])
                answers = answer_positions(q, sessions)
                now = session_date(q["question_date"])  # the question's date is "now"
                dates = dict(zip(q["haystack_session_ids"], q["haystack_dates"], strict=True))
                gold_dates = {s: session_date(dates[s]).timestamp() for s in gold}
                for ranker in rankers:
                    with ranking_as(engine, ranker) as mode:
                        hits, s_order = ranked_units(engine, who, q["question"], mode, now)
                    units = [(h.record.metadata.get("session"),
                              holds(h.record.metadata, answers)) for h in hits]  # fmt: skip
                    # sessions ranked by their grouped score, not by their first unit
                    m = tm.longmemeval_metrics(s_order, units, gold, gold_dates)
                    rows.setdefault(ranker, []).append({**m, "type": q["question_type"]})
                for name, m in baseline_rows(q, sessions, embedder, answers).items():
                    rows.setdefault(name, []).append({**m, "type": q["question_type"]})
        finally:
            engine.close()
    results = {}
    for name, rs in rows.items():
        results[name] = tm.mean_rows([{k: v for k, v in r.items() if k != "type"} for r in rs])
        by_type: dict[str, list[dict]] = {}
        for r in rs:
            by_type.setdefault(r["type"], []).append({k: v for k, v in r.items() if k != "type"})
        results[name]["types"] = {t: tm.mean_rows(v) for t, v in sorted(by_type.items())}
    head = f"{'':<22}" + "".join(f"{m.replace('_recall_any', ' R_any'):>16}" for m in METRICS)
    print(f"\nLongMemEval_S ({len(qs)} questions)\n{head}\n{'-' * len(head)}")
    for name, res in results.items():
        print(f"{name:<22}" + "".join(f"{res[m]:>16.4f}" if m in res else f"{'':>16}"
                                      for m in METRICS))  # fmt: skip
    for name in [r for r in rankers if r in results]:
        for t, res in results[name]["types"].items():
            print(f"{name:<8}{t:<26}" + " ".join(f"{k.replace('_recall_any', ' R_any')} "
                  f"{v:.3f}" for k, v in res.items() if k != "queries") + f"  ({res['queries']})")  # fmt: skip
    wall = time.perf_counter() - t_start
    hits, misses = getattr(embedder, "hits", 0), getattr(embedder, "misses", 0)
    print(f"wall {wall:.0f}s, embedding cache hits {hits} misses {misses}")
    results["_run"] = {"wall_s": round(wall, 1), "cache_hits": hits, "cache_misses": misses}
    return results
