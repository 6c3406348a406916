"""What the UserPromptSubmit hook injects in projects of every size: the relevance gate on a young
project's handful of records and on a whole conversation, through the hook's own selection.

    python benchmarks/hook_sizes.py --locomo FILE.json --longmemeval DIR [--sizes 1,8,64,all]
        [--limit N] [--locomo-limit N] [--seed S] [--check N] [--dump FILE] [--json OUT]

Both sets are indexed from transcripts by the session indexer as ``benchmarks/hook_noise.py``
does (each LoCoMo conversation and LongMemEval_S haystack a project of its own: size ``all``).
For a size ``s``, each answerable question gets a project of its own holding its evidence units
(the exchanges that hold an evidence / answer turn) and random other units of the same
conversation or haystack, ``s`` in all (more when the evidence alone is more; seeded by
``--seed``, the question and the size). Each question is asked through
``hook_context.select_for_prompt``:

- of its own project: *evidence*, *first3* and *evidence_text* as in ``hook_noise.py``;
- of a project of the same size built from the other set (a LoCoMo question of a LongMemEval
  question's project, and the other way round): *off_topic_silent*, the share where nothing is
  injected.

Each question is asked once with threshold 0 and no item or token limit (the candidates in the
hook's order with the gate's relevance); the default threshold, item limit and budget are then
applied offline with the hook's packing. ``--check N`` asks ``select_for_prompt`` itself with
the default configuration for the first N questions of each kind and size and counts the
selections that differ from the offline ones (must be 0). ``--dump`` pickles every asked
question with its candidates (``benchmarks/lab/gate_fit.py`` fits the gate on them).
"""

from __future__ import annotations

import argparse
import pickle
import random
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: benchmarks/ingest.py must not shadow the ingest package

from benchmarks import hook_noise as hn  # noqa: E402
from benchmarks import longmemeval as lme  # noqa: E402
from benchmarks import sessions_bench as sb  # noqa: E402
from benchmarks.harness.data import load_longmemeval  # noqa: E402
from retrieval.records import Kind, Record, Scope  # noqa: E402
from server.service.core.identity import Identity  # noqa: E402
from server.service.prompting import hook_context as ar  # noqa: E402

SETS = hn.SETS
METRICS = ("evidence", "first3", "evidence_text", "off_topic_silent")
# the targets of one default configuration: size -> (LoCoMo evidence, LongMemEval evidence,
# off-topic silent); evidence_text must reach 0.9 x evidence at every size
TARGETS = {"1": (0.85, 0.75, 0.95), "8": (0.85, 0.75, 0.95), "64": (0.80, 0.75, 0.90),
           "all": (0.70, 0.75, 0.90)}  # fmt: skip


def sized(units: list[Record], evidence: list[Record], size: int, rng: random.Random):
    """The evidence units and random others of ``units``, ``size`` in all (at least the
    evidence), in the order they were stored."""
    held = {r.id for r in evidence}
    others = [r for r in units if r.id not in held]
    extra = rng.sample(others, min(len(others), max(0, size - len(held))))
    keep = held | {r.id for r in extra}
    return [r for r in units if r.id in keep]


def copy_into(engine, who: Identity, records: list[Record]) -> None:
    """``records`` again, in ``who``'s private bucket (same texts and metadata: the embedding
    cache answers their vectors)."""
    engine.add([Record(kind=Kind.turn, project_id=who.project_id, agent_id=who.agent_id,
                       scope=Scope.private, category="turn", content=r.content,
                       context=r.context, metadata=dict(r.metadata),
                       created_at=r.created_at, updated_at=r.updated_at) for r in records])  # fmt: skip


class Project:
    """One project a question may be asked of: who asks, and how to tell its evidence."""

    def __init__(self, who: Identity, units: list[Record]) -> None:
        self.who = who
        self.units = units


def build(store, lo_qs, lme_qs, sessions, sizes, seed: int):
    """{set: {size: [(question, Project, holds, evidence texts)]}} for every question."""
    svc = store.svc
    said = {(s, t["dia_id"]): t.get("text", "") for s, mp in store.maps.items()
            for t in store.turns.get(s, [])}  # fmt: skip
    out: dict = {name: {} for name in SETS}
    for size in sizes:
        lo_rows, lme_rows = [], []
        for i, q in enumerate(lo_qs):
            mp = store.maps[q["sid"]]
            units = store.unit_cache.setdefault(q["sid"], store.units_of(q["sid"]))
            holds = partial(_holds_locomo, mp=mp, rel=q["rel"])
            ev = [said.get((q["sid"], d), "") for d in sorted(q["rel"])]
            lo_rows.append((q["text"], project(svc, store.who[q["sid"]], units, holds, size,
                                               seed, f"locomo-{i}"), holds, ev))  # fmt: skip
        for i, q in enumerate(lme_qs):
            who, answers = lme.who_of(q), lme.answer_positions(q, sessions)
            units = store.unit_cache.setdefault(q["question_id"], units_of(svc, who))
            holds = partial(_holds_lme, answers=answers)
            ev = [sessions[sid][t]["content"] for sid, t in q["answer_turns"]]
            lme_rows.append((q["question"], project(svc, who, units, holds, size, seed,
                                                    f"longmemeval-{i}"), holds, ev))  # fmt: skip
        out["locomo"][size], out["longmemeval"][size] = lo_rows, lme_rows
    return out


def _holds_locomo(rec: Record, mp: dict, rel: set) -> bool:
    return bool(set(sb.held(rec, mp)) & rel)


def _holds_lme(rec: Record, answers: set) -> bool:
    return lme.holds(rec.metadata, answers)


def units_of(svc, who: Identity) -> list[Record]:
    from retrieval.records import RecordFilter

    return svc.store.list(RecordFilter(buckets=[who.bucket("private")], kinds=[Kind.turn]))


def project(svc, who: Identity, units, holds, size, seed: int, name: str) -> Project:
    """The question's project at ``size`` (``all``: its whole conversation or haystack)."""
    if size == "all":
        return Project(who, units)
    rng = random.Random(f"{seed}:{name}:{size}")
    keep = sized(units, [r for r in units if holds(r)], int(size), rng)
    mine = Identity(project_id=f"size{size}-{name}", agent_id=f"agent-{name}-{size}")
    copy_into(svc.engine, mine, keep)
    return Project(mine, keep)


def ask_all(svc, built: dict, sizes) -> dict:
    """{set: {size: {"own": [Asked], "off": [Asked]}}}: every question of its own project and
    of the other set's project of the same size (by position, cycling)."""
    asked: dict = {name: {} for name in SETS}
    for name in SETS:
        other = SETS[1 - SETS.index(name)]
        for size in sizes:
            rows, theirs = built[name][size], built[other][size]
            own, off = [], []
            for i, (text, proj, holds, ev) in enumerate(rows):
                own.append(scan(svc, proj.who, text, holds, ev))
                if theirs:
                    off.append(scan(svc, theirs[i % len(theirs)][1].who, text, lambda r: False))
            asked[name][size] = {"own": own, "off": off}
            print(f"  asked {name} at size {size}: {len(own)} questions", flush=True)
    return asked


def scan(svc, who, text: str, holds, evidence=()) -> hn.Asked:
    """``text`` asked of ``who``'s project at threshold 0 without limits: the candidates in the
    hook's order with their relevance, the excerpt quoted of each at the default budget, and
    each candidate's hit (its explanation: what the gate read)."""
    sel = ar.select_for_prompt(svc, who, text, config=hn.SCAN)
    tokens = ar.HookConfig().prompt_tokens
    texts = {tokens: ar.excerpt_texts(svc, sel.query, [p.record for p in sel.picked], tokens)}
    cands = [(p.relevance, p.record, bool(holds(p.record))) for p in sel.picked]
    a = hn.Asked(text, text, who, cands, list(evidence), texts)
    a.hits = [p.hit for p in sel.picked]
    return a


def results(asked: dict, config: ar.HookConfig) -> dict:
    out = {}
    for size in next(iter(asked.values())):
        row = {}
        for name in SETS:
            own, off = asked[name][size]["own"], asked[name][size]["off"]
            p = hn.point(own, off, config.threshold, config)
            row[name] = {**p, "questions": len(own)}
        out[size] = row
    return out


CURVE = [round(0.1 + 0.02 * i, 2) for i in range(41)]  # 0.10 … 0.90


def curves(asked: dict, config: ar.HookConfig) -> dict:
    """{size: [{threshold, locomo: point, longmemeval: point}]}: the other thresholds, offline."""
    out: dict = {}
    for size in next(iter(asked.values())):
        rows = []
        for tau in CURVE:
            row: dict = {"threshold": tau}
            for name in SETS:
                row[name] = hn.point(asked[name][size]["own"], asked[name][size]["off"], tau,
                                     config)  # fmt: skip
            rows.append(row)
        out[size] = rows
    return out


def met(size: str, row: dict) -> bool:
    lo, lm, silent = TARGETS.get(size, (0, 0, 0))
    ok = row["locomo"]["evidence"] >= lo and row["longmemeval"]["evidence"] >= lm
    ok &= all(row[s]["off_topic_silent"] >= silent for s in SETS)
    return ok and all(row[s]["evidence_text"] >= 0.9 * row[s]["evidence"] for s in SETS)


def print_table(res: dict) -> None:
    print(f"\n{'size':>6}" + "".join(f"{s + ' ' + m:>26}" for s in ("LoCoMo", "LongMemEval")
                                      for m in ("evidence/first3/ev-text", "off-silent")))  # fmt: skip
    for size, row in res.items():
        cells = []
        for s in SETS:
            r = row[s]
            cells.append(f"{r['evidence']:.3f}/{r['first3']:.3f}/{r['evidence_text']:.3f}")
            cells.append(f"{r['off_topic_silent']:.3f}")
        print(f"{size:>6}" + "".join(f"{c:>26}" for c in cells) + ("  *" if met(size, row) else ""))


def check(svc, asked: dict, n: int, config: ar.HookConfig) -> dict:
    total = differ = 0
    for name in SETS:
        for kinds in asked[name].values():
            for kind in ("own", "off"):
                for a in kinds[kind][:n]:
                    real = ar.select_for_prompt(svc, a.who, a.text, config=config).ids
                    offline = [c[1].id for c in hn.injected(a, config.threshold, config)]
                    total += 1
                    differ += real != offline
    return {"selections": total, "differing": differ}


def run(args, data, embedder, helpers) -> dict:
    t_start = time.perf_counter()
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    lme_qs, sessions = load_longmemeval(Path(args.longmemeval), args.limit)
    lo_qs = hn.locomo_questions(data, helpers, args.locomo_limit)
    print(f"locomo: {len(lo_qs)} answerable questions; longmemeval: {len(lme_qs)}", flush=True)
    config = ar.HookConfig()
    with tempfile.TemporaryDirectory(prefix="pm-hook-sizes-") as tmp:
        store = sb.SessionStore(data, embedder, Path(tmp) / "store", Path(tmp) / "transcripts",
                                helpers[:2])  # fmt: skip
        store.unit_cache = {}
        store.turns = {s["sample_id"]: [t for _, _, turns in helpers[0](s["conversation"])
                                        for t in turns] for s in data}  # fmt: skip
        try:
            t0 = time.perf_counter()
            for q in lme_qs:
                path = lme.write_transcript(q, sessions, Path(tmp))
                store.indexer.index_file(lme.who_of(q), path, flush=True, final=True)
            print(f"indexed {len(lme_qs)} haystacks in {time.perf_counter() - t0:.0f}s", flush=True)
            t0 = time.perf_counter()
            built = build(store, lo_qs, lme_qs, sessions, sizes, args.seed)
            store.engine.wait_vectors(600)
            took_build = time.perf_counter() - t0
            t0 = time.perf_counter()
            asked = ask_all(store.svc, built, sizes)
            took_ask = time.perf_counter() - t0
            checked = check(store.svc, asked, args.check, config) if args.check else {}
            if args.dump:
                dump(args.dump, asked, embedder)
        finally:
            store.close()
    res = results(asked, config)
    print_table(res)
    curve = curves(asked, config)
    if checked:
        print(f"check: {checked['differing']} of {checked['selections']} selections through "
              "select_for_prompt differ from the offline ones")  # fmt: skip
    wall = time.perf_counter() - t_start
    print(f"built in {took_build:.0f}s, asked in {took_ask:.0f}s, wall {wall:.0f}s")
    return {"threshold": config.threshold, "max_items": config.max_items,
            "prompt_tokens": config.prompt_tokens, "seed": args.seed, "sizes": res,
            "targets_met": {size: met(size, row) for size, row in res.items()}, "curve": curve,
            "check": checked, "seconds": {"build": round(took_build, 1),
                                          "ask": round(took_ask, 1), "wall": round(wall, 1)}}  # fmt: skip


def dump(path: str, asked: dict, embedder) -> None:
    """Every asked question with its candidates, for offline fitting (no store needed): rows
    of (set, size, kind, text, evidence texts, candidates as (record id, explanation, holds,
    excerpt)), the records by id, and each question's vector."""
    rows, records, qvecs = [], {}, {}
    tokens = ar.HookConfig().prompt_tokens
    for name in SETS:
        for size, kinds in asked[name].items():
            for kind, items in kinds.items():
                for a in items:
                    texts = a.texts.get(tokens) or [None] * len(a.cands)
                    cands = []
                    for (_, rec, holds), hit, text in zip(a.cands, a.hits, texts, strict=True):
                        records[rec.id] = rec
                        cands.append((rec.id, hit.explanation, holds, text))
                    if a.text not in qvecs:
                        qvecs[a.text] = embedder.embed_query(a.text)
                    rows.append({"set": name, "size": size, "kind": kind, "text": a.text,
                                 "evidence": a.evidence, "cands": cands})  # fmt: skip
    Path(path).write_bytes(pickle.dumps({"rows": rows, "records": records, "qvecs": qvecs}))
    print(f"dumped {len(rows)} asked questions ({len(records)} records) to {path}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", required=True, help="LoCoMo JSON (locomo10.json layout)")
    p.add_argument(
        "--longmemeval", required=True, help="folder: questions.jsonl, sessions.jsonl.gz"
    )
    p.add_argument("--sizes", default="1,8,64,all", help="project sizes (records), 'all' = whole")
    p.add_argument("--limit", type=int, default=40, help="first N LongMemEval questions (40)")
    p.add_argument("--locomo-limit", type=int, default=0, help="first N LoCoMo questions (all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", type=int, default=5, help="questions per kind and size compared "
                   "with select_for_prompt itself")  # fmt: skip
    p.add_argument("--dump", metavar="FILE", help="pickle the asked questions (gate fitting)")
    p.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    return hn.execute(args, run)


if __name__ == "__main__":
    raise SystemExit(main())
