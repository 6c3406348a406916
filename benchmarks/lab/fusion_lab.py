"""Signals of every dev set, dumped once, so query views and fusion can be compared offline.

    python -m benchmarks run fusion_lab dump jira|cosqa|scifact|locomo|locomo_long --out DIR

For each query, over every record of its bucket: the bm25 of several lexical term sets and the
best-window cosine of several query vectors (the whole query, each of its windows), with each
window's salience. ``fusion_fit.py`` fits and scores fusions on these dumps.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.ranking import Query, index  # noqa: E402
from benchmarks.harness.sets import DEFAULT_LOCOMO_CONTEXT, beir_set, locomo_set  # noqa: E402
from benchmarks.sessions_bench import wrap  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.fulltext.analyzer import query_terms  # noqa: E402
from retrieval.ranking import longquery  # noqa: E402
from retrieval.records import RecordFilter  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def sets(name: str):
    """(records, queries) of a dev set."""
    if name in ("jira", "cosqa", "scifact"):
        folder = {"jira": DATA / "jira_activemq/beir", "cosqa": DATA / "cosqa/beir",
                  "scifact": DATA / "scifact"}[name]  # fmt: skip
        records, qs, _, _ = beir_set(folder, None, "context", f"beir-{name}")  # as relevance.py
        return records, qs
    data = json.loads((DATA / "locomo/locomo_dev.json").read_text(encoding="utf-8"))
    wrapped = None
    if name == "locomo_long":
        path = ROOT / "benchmarks" / "data" / "long_prompts.json"
        wrappers = json.loads(path.read_text(encoding="utf-8"))

        def wrapped(text: str, qid: str) -> str:
            return wrap(text, qid, wrappers)

    return locomo_set(data, DEFAULT_LOCOMO_CONTEXT, dated=False, categories="1234", wrap=wrapped)


def head(rec, words: int = 200) -> str:
    """A document's head view: its context and the start of its content."""
    text = f"{rec.context}\n{rec.content}".strip()
    return " ".join(text.split()[:words])


def signals(engine: Engine, q: Query, ids: list[str], mats) -> dict:
    lex = engine.lexical
    f = RecordFilter(buckets=[q.bucket])
    pos = {r: i for i, r in enumerate(ids)}

    def bm25(terms: list[str]) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.float32)
        if not terms:
            return out
        _, every = lex.search_all(q.text, f, 1, terms=terms)
        for r, s in every.items():
            if r in pos:
                out[pos[r]] = s
        return out

    all_terms = query_terms(q.text, 10_000)
    counts: dict[str, int] = {}
    from retrieval.fulltext.analyzer import _WORD  # token stream for query-term frequencies

    for tok in _WORD.findall(q.text):
        for t in query_terms(tok, 100):
            counts[t] = counts.get(t, 0) + 1
    dfs = lex.doc_freqs(all_terms)
    known = [t for t in all_terms if dfs.get(t, 0) > 0]
    n = max(1, lex.doc_count())
    wins = longquery.windows(q.text) if longquery.is_long(q.text) else [q.text]
    idf = {t: float(np.log(1 + (n - dfs[t] + 0.5) / (dfs[t] + 0.5))) for t in known}

    def probe(terms):
        top = lex.search(" ".join(terms), f, 1, terms=terms) if terms else []
        return top[0][1] if top else 0.0

    sal = [longquery._covered(w, idf, probe) for w in wins]
    sal_idf = [longquery.salience(w, idf) for w in wins]
    qv = longquery.views(q.text, lex.doc_freqs, lex.doc_count(), probe)
    texts = [q.text, *wins]
    qvecs = np.stack([engine.embedder.embed_query(t) for t in texts])
    big, starts, _ = mats
    sims = big @ qvecs.T  # windows x views
    best = np.maximum.reduceat(sims, starts, axis=0).T.astype(np.float32)  # views x records
    rare = sorted(known, key=lambda t: dfs[t])
    heads = mats[2]
    return {
        "qid": q.qid, "group": q.group, "relevant": q.relevant, "words": len(q.text.split()),
        "lex32": bm25(query_terms(q.text, 32)),
        "lex_all": bm25(known),
        "lex_rare64": bm25([t for t in known if t in set(rare[:64])]),
        "lex_qtf": bm25([t for t in known for _ in range(min(3, counts.get(t, 1)))]),
        "lex_salient": bm25(qv.salient_terms) if qv.salient_terms else None,
        "salient_text": qv.salient or q.text,
        "v_whole": best[0], "v_win": best[1:],
        "h_whole": (heads @ qvecs[0]).astype(np.float32),
        "h_win": (heads @ qvecs[1:].T).T.astype(np.float32), "sal": np.array(sal), "sal_idf": np.array(sal_idf),
        "idf_known": {t: idf[t] for t in known}, "counts": counts,
    }  # fmt: skip


def dump(args) -> None:
    records, qs = sets(args.set)
    if args.limit:
        qs = qs[: args.limit]
    embedder = make_embedder(True)
    out = {"set": args.set, "queries": []}
    with tempfile.TemporaryDirectory(prefix="pm-lab-") as home:
        engine = Engine(Path(home), embedder)
        try:
            index(engine, records, "records")
            by_bucket: dict[str, tuple] = {}
            for j, q in enumerate(qs):
                if q.bucket not in by_bucket:
                    rids = [r.id for r in records if r.bucket == q.bucket]
                    embs = engine.store.embeddings(rids, embedder.model_id)
                    rids = [r for r in rids if r in embs]
                    mats = [embs[r] for r in rids]
                    starts = np.cumsum([0] + [len(m) for m in mats[:-1]])
                    doc = {r.id: r for r in records}
                    heads = embedder.embed_documents([head(doc[r]) for r in rids])
                    by_bucket[q.bucket] = (
                        rids,
                        (np.concatenate(mats), starts, heads),
                        [doc[r].metadata.get("doc_id", r) for r in rids],
                    )
                rids, mats, docs = by_bucket[q.bucket]
                s = signals(engine, q, rids, mats)
                s["docs"] = q.bucket
                out["queries"].append(s)
                if j % 50 == 0:
                    print(f"{j}/{len(qs)}", flush=True)
            out["docs"] = {b: v[2] for b, v in by_bucket.items()}
        finally:
            engine.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as fh:
        pickle.dump(out, fh)
    print(f"wrote {args.out}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("set", choices=["jira", "cosqa", "scifact", "locomo", "locomo_long"])
    d.add_argument("--out", required=True)
    d.add_argument("--limit", type=int, default=0)
    args = p.parse_args()
    dump(args)


if __name__ == "__main__":
    main()
