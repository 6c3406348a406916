"""Facts that changed: the candidates a write shows, and what an agent's decision on them does.

    python benchmarks/update_candidates.py DATA --json OUT [--limit N] [--judge oracle|none]
        [--check-limit N] [--locomo FILE]

``DATA`` is a LongMemEval_S folder. Per knowledge-update question (the first ``--limit``), a
project of its own: every user turn of its haystack is written with ``remember`` (private,
one agent), sessions in date order, turns in order, each at its session's date plus 30 s per
turn. The labelled answer turns are the truth: the newest one states the current value, the
older ones (of other sessions) the values it replaces.

- ``candidate_recall@3``: of the questions with an older answer turn in another session, the
  share whose older turn is among the candidates listed when the newest is written;
- ``writes_with_candidates``: the share of all writes that list any;
- ``median_tokens_added``: what the candidates add to a write's result (its JSON text, as the
  agent reads it, at 4 characters a token), the median over writes that list any;
- ``newest_first_oracle``: with a judge that accepts exactly the true candidates (it calls
  ``supersede`` right after the write that listed one: the agent as a perfect judge), the
  share of questions whose newest answer turn ranks above every older one (``Engine.search``
  at the question's date, as ``relevance.py``; over the questions whose answer turns have two
  dates); ``newest_first_sessions_*`` the same over answer sessions, each ranked by its best
  turn (another turn of an older session may rank first: a link reorders the two turns it
  joins, not their sessions);
- ``newest_first_no_judge``: the same questions ranked as if no link had been made (an agent
  that ignores the hint: links only reorder through the ranker's current-first step, so it is
  the same ranking with that step off); ``newest_first_as_ranked``: as the store ranks them
  (with ``--judge none``, whatever links the version under test made by itself);
- ``false_links_without_call``: links in the store that no ``supersede`` call made, here and
  in the review cases below.

The floor and the weight of shared words are chosen here (``fit``): every write's pool (its
nearest records with their cosine and shared-word weight) is kept and replayed at other
settings: per weight, the lowest floor at which at most 20 % of writes list any; of those the
highest candidate recall; also fit on each half of the questions and checked on the other
(``split_half``). Checks on
other data (``checks``): the other question types' haystacks (``--check-limit`` each), LoCoMo
dev's conversations (turns as ``Speaker: text`` memories), the hand-written update pairs of
``benchmarks/data/update_pairs.json``, and the review cases: 20 distinct project facts and the
README's paragraphs remembered one by one in quick succession, and 10 pairs of two true facts
about one subject.

``--judge none`` runs the write protocol alone (no candidates read, no calls): the same
command at an earlier commit measures that version's links and ranking.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pydantic_core

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import time_metrics as tm  # noqa: E402
from benchmarks.harness.data import load_longmemeval, session_date  # noqa: E402
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Kind, RecordFilter  # noqa: E402
from server.service.core.identity import Identity  # noqa: E402
from server.service.core.models import MemoryInput  # noqa: E402
from server.service.memories.memory import MemoryService  # noqa: E402

PAIRS = ROOT / "benchmarks" / "data" / "update_pairs.json"
OTHER_TYPES = ["temporal-reasoning", "multi-session", "single-session-user",
               "single-session-assistant", "single-session-preference"]  # fmt: skip
WEIGHTS = [0.0, 0.8, 1.2, 1.6, 2.0, 2.5]  # x / 30 per unit of shared word weight
FLOORS = [round(0.5 + 0.05 * i, 2) for i in range(21)]
MAX_WRITES = 0.20  # the fit's bound on writes listing candidates (the target is 25 %)
DEPTH = 50
TARGETS = {"candidate_recall@3": "≥ 0.85", "writes_with_candidates": "≤ 25 %",
           "newest_first_oracle": "≥ 0.90", "newest_first_no_judge": "no loss against today",
           "false_links_without_call": "0", "median_tokens_added": "≤ 120"}  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = None

    def __call__(self):
        return self.now


def turns_in_order(q: dict, sessions: dict) -> list[tuple[str, int, object, str]]:
    """(session, turn index, time, text) of every user turn of ``q``'s haystack."""
    order = sorted(zip(q["haystack_session_ids"], q["haystack_dates"], strict=True),
                   key=lambda sd: session_date(sd[1]))  # fmt: skip
    out = []
    for sid, date in order:
        start = session_date(date)
        for i, t in enumerate(sessions[sid]):
            if t["role"] == "user" and t["content"].strip():
                out.append((sid, i, start + timedelta(seconds=30 * i), t["content"][:32000]))
    return out


def tokens_added(result) -> float:
    """Tokens the candidates add to the result's JSON text (4 characters a token)."""
    full = len(pydantic_core.to_json(result, indent=2))
    bare = result.model_copy(update={"candidates": [], "candidatesNote": None})
    return (full - len(pydantic_core.to_json(bare, indent=2))) / 4


def write_haystack(svc, clock, who, writes, *, judge=None, keep_pools=False):
    """Remember every turn; returns per write: (id, session, turn, listed ids, tokens, pool)."""
    out = []
    for sid, i, when, text in writes:
        clock.now = when
        pool = None
        if keep_pools:  # the write's pool, to replay other settings (a cached embedding)
            from server.service.updating import candidates as cand  # not in versions before them

            rec, _ = svc.prepare(who, MemoryInput(content=text))
            vec = svc.engine.embed([rec]).get(rec.id)
            pool = [
                (f.record.id, f.cosine, f.shared)
                for f in cand.pool(svc.engine, rec, vec, when) or []
            ]
        res = svc.remember(who, MemoryInput(content=text, metadata={"session": sid, "turn": i}))
        listed = [line.split(" · ", 1)[0] for line in getattr(res, "candidates", [])]
        out.append((res.memoryId, sid, i, listed, tokens_added(res) if listed else 0.0, pool))
        if judge is not None:
            judge(res.memoryId, (sid, i), listed)
    return out


def links_without_call(svc, called: set) -> int:
    rows = svc.store.reader.execute(
        "SELECT older_id, newer_id FROM record_links WHERE how != 'candidate' AND undone_at IS NULL"
    ).fetchall()
    return sum((o, n) not in called for o, n in rows)


def newest_first(engine, who, q, answers: dict, links: bool) -> tuple[float | None, ...]:
    """``newest_first`` of ``q``, ranked as shipped (``links``) or with links ignored: over its
    answer turns (``answers``: record id -> time; the newest ranks above every older one, one
    not ranked counting as below) and over its answer sessions (a session ranked by its best
    turn, as ``relevance.py longmemeval`` ranks exchanges)."""
    f = RecordFilter(buckets=who.visible_buckets(), kinds=[Kind.memory],
                     now=session_date(q["question_date"]))  # fmt: skip
    cfg = engine.ranker.config
    engine.ranker.config = replace(cfg, current_first=links)
    try:
        hits = engine.search(q["question"], f, DEPTH)
    finally:
        engine.ranker.config = cfg
    turns = tm.newest_first([h.record.id for h in hits], answers) if answers else None
    order = list(dict.fromkeys(str(h.record.metadata.get("session")) for h in hits))
    dates = dict(zip(q["haystack_session_ids"], q["haystack_dates"], strict=True))
    gold = {s: session_date(dates[s]).timestamp() for s in q["answer_session_ids"]}
    return turns, tm.newest_first(order, gold)


class Oracle:
    """The judge that accepts exactly the true candidates: a listed older answer turn of
    another session, when an answer turn is written; it calls ``supersede`` at once."""

    def __init__(self, svc, who, evidence: list, when: dict, called: set, active: bool) -> None:
        self.svc, self.who, self.evidence, self.when = svc, who, set(evidence), when
        self.called, self.active, self.ids = called, active, {}

    def __call__(self, new_id: str, key: tuple, listed: list[str]) -> None:
        self.ids[key] = new_id
        if not self.active or key not in self.evidence:
            return
        from server.service.updating import supersede

        by_id = {v: k for k, v in self.ids.items()}
        for old_id in listed:
            old = by_id.get(old_id)
            if old in self.evidence and old[0] != key[0] and self.when[old] < self.when[key]:
                supersede.link(self.svc, self.who, old_id, new_id)
                self.called.add((old_id, new_id))


def knowledge_update(svc, clock, qs, sessions, judge_mode: str) -> dict:
    rows, called, all_writes = [], set(), []
    for n, q in enumerate(qs, 1):
        who = Identity(project_id=f"lme-{q['question_id']}", agent_id="user")
        writes = turns_in_order(q, sessions)
        when = {(s, i): t for s, i, t, _ in writes}
        evidence = sorted({(s, i) for s, i in map(tuple, q["answer_turns"]) if (s, i) in when},
                          key=lambda e: when[e])  # fmt: skip
        newest = evidence[-1] if evidence else None
        olds = {e for e in evidence if newest and e[0] != newest[0] and when[e] < when[newest]}
        oracle = Oracle(svc, who, evidence, when, called, judge_mode == "oracle")
        done = write_haystack(svc, clock, who, writes, judge=oracle,
                              keep_pools=judge_mode == "oracle")  # fmt: skip
        row = {"id": q["question_id"], "writes": len(done)}
        if olds:
            at = next(x for x in done if (x[1], x[2]) == newest)
            row["candidate_recall@3"] = float(any(oracle.ids[o] in at[3] for o in olds))
            row["pool"], row["olds"] = at[5], [oracle.ids[o] for o in olds]
        answers = {oracle.ids[e]: when[e].timestamp() for e in evidence}
        for key, on in (("", True), ("_no_link", False)):
            turn_level, session_level = newest_first(svc.engine, who, q, answers, links=on)
            row[f"newest_first{key}"], row[f"newest_first_sessions{key}"] = (
                turn_level,
                session_level,
            )
        rows.append(row)
        all_writes += [(listed, tokens, pool) for _, _, _, listed, tokens, pool in done]
        print(f"{n}/{len(qs)} {q['question_id']} " + json.dumps(
            {k: v for k, v in row.items() if k not in ("pool", "olds")}), flush=True)  # fmt: skip
    return {"rows": rows, "writes": all_writes, "called": called}


# ---------------------------------------------------------------------------- replay and fit
def replay(pools, weight: float, floor: float, cap: float = 30.0):
    """Per pool (a write's nearest records: (id, cosine, shared)): the ids listed at a setting."""
    out = []
    for pool in pools:
        scored = sorted(((c + weight / 30 * min(sh, cap), rid) for rid, c, sh in pool or []),
                        reverse=True)  # fmt: skip
        out.append([rid for sc, rid in scored if sc >= floor][:3])
    return out


def measure(rows, pools, weight, floor) -> dict:
    """candidate recall and the share of writes listing any, at one setting."""
    listed = replay([r["pool"] for r in rows], weight, floor)
    recall = [float(any(o in got for o in r["olds"])) for r, got in zip(rows, listed, strict=True)]
    writes = replay(pools, weight, floor)
    return {"weight": weight, "floor": floor,
            "candidate_recall@3": round(float(np.mean(recall)), 4) if recall else None,
            "writes_with_candidates": round(float(np.mean([bool(w) for w in writes])), 4)}  # fmt: skip


def choose(rows, pools) -> dict:
    """Per weight the lowest floor at which at most :data:`MAX_WRITES` of writes list
    candidates (the most room for a true pair); of those, the highest candidate recall, then
    the fewest writes listing."""
    best = None
    for w in WEIGHTS:
        for fl in FLOORS:
            m = measure(rows, pools, w, fl)
            if m["writes_with_candidates"] <= MAX_WRITES:
                key = (m["candidate_recall@3"], -m["writes_with_candidates"])
                if best is None or key > best[0]:
                    best = (key, m)
                break
    return best[1]


def fit(ku: dict) -> dict:
    rows = [r for r in ku["rows"] if "pool" in r]
    pools = [p for _, _, p in ku["writes"]]
    by_q = np.cumsum([0] + [r["writes"] for r in ku["rows"]])
    halves = {}
    for name, pick in (("first", 0), ("second", 1)):
        keep = [i for i in range(len(ku["rows"])) if (i < len(ku["rows"]) // 2) == (pick == 0)]
        other = [i for i in range(len(ku["rows"])) if i not in keep]

        def part(ix):
            qs = [ku["rows"][i] for i in ix]
            return [r for r in qs if "pool" in r], [
                p for i in ix for p in pools[by_q[i] : by_q[i + 1]]
            ]

        chosen = choose(*part(keep))
        halves[f"fit_on_{name}_half"] = {
            "chosen": chosen,
            "held_out": measure(*part(other), chosen["weight"], chosen["floor"]),
        }
    curve = [measure(rows, pools, w, fl) for w in WEIGHTS for fl in FLOORS]
    return {"chosen": choose(rows, pools), "split_half": halves, "curve": curve}


# ---------------------------------------------------------------------------- checks
def other_types(svc, clock, folder: Path, limit: int, chosen: dict) -> dict:
    """Writes listing candidates in the other question types' haystacks (written as above),
    as shipped and replayed at the chosen setting."""
    out = {}
    for qtype in OTHER_TYPES:
        qs, sessions = load_longmemeval(folder, limit, [qtype])
        listed, pools = [], []
        for q in qs:
            who = Identity(project_id=f"lme-{qtype}-{q['question_id']}", agent_id="user")
            done = write_haystack(svc, clock, who, turns_in_order(q, sessions), keep_pools=True)
            listed += [bool(x[3]) for x in done]
            pools += [x[5] for x in done]
        out[qtype] = {"questions": len(qs), "writes": len(listed),
                      "writes_with_candidates": round(float(np.mean(listed)), 4),
                      "at_chosen": measure([], pools, chosen["weight"], chosen["floor"])
                      ["writes_with_candidates"]}  # fmt: skip
        print(qtype, out[qtype], flush=True)
    return out


def locomo(svc, clock, path: Path) -> dict:
    """Writes listing candidates when LoCoMo dev's turns are remembered in order."""
    from benchmarks.harness.data import locomo_date, locomo_sessions

    listed = 0
    total = 0
    for sample in json.loads(path.read_text(encoding="utf-8")):
        who = Identity(project_id=f"locomo-{sample['sample_id']}", agent_id="user")
        writes = []
        for _n, date, turns in locomo_sessions(sample["conversation"]):
            start = locomo_date(date)
            for i, t in enumerate(turns):
                writes.append((_n, i, start + timedelta(seconds=30 * i),
                               f"{t['speaker']}: {t['text']}"))  # fmt: skip
        done = write_haystack(svc, clock, who, writes)
        listed += sum(bool(x[3]) for x in done)
        total += len(done)
    return {"writes": total, "writes_with_candidates": round(listed / max(1, total), 4)}


REVIEW = ROOT / "benchmarks" / "data" / "update_review_cases.json"


def review_cases(svc, clock, start) -> dict:
    """The review's cases (remembered in quick succession, and the pairs also a day apart)
    and the hand-written update pairs (a day apart): links without a call, candidates."""
    from server.service.core.demo import paragraphs

    def write_all(project, texts, gap):
        who = Identity(project_id=project, agent_id="agent-a")
        writes = [(project, i, start + gap * i, t) for i, t in enumerate(texts)]
        return write_haystack(svc, clock, who, writes)

    out = {}
    cases = json.loads(REVIEW.read_text(encoding="utf-8"))
    readme = paragraphs((ROOT / "README.md").read_text(encoding="utf-8"))
    for name, texts in (("facts", cases["facts"]), ("readme", [p[:30000] for p in readme])):
        done = write_all(f"review-{name}", texts, timedelta(seconds=1))
        out[name] = {"writes": len(done), "with_candidates": sum(bool(x[3]) for x in done)}
    for label, gap in (("same_subject_pairs", timedelta(seconds=1)),
                       ("same_subject_pairs_a_day_apart", timedelta(days=1))):  # fmt: skip
        shown = sum(bool(write_all(f"{label}-{i}", pair, gap)[1][3])
                    for i, pair in enumerate(cases["same_subject_pairs"]))  # fmt: skip
        out[label] = {"pairs": len(cases["same_subject_pairs"]), "with_candidates": shown}
    pairs = json.loads(PAIRS.read_text(encoding="utf-8"))["pairs"]
    hits = 0
    for i, pair in enumerate(pairs):
        old, new = write_all(f"update-pair-{i}", pair, timedelta(days=1))
        hits += old[0] in new[3]
    out["update_pairs"] = {"pairs": len(pairs), "candidate_recall@3": round(hits / len(pairs), 4)}
    return out


# ---------------------------------------------------------------------------- main
def summary(ku: dict) -> dict:
    rows = ku["rows"]
    tokens = [t for listed, t, _ in ku["writes"] if listed]

    def mean(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return round(float(np.mean(vals)), 4) if vals else None

    return {
        "questions": len(rows),
        "pairs": sum("candidate_recall@3" in r for r in rows),
        "candidate_recall@3": mean("candidate_recall@3"),
        "writes": len(ku["writes"]),
        "writes_with_candidates": round(float(np.mean([bool(x[0]) for x in ku["writes"]])), 4),
        "newest_first_as_ranked": mean("newest_first"),
        "newest_first_sessions_as_ranked": mean("newest_first_sessions"),
        "newest_first_no_judge": mean("newest_first_no_link"),
        "newest_first_sessions_no_judge": mean("newest_first_sessions_no_link"),
        "median_tokens_added": statistics.median(tokens) if tokens else None,
        "links_made_by_the_judge": len(ku["called"]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="a LongMemEval_S folder")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--limit", type=int, default=0, help="the first N knowledge-update questions")
    p.add_argument("--judge", choices=["oracle", "none"], default="oracle")
    p.add_argument("--check-limit", type=int, default=6,
                   help="questions of each other type written as a check (0: none)")  # fmt: skip
    p.add_argument("--locomo", metavar="FILE", help="LoCoMo dev, written as a check")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    qs, sessions = load_longmemeval(Path(args.data), args.limit, ["knowledge-update"])
    emb = make_embedder()
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="pm-candidates-") as tmp:
        engine = Engine(Path(tmp) / "store", emb)
        try:
            svc = MemoryService(engine, clock=clock)
            ku = knowledge_update(svc, clock, qs, sessions, args.judge)
            res = summary(ku)
            res["false_links_without_call"] = links_without_call(svc, ku["called"])
            if args.judge == "oracle":
                res["newest_first_oracle"] = res["newest_first_as_ranked"]
                res["newest_first_sessions_oracle"] = res["newest_first_sessions_as_ranked"]
                res["targets"] = TARGETS
                res["fit"] = fit(ku)
                chosen = res["fit"]["chosen"]
                checks = {
                    "review": review_cases(svc, clock, session_date("2024/01/01 (Mon) 09:00"))
                }
                if args.check_limit:
                    checks["other_types"] = other_types(svc, clock, Path(args.data),
                                                         args.check_limit, chosen)  # fmt: skip
                if args.locomo:
                    checks["locomo"] = locomo(svc, clock, Path(args.locomo))
                res["checks"] = checks
                res["false_links_without_call"] = links_without_call(svc, ku["called"])
            res["per_question"] = [{k: v for k, v in r.items() if k not in ("pool", "olds")}
                                   for r in ku["rows"]]  # fmt: skip
        finally:
            engine.close()
    res["_run"] = {"wall_s": round(time.perf_counter() - t0, 1),
                   "cache_hits": getattr(emb, "hits", 0), "cache_misses": getattr(emb, "misses", 0)}  # fmt: skip
    print(json.dumps({k: v for k, v in res.items() if k not in ("per_question", "fit")}, indent=1))
    if args.json:
        write_json(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
