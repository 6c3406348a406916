"""The lesson threshold of the failed-command hooks, on Defects4J (``relevance.py errors DIR
--abstain``).

Each project's lessons (one per bug: its first failing trace) live in that project's team graph.
Each failing trace of the query set is asked as the hook asks it: its type, message, failing
test and innermost frame (``failure_lessons.query_text``), scored by
``hook_context.lesson_scores`` (the hook's code) against its own project's lessons (*same bug*: its bug's lesson clears the threshold) and
against the next project's (*other project silent*: nothing clears it). Printed for every
threshold; the JSON holds the curve.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from graph.entities import GraphService
from graph.lessons import LessonService
from ingest.learning.signatures import error_text
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.service.learning import failure_lessons as fl
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar

THRESHOLDS = [round(0.30 + 0.05 * i, 2) for i in range(19)]


def project_of(doc_id: str) -> str:
    return doc_id.split("#")[0].split("-")[0]


def run(corpus, queries, qrels, embedder, lesson_of, caller, limit: int = 300,
        tests: dict | None = None) -> dict:  # fmt: skip
    """``tests``: {query id: its failing test} (the query's context, as the hook reads it)."""
    projects = sorted({project_of(d["_id"]) for d in corpus})
    qs = [(q, queries[q], rel) for q, rel in qrels.items() if q in queries]
    random.Random(1).shuffle(qs)
    qs = qs[:limit] if limit else qs
    same, other = [], []
    with tempfile.TemporaryDirectory(prefix="pm-bench-lessons-") as home:
        engine = Engine(Path(home), embedder)
        try:
            svc = MemoryService(engine)
            lessons = LessonService(GraphService(engine))
            who = {p: caller(f"errors-{p}") for p in projects}
            for p in projects:
                docs = [lesson_of(d) for d in corpus if project_of(d["_id"]) == p]
                for i in range(0, len(docs), 200):
                    lessons.create_lessons(who[p], docs[i : i + 200])
            rec_of = {r["name"]: r["record_id"]
                      for r in engine.store.reader.execute("SELECT name, record_id FROM lessons")}  # fmt: skip
            for qid, text, rel in qs:
                p = project_of(qid)
                q = projects[(projects.index(p) + 1) % len(projects)]
                error = fl.query_text(fl.pattern_of(error_text(text), (tests or {}).get(qid, "")))
                own = RecordFilter(buckets=[who[p].bucket("team")], kinds=[Kind.lesson])
                scores = ar.lesson_scores(svc, own, error)
                same.append(max([scores.get(rec_of[n], 0.0) for n in rel if n in rec_of] or [0.0]))
                far = RecordFilter(buckets=[who[q].bucket("team")], kinds=[Kind.lesson])
                other.append(max(ar.lesson_scores(svc, far, error).values(), default=0.0))
        finally:
            engine.close()
    n = len(qs)
    curve = [{"threshold": t, "same_bug": round(sum(x >= t for x in same) / n, 4),
              "other_project_silent": round(sum(x < t for x in other) / n, 4)}
             for t in THRESHOLDS]  # fmt: skip
    print(f"lesson threshold over {n} failing traces ({len(projects)} projects): threshold, the "
          "same bug's lesson injected, silent against another project's lessons")  # fmt: skip
    for row in curve:
        print(f"  {row['threshold']:.2f}  same bug {row['same_bug']:.3f}  other project silent "
              f"{row['other_project_silent']:.3f}")  # fmt: skip
    return {"curve": curve, "queries": n, "default": ar.DEFAULT_LESSON_THRESHOLD}
