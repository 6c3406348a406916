"""What the UserPromptSubmit hook injects at each threshold: LoCoMo and LongMemEval through the
session indexer and the hook's own selection code (``hook_context.select_for_prompt``).

    python benchmarks/hook_noise.py --locomo FILE.json --longmemeval DIR [--limit N]
        [--locomo-limit N] [--check N] [--no-cache] [--json OUT]

One store holds both sets, each conversation or haystack in a project of its own, indexed from
transcripts by the session indexer (``benchmarks/sessions_bench.py`` writes LoCoMo's Claude Code
transcripts, ``benchmarks/longmemeval.py`` the LongMemEval_S haystacks in the generic JSONL;
``--limit``: the first N LongMemEval questions, ``--locomo-limit``: the first N LoCoMo ones).
Every answerable question (LoCoMo categories 1-4 with evidence; LongMemEval without ``_abs``)
is asked twice through ``select_for_prompt``:

- of its own project: *evidence* is the share of questions where an injected item (budget and
  item limit applied) holds an evidence / answer turn (its turn range ``turn..last_turn``);
  *first3* the share where one of the first three injected items does; *evidence_text* the
  share where the evidence's own words are in the injected text (a run of 8 of its words: a
  long record is quoted by its excerpt for the question, ``hook_context.excerpt_texts``, and an
  excerpt or a cut quote can miss them);
- of a project of the other set (a LoCoMo question of a LongMemEval haystack, a LongMemEval
  question of a LoCoMo conversation): *off-topic silent* is the share where nothing is injected.

Each question is asked once with threshold 0 and no item or token limit: the candidates in the
hook's order with their relevance. Every threshold 0.02 … 1.00 is then applied offline with the
default item limit and the hook's packing (``hook_context._pack``); ``--check N`` asks
``select_for_prompt`` itself at several thresholds for the first N questions of each kind and
counts the selections that differ from the offline ones (must be 0).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: benchmarks/ingest.py must not shadow the ingest package

from benchmarks import longmemeval as lme  # noqa: E402
from benchmarks import sessions_bench as sb  # noqa: E402
from benchmarks.harness.data import (  # noqa: E402
    evidence_ids,
    load_longmemeval,
    locomo_date,
    locomo_sessions,
)
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from retrieval.records import Record  # noqa: E402
from server.service.prompting import hook_context as ar  # noqa: E402

THRESHOLDS = sb.THRESHOLDS  # 0.02 … 1.00, step 0.02
CHECK_THRESHOLDS = (0.10, 0.30, 0.50, 0.70, 0.90)
# threshold 0, no item or token limit: every candidate of the search (k=30) with its relevance
SCAN = ar.HookConfig.model_construct(threshold=0.0, max_items=10_000, prompt_tokens=10**8)
SETS = ("locomo", "longmemeval")
METRICS = ("off_topic_silent", "evidence", "first3", "evidence_text")
BUDGET_ITEMS, BUDGET_TOKENS = (6, 10), (400, 800, 1600)


@dataclass
class Asked:
    """One question asked of one project: the candidates in the hook's order."""

    qid: str
    text: str
    who: object
    cands: list[tuple[float, Record, bool]]  # (relevance, record, holds evidence)
    evidence: list[str] = field(default_factory=list)  # the evidence / answer turns' texts
    texts: dict = field(default_factory=dict)  # budget -> per candidate: its excerpt or None
    packed: dict = field(default_factory=dict)  # (budget, ids) -> (how many fit, the text)


def scan(svc, who, text: str, holds, evidence: list[str] = ()) -> Asked:
    """``text`` asked of ``who``'s project at threshold 0, without limits: the candidates in
    the hook's order, and the excerpt the hook would quote of each at every budget measured."""
    sel = ar.select_for_prompt(svc, who, text, config=SCAN)
    records = [p.record for p in sel.picked]
    texts = {t: ar.excerpt_texts(svc, sel.query, records, t)
             for t in {ar.HookConfig().prompt_tokens, *BUDGET_TOKENS}}  # fmt: skip
    cands = [(p.relevance, p.record, bool(holds(p.record))) for p in sel.picked]
    return Asked(text, text, who, cands, list(evidence), texts)


def injected(a: Asked, tau: float, config: ar.HookConfig) -> list[tuple[float, Record, bool]]:
    """What ``select_for_prompt`` injects at ``tau``: the candidates clearing it, in order, at
    most ``max_items``, as many as the hook's packing quotes within ``prompt_tokens``."""
    over, (n, _) = clearing(a, tau, config), packed(a, tau, config)
    return [a.cands[i] for i in over[:n]]


def clearing(a: Asked, tau: float, config: ar.HookConfig) -> list[int]:
    return [i for i, c in enumerate(a.cands) if c[0] >= tau][: config.max_items]


def packed(a: Asked, tau: float, config: ar.HookConfig) -> tuple[int, str]:
    """(how many of the candidates clearing ``tau`` the hook quotes, the injected text)."""
    over = clearing(a, tau, config)
    key = (config.prompt_tokens, *over)
    if key not in a.packed:
        texts = a.texts.get(config.prompt_tokens) or [None] * len(a.cands)
        items = [(a.cands[i][1], texts[i]) for i in over]
        a.packed[key] = ar._pack(items, config.prompt_tokens) if over else (0, "")
    return a.packed[key]


_WORDS = re.compile(r"[\w']+")


def shown(evidence: str, text: str, span: int = 8) -> bool:
    """The evidence's words are in ``text``: a run of ``span`` consecutive words of it (all of
    it when shorter), compared case-insensitively, punctuation and spacing ignored."""
    ev = _WORDS.findall(evidence.lower())
    if not ev:
        return False
    hay = " " + " ".join(_WORDS.findall(text.lower())) + " "
    n = min(span, len(ev))
    return any(" " + " ".join(ev[i : i + n]) + " " in hay for i in range(len(ev) - n + 1))


def point(own: list[Asked], off: list[Asked], tau: float, config: ar.HookConfig) -> dict:
    ev = first = seen = 0
    for a in own:
        held = [c[2] for c in injected(a, tau, config)]
        ev += any(held)
        first += any(held[:3])
        text = packed(a, tau, config)[1] if held else ""
        seen += any(shown(e, text) for e in a.evidence)
    silent = sum(not injected(a, tau, config) for a in off)
    return {"off_topic_silent": round(silent / max(1, len(off)), 4),
            "evidence": round(ev / max(1, len(own)), 4),
            "first3": round(first / max(1, len(own)), 4),
            "evidence_text": round(seen / max(1, len(own)), 4)}  # fmt: skip


def curve(asked: dict, config: ar.HookConfig) -> list[dict]:
    rows = []
    for tau in THRESHOLDS:
        row: dict = {"threshold": tau}
        for name in SETS:
            row[name] = point(asked[name]["own"], asked[name]["off"], tau, config)
        rows.append(row)
    return rows


def ceiling(asked: dict, config: ar.HookConfig) -> dict:
    """Evidence at threshold 0: as the hook injects it, with the item limit but no budget, and
    among every candidate (what no threshold can exceed, and why)."""
    free = ar.HookConfig.model_construct(**{**config.model_dump(), "prompt_tokens": 10**8})
    out = {}
    for name in SETS:
        own = asked[name]["own"]
        out[name] = {"hook": point(own, [], 0.0, config)["evidence"],
                     "items_no_budget": point(own, [], 0.0, free)["evidence"],
                     "any_candidate": point(own, [], 0.0, SCAN)["evidence"]}  # fmt: skip
    return out


def budgets(asked: dict, config: ar.HookConfig) -> list[dict]:
    """Evidence and first3 at the configured threshold for other item limits and budgets
    (``PATTERN_HOOK_MAX_ITEMS``, ``PATTERN_HOOK_PROMPT_TOKENS``)."""
    rows = []
    for items in BUDGET_ITEMS:
        for tokens in BUDGET_TOKENS:
            cfg = config.model_copy(update={"max_items": items, "prompt_tokens": tokens})
            row: dict = {"max_items": items, "prompt_tokens": tokens}
            for name in SETS:
                p = point(asked[name]["own"], [], config.threshold, cfg)
                row[name] = {k: p[k] for k in ("evidence", "first3", "evidence_text")}
            rows.append(row)
    return rows


def meets(row: dict, silent: float = 0.90, evidence: float = 0.80) -> bool:
    return all(row[s]["off_topic_silent"] >= silent and row[s]["evidence"] >= evidence
               for s in SETS)  # fmt: skip


def check(svc, asked: dict, n: int, config: ar.HookConfig) -> dict:
    """``select_for_prompt`` at real thresholds vs the offline selection: (asked, differing)."""
    total = differ = 0
    for name in SETS:
        for kind in ("own", "off"):
            for a in asked[name][kind][:n]:
                for tau in CHECK_THRESHOLDS:
                    cfg = config.model_copy(update={"threshold": tau})
                    real = ar.select_for_prompt(svc, a.who, a.text, config=cfg).ids
                    offline = [c[1].id for c in injected(a, tau, cfg)]
                    total += 1
                    differ += real != offline
    return {"selections": total, "differing": differ}


def locomo_questions(data: list[dict], helpers, limit: int) -> list[dict]:
    """The answerable LoCoMo questions (categories 1-4 with evidence), the first ``limit``."""
    out = [q for q in sb.locomo_questions(data, helpers) if q["cat"] in {"1", "2", "3", "4"}]
    return out[:limit] if limit else out


def run(args, data: list[dict], embedder, helpers) -> dict:
    """Index both sets into one store, ask every question, return the curves (and print them)."""
    t_start = time.perf_counter()
    lme_qs, sessions = load_longmemeval(Path(args.longmemeval), args.limit)
    lo_qs = locomo_questions(data, helpers, args.locomo_limit)
    print(f"locomo: {len(data)} conversations, {len(lo_qs)} answerable questions; longmemeval: "
          f"{len(lme_qs)} questions, {len(sessions)} sessions", flush=True)  # fmt: skip
    config = ar.HookConfig()
    asked: dict = {name: {"own": [], "off": []} for name in SETS}
    with tempfile.TemporaryDirectory(prefix="pm-hook-noise-") as tmp:
        store = sb.SessionStore(data, embedder, Path(tmp) / "store", Path(tmp) / "transcripts",
                                helpers[:2])  # fmt: skip
        try:
            t0, units = time.perf_counter(), 0
            for n, q in enumerate(lme_qs, 1):
                path = lme.write_transcript(q, sessions, Path(tmp))
                units += store.indexer.index_file(lme.who_of(q), path, flush=True,
                                                  final=True).added  # fmt: skip
                if n % 10 == 0:
                    print(f"  {n} haystacks, {time.perf_counter() - t0:.0f}s", flush=True)
            took_lme = time.perf_counter() - t0
            print(f"indexed {units} longmemeval units in {took_lme:.0f}s (cache hits "
                  f"{getattr(embedder, 'hits', 0)} misses {getattr(embedder, 'misses', 0)})",
                  flush=True)  # fmt: skip
            t0 = time.perf_counter()
            sids, svc = list(store.maps), store.svc
            said = {(sample["sample_id"], t["dia_id"]): t.get("text", "")
                    for sample in data for _, _, turns in helpers[0](sample["conversation"])
                    for t in turns}  # fmt: skip
            for i, q in enumerate(lo_qs):
                mp, who = store.maps[q["sid"]], store.who[q["sid"]]
                ev = [said.get((q["sid"], d), "") for d in sorted(q["rel"])]
                own = scan(svc, who, q["text"],
                           lambda r, mp=mp, rel=q["rel"]: set(sb.held(r, mp)) & rel, ev)  # fmt: skip
                asked["locomo"]["own"].append(own)
                if lme_qs:
                    other = lme.who_of(lme_qs[i % len(lme_qs)])
                    asked["locomo"]["off"].append(scan(svc, other, q["text"], lambda r: False))
            for i, q in enumerate(lme_qs):
                who, answers = lme.who_of(q), lme.answer_positions(q, sessions)
                ev = [sessions[sid][t]["content"] for sid, t in q["answer_turns"]]
                own = scan(svc, who, q["question"],
                           lambda r, a=answers: lme.holds(r.metadata, a), ev)  # fmt: skip
                asked["longmemeval"]["own"].append(own)
                other = store.who[sids[i % len(sids)]]
                asked["longmemeval"]["off"].append(scan(svc, other, q["question"], lambda r: False))
            took_ask = time.perf_counter() - t0
            checked = check(svc, asked, args.check, config) if args.check else {}
        finally:
            store.close()
    rows = curve(asked, config)
    ok = [r["threshold"] for r in rows if meets(r)]
    print_curve(rows, asked, config)
    ceil = ceiling(asked, config)
    for name, c in ceil.items():
        print(f"{name} evidence at threshold 0: {c['hook']:.3f} (item limit and budget), "
              f"{c['items_no_budget']:.3f} (item limit only), {c['any_candidate']:.3f} (any of "
              "the search's candidates)")  # fmt: skip
    sweep = budgets(asked, config)
    print(
        f"at threshold {config.threshold}: items, tokens, evidence / first3 / evidence_text "
        "(LoCoMo, LongMemEval)"
    )
    for b in sweep:
        print(f"  {b['max_items']:>3} {b['prompt_tokens']:>5}" + "".join(
            f"  {b[s]['evidence']:.3f} / {b[s]['first3']:.3f} / {b[s]['evidence_text']:.3f}"
            for s in SETS))  # fmt: skip
    if checked:
        print(f"check: {checked['differing']} of {checked['selections']} selections through "
              "select_for_prompt differ from the offline ones")  # fmt: skip
    print(f"thresholds meeting every target (off-topic silent >= 0.90, evidence >= 0.80, both "
          f"sets): {ok or 'none'}")  # fmt: skip
    wall = time.perf_counter() - t_start
    print(f"asked in {took_ask:.0f}s, wall {wall:.0f}s")
    counts = {name: {k: len(v) for k, v in asked[name].items()} for name in SETS}
    return {"curve": rows, "questions": counts, "default": config.threshold,
            "max_items": config.max_items, "prompt_tokens": config.prompt_tokens,
            "meeting_targets": ok, "check": checked, "ceiling": ceil,
            "budgets": sweep,
            "seconds": {"index_longmemeval": round(took_lme, 1), "ask": round(took_ask, 1),
                        "wall": round(wall, 1)}}  # fmt: skip


def print_curve(rows: list[dict], asked: dict, config: ar.HookConfig) -> None:
    n = {name: len(asked[name]["own"]) for name in SETS}
    print(f"\nthe hook's injection by threshold (max {config.max_items} items, "
          f"{config.prompt_tokens} tokens): LoCoMo {n['locomo']} questions, LongMemEval "
          f"{n['longmemeval']}")  # fmt: skip
    print(f"{'':>9}{'LoCoMo':>48}{'LongMemEval':>48}")
    print(
        f"{'threshold':>9}"
        + 2 * "".join(f"{m:>12}" for m in ("off-silent", "evidence", "first3", "ev-text"))
    )
    for r in rows:
        vals = [r[s][m] for s in SETS for m in METRICS]
        mark = "  *" if meets(r) else ""
        print(f"{r['threshold']:>9.2f}" + "".join(f"{v:>12.3f}" for v in vals) + mark)


def main(argv: list[str] | None = None) -> int:

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", required=True, help="LoCoMo JSON (locomo10.json layout)")
    p.add_argument(
        "--longmemeval", required=True, help="folder: questions.jsonl, sessions.jsonl.gz"
    )
    p.add_argument("--limit", type=int, default=40, help="first N LongMemEval questions (40)")
    p.add_argument("--locomo-limit", type=int, default=0, help="first N LoCoMo questions (all)")
    p.add_argument(
        "--check",
        type=int,
        default=5,
        help="compare with select_for_prompt itself on N questions of each kind",
    )
    p.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    p.add_argument(
        "--no-excerpts",
        action="store_true",
        help="quote every record from its start, cut at the budget (the comparison run)",
    )
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    if args.no_excerpts:  # the hook's own selection then quotes no excerpt either (--check)
        ar.excerpt_texts = lambda svc, query, records, tokens: [None] * len(records)
    return execute(args, run)


def execute(args, harness) -> int:
    """Load ``--locomo``, run ``harness(args, data, embedder, helpers)``, write ``--json``."""
    data = json.loads(Path(args.locomo).read_text(encoding="utf-8"))
    helpers = (locomo_sessions, locomo_date, evidence_ids)
    write_json(args.json, harness(args, data, make_embedder(not args.no_cache), helpers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
