"""Choose the time prior's and the update order's settings offline, on all dev sets together.

    python -m benchmarks run time_lab dump longmemeval ../shared/data/longmemeval_s --out DIR/lme.pkl [--types ...]
    python -m benchmarks run time_lab dump locomo ../shared/data/locomo/locomo_dev.json --out DIR/locomo.pkl
    python -m benchmarks run time_lab fit DIR/lme.pkl DIR/locomo.pkl [--json OUT]

``dump`` indexes a set exactly as ``benchmarks/relevance.py`` does (LongMemEval through the
session indexer, LoCoMo one memory per turn; the whole set before the first question) and
keeps, per question, the fused candidates of today's ranking (no time prior, no update order)
with their dates, whether their texts state a time, the times they speak of, and the windows
the question's events resolve to. ``fit`` replays the prior (the gains computed by
:func:`retrieval.timeline.timeprior.gains`, the ranker's own computation) over a grid of weights in
two stages (the window, event and when weights; then, at their choice, the recency of
questions about the current state) and reports each set's metrics per question type, the
settings chosen on every set together, the shipped setting's metrics and objective beside
them, and leave-one-set-out: each set scored at the setting chosen on the other. A setting
that loses more than 0.005 on any other category or question type is never chosen.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import longmemeval as lme  # noqa: E402
from benchmarks.harness import time_metrics as tm  # noqa: E402
from benchmarks.harness.data import load_longmemeval, session_date  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.ranking import grouping  # noqa: E402
from retrieval.timeline import timeexpr  # noqa: E402
from retrieval.timeline.timeprior import (  # noqa: E402
    MENTIONS_TIME,
    TimePrior,
    TimeWeights,
    gains,
    recency_depth,
    stated_times,
    top_stated,
)

ALL = 100  # candidates kept per question: the fused candidates the benchmark's search ranks
# (asking for more would widen each retriever's depth, and so the scores' normalisation)


def dump_longmemeval(args) -> dict:
    from benchmarks.harness.embed_cache import make_embedder
    from benchmarks.harness.ranking import main_config
    from retrieval.engine import Engine
    from retrieval.records import Kind, RecordFilter
    from server.service.indexing.sessions import SessionIndexer
    from server.service.memories.memory import MemoryService

    qs, sessions = load_longmemeval(Path(args.path), args.limit, args.types or ())
    out = []
    with tempfile.TemporaryDirectory(prefix="pm-timelab-") as tmp:
        engine = Engine(Path(tmp) / "store", make_embedder())
        engine.ranker.config = main_config(engine.ranker.config)  # today's ranking, no prior
        try:
            indexer = SessionIndexer(MemoryService(engine))
            for n, q in enumerate(qs, 1):
                path = lme.write_transcript(q, sessions, Path(tmp))
                indexer.index_file(lme.who_of(q), path, flush=True, final=True)
                if n % 10 == 0:
                    print(f"indexed {n}/{len(qs)}", flush=True)
            for q in qs:
                who, now = lme.who_of(q), session_date(q["question_date"])
                f = RecordFilter(buckets=who.visible_buckets(), kinds=[Kind.turn], now=now)
                hits = engine.search(q["question"], f, ALL)
                answers = lme.answer_positions(q, sessions)
                prior = TimePrior(engine.store, engine.lexical, TimeWeights(event_weight=1))
                events = prior.event_windows(timeexpr.read(q["question"], now).events, f)
                dates = dict(zip(q["haystack_session_ids"], q["haystack_dates"], strict=True))
                out.append({
                    "id": q["question_id"], "type": q["question_type"], "question": q["question"],
                    "now": now, "gold": list(q["answer_session_ids"]),
                    "gold_dates": {s: session_date(dates[s]).timestamp()
                                   for s in q["answer_session_ids"]},
                    "events": events,
                    "cands": [(h.record.metadata.get("session"), h.record.created_at.timestamp(),
                               h.score, bool(MENTIONS_TIME.search(h.record.content)),
                               lme.holds(h.record.metadata, answers),
                               stated_times(h.record.content, h.record.created_at)) for h in hits],
                })  # fmt: skip
        finally:
            engine.close()
    return {"set": "longmemeval", "questions": out}


def dump_locomo(args) -> dict:
    from benchmarks.harness.data import evidence_ids, locomo_date, locomo_sessions
    from benchmarks.harness.embed_cache import make_embedder
    from benchmarks.harness.ranking import main_config
    from benchmarks.harness.sets import DEFAULT_LOCOMO_CONTEXT, locomo_records
    from retrieval.engine import Engine
    from retrieval.records import RecordFilter

    data = json.loads(Path(args.path).read_text(encoding="utf-8"))
    out = []
    with tempfile.TemporaryDirectory(prefix="pm-timelab-") as tmp:
        engine = Engine(Path(tmp) / "store", make_embedder())
        engine.ranker.config = main_config(engine.ranker.config)  # today's ranking, no prior
        try:
            samples = [(sample, locomo_records(sample, DEFAULT_LOCOMO_CONTEXT)) for sample in data]
            for _sample, recs in samples:  # every conversation first, as the benchmark does
                engine.add(recs)
            for sample, recs in samples:
                known = {r.metadata["doc_id"] for r in recs}
                now = locomo_date(locomo_sessions(sample["conversation"])[-1][1])
                f = RecordFilter(buckets=[recs[0].bucket], now=now)
                prior = TimePrior(engine.store, engine.lexical, TimeWeights(event_weight=1))
                for i, qa in enumerate(sample.get("qa", [])):
                    rel = evidence_ids(qa.get("evidence", []), known)
                    if not rel or not qa.get("question"):
                        continue
                    hits = engine.search(qa["question"], f, ALL)
                    events = prior.event_windows(timeexpr.read(qa["question"], now).events, f)
                    out.append({
                        "id": f"{sample['sample_id']}#{i}", "type": str(qa.get("category")),
                        "question": qa["question"], "now": now, "gold": sorted(rel),
                        "events": events,
                        "cands": [(h.record.metadata["doc_id"], h.record.created_at.timestamp(),
                                   h.score, bool(MENTIONS_TIME.search(h.record.content)), False,
                                   stated_times(h.record.content, h.record.created_at))
                                  for h in hits],
                    })  # fmt: skip
        finally:
            engine.close()
    return {"set": "locomo", "questions": out}


def rescore(q: dict, w: SimpleNamespace) -> list[tuple]:
    """The candidates ordered as the ranker orders them with weights ``w``."""
    cands = q["cands"]
    if not cands:
        return []
    t = np.array([c[1] for c in cands])
    s = np.array([c[2] for c in cands], dtype=float)
    asked = timeexpr.read(q["question"], q["now"])
    windows = asked.windows if w.window_weight else []
    events = q["events"] if w.event_weight else []
    stated = None
    if getattr(w, "stated", True) and (windows or events):
        stated = top_stated(s, lambda i: list(cands[i][5]))
    mentions = np.array([c[3] for c in cands]) if asked.asks_when and w.when_weight else None
    depth = recency_depth(w, q["question"])
    gain, _ = gains(s, t, w, windows=windows, events=events, mentions=mentions,
                    recent_depth=depth, stated=stated)  # fmt: skip
    s = s + gain
    order = np.argsort(-s, kind="stable")
    return [(*cands[i][:2], float(s[i]), *cands[i][3:]) for i in order]


def score_set(dump: dict, w: SimpleNamespace) -> dict[str, dict[str, float]]:
    """Metrics per question type (and "all") at weights ``w``."""
    rows: dict[str, list[dict]] = {}
    for q in dump["questions"]:
        ranked = rescore(q, w)
        if dump["set"] == "longmemeval":
            units = ranked[: lme.DEPTH]
            groups = grouping.group(units, key=lambda c: str(c[0]), score=lambda c: c[2])
            m = tm.longmemeval_metrics([g.key for g in groups], [(c[0], c[4]) for c in units],
                                       q["gold"], q["gold_dates"])  # fmt: skip
        else:
            m = tm.locomo_metrics([c[0] for c in ranked], set(q["gold"]))
        rows.setdefault(q["type"], []).append(m)
        rows.setdefault("all", []).append(m)
    return {t: tm.mean_rows(rs) for t, rs in rows.items()}


TOLERANCE = 0.005  # the largest loss allowed on any other category or type and metric


def objective(name: str, res: dict, base: dict) -> float:
    """What the search maximises per set, against today's ranking (``base``): the temporal
    gain (LoCoMo category 2 recall@10; LongMemEval temporal-reasoning recall_all@10 plus
    knowledge-update newest_first), with every loss on another category or type counted four
    times (LoCoMo recall@5, recall@10, nDCG@10, MRR@10; LongMemEval session R_any@5, nDCG@10,
    turn R_any@5); a setting losing more than :data:`TOLERANCE` on any of them is out (-inf)."""
    if name == "longmemeval":
        gain = sum(res[t].get(m, 0.0) - base[t].get(m, 0.0) for t, m in (
            ("temporal-reasoning", "recall_all@10"), ("knowledge-update", "newest_first"))
            if t in res)  # fmt: skip
        others = [t for t in res if t not in ("all", "temporal-reasoning", "knowledge-update")]
        metrics: tuple[str, ...] = ("session_recall_any@5", "ndcg@10", "turn_recall_any@5")
    else:
        gain = res["2"]["recall@10"] - base["2"]["recall@10"]
        others, metrics = list("1345"), ("recall@5", "recall@10", "ndcg@10", "mrr@10")
    losses = [min(0.0, res[t][m] - base[t][m]) for t in others for m in metrics]
    if min(losses, default=0.0) < -TOLERANCE:
        return -np.inf
    return gain + 4 * sum(losses)


GRID = {"window_weight": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5],
        "event_weight": [0.0, 0.02, 0.05, 0.1],
        "when_weight": [0.0, 0.03, 0.05, 0.08, 0.1, 0.15],
        "stated": [False, True]}  # fmt: skip
# the second stage, at the first stage's choice: the recency of current-state questions
RECENT_GRID = {"recent_weight": [0.0, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3],
               "recent_margin": [0.05, 0.1, 0.15, 0.2, 0.3],
               "recent_depth": [2, 3, 5, 10, 20]}  # fmt: skip


def merged(paths: list[str]) -> dict[str, dict]:
    """The dumps by set; several dumps of one set are one (a question once)."""
    out: dict[str, dict] = {}
    for path in paths:
        d = pickle.loads(Path(path).read_bytes())
        have = out.setdefault(d["set"], {"set": d["set"], "questions": []})
        seen = {q["id"] for q in have["questions"]}
        have["questions"] += [q for q in d["questions"] if q["id"] not in seen]
    return out


def scan(dumps: dict, base: dict, grid: dict, fixed: dict) -> list[tuple]:
    """(setting, results per set, objective per set) for every setting of ``grid``."""
    table = []
    for values in itertools.product(*grid.values()):
        w = SimpleNamespace(**fixed, **dict(zip(grid, values, strict=True)))
        res = {name: score_set(d, w) for name, d in dumps.items()}
        table.append((vars(w), res, {n: objective(n, r, base[n]) for n, r in res.items()}))
    return table


# the temporal questions' other metrics: what breaks a tie of the objective
TIE_METRICS = {"locomo": [("2", m) for m in ("recall@5", "ndcg@10", "mrr@10")],
               "longmemeval": [("temporal-reasoning", "session_recall_any@5"),
                               ("temporal-reasoning", "ndcg@10"),
                               ("knowledge-update", "ndcg@10")]}  # fmt: skip


def tie_break(name: str, res: dict, base: dict) -> float:
    """Of two settings with one objective, the one that ranks the temporal questions'
    evidence higher (the sum of :data:`TIE_METRICS`' gains) is chosen."""
    return sum(res[t][m] - base[t][m] for t, m in TIE_METRICS[name] if t in res)


def choose(dumps: dict, base: dict, sets: set[str]) -> tuple[dict, dict]:
    """The two stages chosen on ``sets`` together: (setting, results per set); a tie of the
    objective goes to the better :func:`tie_break`."""

    def score(row) -> tuple[float, float]:
        _, res, obj = row
        return (round(sum(v for n, v in obj.items() if n in sets), 9),
                sum(tie_break(n, res[n], base[n]) for n in res if n in sets))  # fmt: skip

    first = max(scan(dumps, base, GRID, {"recent_weight": 0.0}), key=score)[0]
    best = max(scan(dumps, base, RECENT_GRID, {k: first[k] for k in GRID}), key=score)
    return best[0], best[1]


def shipped() -> dict:
    """The ranker's shipped setting, in the lab's names."""
    from retrieval.ranking.hybrid import FusionConfig

    cfg = FusionConfig()
    return {**{k: getattr(cfg, k) for k in GRID if k != "stated"}, "stated": cfg.stated_times,
            **{k: getattr(cfg, k) for k in RECENT_GRID}}  # fmt: skip


def summed(res: dict, base: dict) -> float:
    """The objective summed over the sets of ``res`` (results per set)."""
    return float(sum(objective(n, r, base[n]) for n, r in res.items()))


def fit(args) -> dict:
    dumps = merged(args.dumps)
    zero = SimpleNamespace(**dict.fromkeys(GRID, 0.0), recent_weight=0.0)
    base = {name: score_set(d, zero) for name, d in dumps.items()}
    chosen, result = choose(dumps, base, set(dumps))
    ship = shipped()
    ship_result = {name: score_set(d, SimpleNamespace(**ship)) for name, d in dumps.items()}
    out = {"grid": {**GRID, **RECENT_GRID}, "baseline": base, "chosen": chosen,
           "chosen_result": result, "chosen_objective": summed(result, base),
           "shipped": ship, "shipped_result": ship_result,
           "shipped_objective": summed(ship_result, base), "leave_one_out": {}}  # fmt: skip
    for name in dumps:
        setting, res = choose(dumps, base, set(dumps) - {name})
        out["leave_one_out"][name] = {"setting": setting, "result": res[name]}
    print(json.dumps({k: v for k, v in out.items() if k != "grid"}, indent=1, default=str))
    if args.json:
        write_json(args.json, out, default=str)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("set", choices=["longmemeval", "locomo"])
    d.add_argument("path")
    d.add_argument("--out", required=True)
    d.add_argument("--limit", type=int, default=0)
    d.add_argument("--types", nargs="+", default=())
    ft = sub.add_parser("fit")
    ft.add_argument("dumps", nargs="+")
    ft.add_argument("--json")
    args = p.parse_args(argv)
    if args.cmd == "dump":
        dump = (dump_longmemeval if args.set == "longmemeval" else dump_locomo)(args)
        Path(args.out).write_bytes(pickle.dumps(dump))
        print(f"wrote {args.out}: {len(dump['questions'])} questions")
    else:
        fit(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
