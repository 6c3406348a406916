"""Offline fusion sweeps (used to choose the FusionConfig defaults; see docs/benchmarks.md).

Step 1 (``dump``) builds the same store as ``relevance.py`` and, for every query, records the
hybrid ranker's full completed candidate list (top ``depth`` of each retriever, each candidate
with its real bm25 and cosine) via the explanations the engine returns.
Step 2 (``sweep``) re-fuses those lists with many fusion functions / parameters in numpy and
prints the metrics, so hundreds of variants cost seconds instead of a rerun each. Smaller
depths and "no score completion" are simulated from the same lists (the top d of a retriever
within the union is its true top d, because the union contains it).

    python -m benchmarks run tune_fusion dump beir /work/shared/data/scifact --out .bench-cache/tune/scifact.pkl
    python -m benchmarks run tune_fusion dump locomo /work/shared/data/locomo/locomo_dev.json --out .bench-cache/tune/locomo.pkl
    python -m benchmarks run tune_fusion sweep .bench-cache/tune/scifact.pkl [--metric ndcg@10]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.metrics import mean_metrics, query_metrics  # noqa: E402
from benchmarks.harness.ranking import index, open_engine  # noqa: E402
from benchmarks.harness.sets import DEFAULT_LOCOMO_CONTEXT, beir_set, locomo_set  # noqa: E402
from retrieval.ranking import fusion  # noqa: E402
from retrieval.records import RecordFilter  # noqa: E402


# ---------------------------------------------------------------------------- dump
def dump(args) -> None:
    args.ranker = "hybrid"
    if args.set == "beir":
        records, qs, _, _ = beir_set(Path(args.path), args.split, args.title)
    else:
        import json

        data = json.loads(Path(args.path).read_text(encoding="utf-8"))
        records, qs = locomo_set(data, args.context, dated=False)
    doc_of = {r.id: r.metadata["doc_id"] for r in records}
    embedder = make_embedder(True)
    out = []
    args.fusion = f"depth={args.depth},complete=true" + (f",{args.fusion}" if args.fusion else "")
    with tempfile.TemporaryDirectory(prefix="pm-tune-") as home:
        engine = open_engine(args, embedder, Path(home))
        try:
            index(engine, records, "records")
            for q in qs:
                scored = engine.ranker.search(
                    q.text,
                    RecordFilter(buckets=[q.bucket]),
                    10 * args.depth,
                    mode="hybrid",
                    buckets=[q.bucket],
                )
                ids = [doc_of[s.record_id] for s in scored]
                L = np.array(
                    [
                        np.nan
                        if s.explanation.lexical_score is None
                        else s.explanation.lexical_score
                        for s in scored
                    ]
                )
                V = np.array(
                    [
                        np.nan
                        if s.explanation.vector_similarity is None
                        else s.explanation.vector_similarity
                        for s in scored
                    ]
                )
                out.append(
                    {
                        "qid": q.qid,
                        "group": q.group,
                        "relevant": q.relevant,
                        "ids": ids,
                        "L": L,
                        "V": V,
                    }
                )
        finally:
            engine.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as fh:
        pickle.dump({"depth": args.depth, "queries": out}, fh)
    print(f"dumped {len(out)} queries to {args.out}")


# ---------------------------------------------------------------------------- sweep
def restrict(L: np.ndarray, V: np.ndarray, d: int, complete: bool):
    """Candidates of depth d (top d lexical ∪ top d vector); without completion a candidate
    keeps only the scores of the retrievers that returned it."""
    lr, vr = fusion.ranks(np.where(L > 0, L, np.nan)), fusion.ranks(V)
    in_l, in_v = lr <= d, vr <= d
    keep = in_l | in_v
    L2, V2 = L.copy(), V.copy()
    if not complete:
        L2[~in_l] = np.nan
        V2[~in_v] = np.nan
    return keep, L2, V2


def fuse(name: str, L: np.ndarray, V: np.ndarray, p: dict) -> np.ndarray:
    a = p.get("alpha", 0.5)
    if name == "rrf":
        return fusion.rrf(L, V, k=p.get("k", 60))
    if name == "lexical":
        return np.nan_to_num(L, nan=0.0)
    if name == "vector":
        return np.nan_to_num(V, nan=-1.0)
    norm = {
        "minmax": fusion.minmax,
        "zscore": fusion.zscore,
    }.get(name) or getattr(fusion, name)
    return fusion.convex(L, V, a, norm)


def evaluate(data: list[dict], name: str, p: dict, d: int, complete: bool) -> tuple[dict, dict]:
    by_group: dict[str, list[dict]] = {}
    rows = []
    for q in data:
        keep, L, V = restrict(q["L"], q["V"], d, complete)
        idx = np.flatnonzero(keep)
        s = fuse(name, L[idx], V[idx], p)
        order = idx[np.argsort(-s, kind="stable")[:10]]
        m = query_metrics([q["ids"][i] for i in order], q["relevant"])
        rows.append(m)
        by_group.setdefault(q["group"], []).append(m)
    return mean_metrics(rows), {g: mean_metrics(v) for g, v in by_group.items()}


def sweep(args) -> None:
    with open(args.dump, "rb") as fh:
        blob = pickle.load(fh)
    data = blob["queries"]
    groups = {q["group"] for q in data}
    if groups - {""}:  # LoCoMo: headline over categories 1-4
        data = [q for q in data if q["group"] in {"1", "2", "3", "4"}]
    D = blob["depth"]
    variants = [("lexical", {}, D, True), ("vector", {}, D, True)]
    alphas = [float(a) for a in args.alphas.split(",")]
    norms = args.norms.split(",")
    for n in norms:
        for a in alphas:
            variants.append((n, {"alpha": a}, D, True))
    for k in (10, 20, 60):
        variants.append(("rrf", {"k": k}, D, True))
    for n in norms:
        for d in [x for x in (10, 20, 50) if x < D]:
            variants.append((n, {"alpha": args.alpha}, d, True))
        variants.append((n, {"alpha": args.alpha}, D, False))
    res = []
    for name, p, d, comp in variants:
        m, _ = evaluate(data, name, p, d, comp)
        res.append((m[args.metric], name, p, d, comp, m))
    for _score, name, p, d, comp, m in res:
        cfg = f"{name} {p} depth={d}{'' if comp else ' no-completion'}"
        print(
            f"{cfg:<52} "
            + " ".join(f"{k}={m[k]:.4f}" for k in ("recall@5", "recall@10", "ndcg@10", "mrr@10"))
        )
    best = max(res, key=lambda r: r[0])
    print(
        f"best by {args.metric}: {best[1]} {best[2]} depth={best[3]} complete={best[4]} -> {best[0]:.4f}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="offline fusion sweeps")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("set", choices=["beir", "locomo"])
    d.add_argument("path")
    d.add_argument("--out", required=True)
    d.add_argument("--split", default=None)
    d.add_argument("--title", default="content")
    d.add_argument("--context", default=DEFAULT_LOCOMO_CONTEXT)
    d.add_argument("--depth", type=int, default=100)
    d.add_argument("--fusion", default="")
    d.add_argument("--window-words", type=int, default=0)
    d.set_defaults(func=dump)
    s = sub.add_parser("sweep")
    s.add_argument("dump")
    s.add_argument("--metric", default="ndcg@10")
    s.add_argument("--alphas", default="0.3,0.4,0.5,0.6,0.7,0.8")
    s.add_argument("--norms", default="minmax,zscore")
    s.add_argument("--alpha", type=float, default=0.5, help="alpha of the depth/completion rows")
    s.set_defaults(func=sweep)
    args = p.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
