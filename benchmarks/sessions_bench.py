"""LoCoMo through the session indexer and the UserPromptSubmit hook's own selection code.

``python benchmarks/relevance.py locomo FILE --via-sessions [--long-prompts [WRAPPERS]] [--abstain]``

1. Each conversation becomes Claude Code transcripts, one per session, with its real date
   (``speaker_a`` speaks as the user, ``speaker_b`` as the assistant; a message's text is
   ``Name: text``, as a chat bridge writes it, and a shared image its caption in brackets), in a
   project of its own (``cwd`` ``/locomo/<sample>``).
2. The session indexer (``server/service/indexing/sessions.py``) indexes them into a fresh store: one
   record per exchange (a ``speaker_a`` message with the ``speaker_b`` replies until the next
   one), holding the LoCoMo turns of its turn range (``metadata.turn`` to ``last_turn``).
3. Every question with evidence is asked through ``hook_context.select_for_prompt`` (the hook's
   code) with threshold 0, so this measures the ranking. The ranked items are exchanges, so the
   metrics count them: recall@k is the share of evidence turns held by the first k exchanges,
   nDCG@10 and MRR@10 count an exchange that holds evidence not held by a better one as a hit.
   The direct benchmark (one record per turn) runs in the same process on the same data.
``--long-prompts``: each question is also asked wrapped in a 100-200-word prompt (pasted
output and instructions; ``benchmarks/data/long_prompts.json`` by default), recall compared
with the bare question.
``--abstain``: the noise control. For every question the store is changed as if its evidence
turns had never been said (the exchanges holding them rebuilt from their other turns, or gone
when nothing else is left), the hook's selection asked, and the change undone. Reported for
every threshold: ``silent`` (share of those questions where nothing clears it), ``evidence``
(share of answerable questions, store intact, where an evidence turn is among what the hook
injects: budget and item limit applied) and ``unrelated_silent`` (questions asked of another
conversation's agent).
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from ingest.sessions import exchanges
from retrieval.engine import Engine
from retrieval.records import Kind, Record, RecordFilter
from server.service.core.identity import Identity, identity_fields
from server.service.indexing.session_records import unit_records
from server.service.indexing.sessions import SessionIndexer
from server.service.memories.memory import MemoryService
from server.service.prompting import hook_context as ar

DEFAULT_WRAPPERS = Path(__file__).resolve().parent / "data" / "long_prompts.json"
THRESHOLDS = [round(0.02 * i, 2) for i in range(1, 51)]  # the gate's relevance: 0.02 … 1.00


def transcripts(sample: dict, folder: Path, locomo_sessions, locomo_date) -> tuple[dict, dict]:
    """Write one Claude Code transcript per session. Returns ({(session id, turn position):
    [dia_id, …]}, {(session id, turn position): (role, text)}): the position the indexer gives
    the turn (consecutive ``speaker_b`` messages are one assistant turn, as a reply in several
    entries is)."""
    conv = sample["conversation"]
    sid = sample["sample_id"]
    role = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    mapping: dict[tuple[str, int], list[str]] = {}
    texts: dict[tuple[str, int], tuple[str, str]] = {}
    for n, date, turns in locomo_sessions(conv):
        session = f"{sid}-s{n}"
        start = locomo_date(date)
        path = folder / sid / f"{session}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines, parent, pos, prev = [], None, -1, None
        for i, turn in enumerate(turns):
            kind = role.get(turn["speaker"], "user")
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            when = (start + timedelta(seconds=20 * i)) if start else None
            content = text if kind == "user" else [{"type": "text", "text": text}]
            uid = f"{session}-{i}"
            lines.append({"parentUuid": parent, "isSidechain": False, "userType": "external",
                          "cwd": f"/locomo/{sid}", "sessionId": session, "type": kind,
                          "uuid": uid, "message": {"role": kind, "content": content},
                          **({"timestamp": when.isoformat().replace("+00:00", "Z")} if when else {})})  # fmt: skip
            parent = uid
            if not (kind == "assistant" and prev == "assistant"):
                pos += 1
            prev = kind
            mapping.setdefault((session, pos), []).append(turn["dia_id"])
            old = texts.get((session, pos))
            texts[(session, pos)] = (kind, f"{old[1]}\n\n{text}" if old else text)
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return mapping, texts


def who_of(sample_id: str) -> Identity:
    return Identity(**identity_fields({}, Path(f"/locomo/{sample_id}")))


def held(rec: Record, mapping: dict) -> list[str]:
    """The LoCoMo turns (dia ids) an exchange record holds, in order."""
    m = rec.metadata
    first, last = m.get("turn"), m.get("last_turn", m.get("turn"))
    if not isinstance(first, int) or not isinstance(last, int):
        return []
    return [d for i in range(first, last + 1) for d in mapping.get((m.get("session"), i), [])]


def ranked_units(sel: ar.Selection, mapping: dict) -> list[list[str]]:
    """The dia ids held by each picked exchange, best first."""
    return [held(p.record, mapping) for p in sel.picked]


def ranked_dia(sel: ar.Selection, mapping: dict) -> list[str]:
    return [d for unit in ranked_units(sel, mapping) for d in unit]


def unit_metrics(units: Sequence[Sequence[str]], relevant: set[str]) -> dict[str, float]:
    """recall@5/@10 (share of evidence held by the first k exchanges), nDCG@10 and MRR@10 (an
    exchange holding evidence that no better one holds is a hit)."""
    if not relevant:
        return {"recall@5": 0.0, "recall@10": 0.0, "ndcg@10": 0.0, "mrr@10": 0.0}
    seen: set[str] = set()
    hits = []
    for unit in units[:10]:
        new = (set(unit) & relevant) - seen
        hits.append(bool(new))
        seen |= new
    covered = [len(relevant.intersection(d for u in units[:k] for d in u)) for k in (5, 10)]
    dcg = sum(1.0 / math.log2(i + 2) for i, h in enumerate(hits) if h)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    first = next((i for i, h in enumerate(hits) if h), None)
    return {"recall@5": covered[0] / len(relevant), "recall@10": covered[1] / len(relevant),
            "ndcg@10": dcg / ideal, "mrr@10": 0.0 if first is None else 1.0 / (first + 1)}  # fmt: skip


def ask(svc, who, text, config) -> ar.Selection:
    return ar.select_for_prompt(svc, who, text, config=config)


RANK_CONFIG = ar.HookConfig(threshold=0.0, max_items=10, prompt_tokens=20_000)
SCAN_CONFIG = ar.HookConfig(threshold=0.0, max_items=30, prompt_tokens=20_000)


class SessionStore:
    """The LoCoMo conversations indexed through transcripts into one store."""

    def __init__(self, data: list[dict], embedder, home: Path, folder: Path, helpers) -> None:
        locomo_sessions, locomo_date = helpers
        self.engine = Engine(home, embedder)
        self.svc = MemoryService(self.engine)
        self.indexer = SessionIndexer(self.svc)
        self.maps: dict[str, dict] = {}  # sample -> {(session, turn position): [dia ids]}
        self.texts: dict[str, dict] = {}  # sample -> {(session, turn position): (role, text)}
        self.who: dict[str, Identity] = {}
        t0 = time.perf_counter()
        n = 0
        for sample in data:
            sid = sample["sample_id"]
            self.maps[sid], self.texts[sid] = transcripts(sample, folder, locomo_sessions,
                                                          locomo_date)  # fmt: skip
            self.who[sid] = who_of(sid)
            for path in sorted((folder / sid).glob("*.jsonl")):
                n += self.indexer.index_file(self.who[sid], path, flush=True, final=True).added
        took = time.perf_counter() - t0
        cache = (f", cache hits {embedder.hits} misses {embedder.misses}"
                 if hasattr(embedder, "hits") else "")  # fmt: skip
        turns = sum(len(d) for m in self.maps.values() for d in m.values())
        print(f"indexed {n} exchange records from {turns} LoCoMo turns through transcripts in "
              f"{took:.1f}s{cache}", flush=True)  # fmt: skip

    def close(self) -> None:
        self.engine.close()

    def units_of(self, sid: str) -> list[Record]:
        """The exchange records of one conversation."""
        f = RecordFilter(buckets=[self.who[sid].bucket("private")], kinds=[Kind.turn])
        return self.svc.store.list(f)


def hidden_changes(store: SessionStore, sid: str, units: list[Record], hide: set[str]):
    """(records to delete, records to add) for a store that never saw the ``hide`` turns: every
    exchange holding one is rebuilt from its other turns (under new ids, so undoing the change
    is deleting them and adding the originals back)."""
    mapping, texts, who = store.maps[sid], store.texts[sid], store.who[sid]
    by_exchange: dict[tuple, list[Record]] = {}
    for rec in units:
        if set(held(rec, mapping)) & hide:
            by_exchange.setdefault((rec.metadata["session"], rec.metadata["turn"]), []).append(rec)
    delete, add = [], []
    for (session, _first), parts in by_exchange.items():
        parts.sort(key=lambda r: r.metadata.get("part", 0))
        m = parts[0].metadata
        kept = []
        for i in range(m["turn"], m.get("last_turn", m["turn"]) + 1):
            dias = mapping.get((session, i), [])
            if (session, i) in texts and not (set(dias) & hide):
                role, text = texts[(session, i)]
                kept.append(exchanges.TurnText(role, text, i))
        delete += parts
        units_left = exchanges.units(kept)
        ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{parts[0].id}/hidden/{u.part}"))
               for u in units_left]  # fmt: skip
        add += unit_records(who, m.get("transcript", ""), session, units_left, m, ids)
    return delete, add


def items_at(sel: ar.Selection, tau: float, config: ar.HookConfig) -> list:
    """What the hook would inject at threshold ``tau`` (same order, item limit and budget)."""
    over = [p for p in sel.picked if p.relevance >= tau][: config.max_items]
    kept = ar._pack([(p.record, p.record.content.strip()) for p in over], config.prompt_tokens)
    return over[: len(kept)]


def run_abstain(store: SessionStore, questions: list, default: ar.HookConfig) -> dict:
    """The threshold curve (see the module docstring), and the default threshold's point
    checked through ``select_for_prompt`` itself."""
    answer_rel, hidden_max, unrelated_max = [], [], []
    sids = list(store.maps)
    t0 = time.perf_counter()
    by_conv: dict[str, list] = {}
    for q in questions:
        by_conv.setdefault(q["sid"], []).append(q)
    checked = {"silent": 0, "evidence": 0}
    for sid, qs in by_conv.items():
        units = store.units_of(sid)
        other = store.who[sids[(sids.index(sid) + 1) % len(sids)]]
        for q in qs:
            sel = ask(store.svc, store.who[sid], q["text"], SCAN_CONFIG)
            answer_rel.append((sel, q["rel"], store.maps[sid]))
            real = ask(store.svc, store.who[sid], q["text"], default)
            checked["evidence"] += bool(set(ranked_dia(real, store.maps[sid])) & q["rel"])
            unrelated_max.append(max((p.relevance for p in
                                      ask(store.svc, other, q["text"], SCAN_CONFIG).picked),
                                     default=0.0))  # fmt: skip
            gone, rebuilt = hidden_changes(store, sid, units, q["rel"])
            store.engine.apply(delete=[r.id for r in gone], add=rebuilt)
            try:
                hsel = ask(store.svc, store.who[sid], q["text"], SCAN_CONFIG)
                hidden_max.append(max((p.relevance for p in hsel.picked), default=0.0))
                checked["silent"] += not ask(store.svc, store.who[sid], q["text"], default).picked
            finally:
                store.engine.apply(delete=[r.id for r in rebuilt], add=gone)
    curve = []
    n = len(questions)
    for tau in THRESHOLDS:
        cfg = default.model_copy(update={"threshold": tau})
        ev = sum(bool(set(ranked_dia(ar.Selection(picked=items_at(sel, tau, cfg)), mp)) & rel)
                 for sel, rel, mp in answer_rel)  # fmt: skip
        curve.append({"threshold": tau, "silent": round(sum(m < tau for m in hidden_max) / n, 4),
                      "evidence": round(ev / n, 4),
                      "unrelated_silent": round(sum(m < tau for m in unrelated_max) / n, 4)})  # fmt: skip
    took = time.perf_counter() - t0
    return {"curve": curve, "questions": n, "seconds": round(took, 1),
            "default": {"threshold": default.threshold, "silent": round(checked["silent"] / n, 4),
                        "evidence": round(checked["evidence"] / n, 4)}}  # fmt: skip


def load_wrappers(path: str | None) -> list[str]:
    wrappers = json.loads(Path(path or DEFAULT_WRAPPERS).read_text(encoding="utf-8"))
    if not wrappers or not all(isinstance(w, str) and "{question}" in w for w in wrappers):
        raise SystemExit("long prompts: a JSON list of strings, each with a {question} placeholder")
    return wrappers


def wrap(question: str, qid: str, wrappers: list[str]) -> str:
    w = wrappers[random.Random(qid).randrange(len(wrappers))]
    return w.replace("{question}", question)


def locomo_questions(data: list[dict], helpers) -> list[dict]:
    """Every LoCoMo question with evidence in its conversation: qid, sid (sample), text, rel
    (evidence turn ids), cat (category)."""
    locomo_sessions, _date, evidence_ids = helpers
    out = []
    for sample in data:
        known = {t["dia_id"] for _, _, turns in locomo_sessions(sample["conversation"])
                 for t in turns}  # fmt: skip
        for i, qa in enumerate(sample.get("qa", [])):
            rel = evidence_ids(qa.get("evidence", []), known)
            if rel and qa.get("question"):
                out.append({"qid": f"{sample['sample_id']}#{i}", "sid": sample["sample_id"],
                            "text": qa["question"], "rel": rel,
                            "cat": str(qa.get("category"))})  # fmt: skip
    return out


def run(args, data, embedder, helpers, summarize, format_table, categories) -> dict:
    """--via-sessions (with --long-prompts / --abstain): prints tables, returns the payload."""
    locomo_sessions, locomo_date, evidence_ids = helpers
    questions = locomo_questions(data, helpers)
    if args.limit:
        questions = questions[: args.limit]
    wrappers = load_wrappers(args.long_prompts) if args.long_prompts is not None else None
    payload: dict = {}
    with tempfile.TemporaryDirectory(prefix="pm-bench-sessions-") as tmp:
        store = SessionStore(data, embedder, Path(tmp) / "store", Path(tmp) / "transcripts",
                             (locomo_sessions, locomo_date))  # fmt: skip
        try:
            runs = {"via sessions": lambda q: q["text"]}
            if wrappers:
                runs["long prompts"] = lambda q: wrap(q["text"], q["qid"], wrappers)
            for label, text_of in runs.items():
                t0 = time.perf_counter()
                rows = []
                for q in questions:
                    sel = ask(store.svc, store.who[q["sid"]], text_of(q), RANK_CONFIG)
                    units = ranked_units(sel, store.maps[q["sid"]])
                    rows.append((q["qid"], q["cat"], unit_metrics(units, q["rel"])))
                ms = 1000 * (time.perf_counter() - t0) / max(1, len(questions))
                table = [(f"{c} {categories.get(int(c), '')}", summarize(rows, {c}))
                         for c in sorted({r[1] for r in rows}) if c.isdigit()]  # fmt: skip
                headline = summarize(rows, {"1", "2", "3", "4"})
                table.append(("all (1-4)", headline))
                print(format_table(f"LoCoMo, {label} (select_for_prompt, threshold 0)", table))
                print(f"  {ms:.1f} ms/question")
                payload[label] = {**headline, "ms_per_question": round(ms, 1)}
            if args.abstain:
                answerable = [q for q in questions if q["cat"] in {"1", "2", "3", "4"}]
                res = run_abstain(store, answerable, ar.HookConfig())
                payload["abstain"] = res
                print(f"noise control over {res['questions']} questions ({res['seconds']}s): "
                      "threshold, silent with the evidence hidden, evidence injected, silent "
                      "for another conversation's questions")  # fmt: skip
                for row in res["curve"]:
                    print(f"  {row['threshold']:.2f}  silent {row['silent']:.3f}  evidence "
                          f"{row['evidence']:.3f}  unrelated-silent {row['unrelated_silent']:.3f}")  # fmt: skip
                d = res["default"]
                print(f"  default threshold {d['threshold']} through select_for_prompt: silent "
                      f"{d['silent']:.3f}, evidence {d['evidence']:.3f}")  # fmt: skip
        finally:
            store.close()
    return payload
