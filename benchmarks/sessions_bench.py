"""LoCoMo through the session indexer and the UserPromptSubmit hook's own selection code.

``python benchmarks/relevance.py locomo FILE --via-sessions [--long-prompts [WRAPPERS]] [--abstain]``

1. Each conversation becomes Claude Code transcripts, one per session, with its real date
   (``speaker_a`` speaks as the user, ``speaker_b`` as the assistant; a message's text is
   ``Name: text``, as a chat bridge writes it, and a shared image its caption in brackets), in a
   project of its own (``cwd`` ``/locomo/<sample>``).
2. The session indexer (``server/service/sessions.py``) indexes them into a fresh store.
3. Every question with evidence is asked through ``autorecall.select_for_prompt`` (the hook's
   code) with threshold 0, so this measures the ranking; evidence recall@k as the direct
   benchmark computes it, which runs in the same process on the same data for comparison.
``--long-prompts``: each question is also asked wrapped in a 100-200-word prompt (pasted
output and instructions; ``benchmarks/data/long_prompts.json`` by default), recall compared
with the bare question.
``--abstain``: the noise control. For every question the store is changed as if its evidence
turns had never been said (the turns deleted, the turns whose context held them rebuilt without
them), the hook's selection asked, and the change undone. Reported for every threshold:
``silent`` (share of those questions where nothing clears it), ``evidence`` (share of answerable
questions, store intact, where an evidence turn is among what the hook injects: budget and item
limit applied) and ``unrelated_silent`` (questions asked of another conversation's agent).
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.metrics import query_metrics
from ingest.turns import turn_context
from retrieval.engine import Engine
from retrieval.records import Kind, RecordFilter
from server.service import autorecall as ar
from server.service.identity import Identity, identity_fields
from server.service.memory import MemoryService
from server.service.sessions import CONTEXT_SPEC, SessionIndexer, turn_date

DEFAULT_WRAPPERS = Path(__file__).resolve().parent / "data" / "long_prompts.json"
THRESHOLDS = [round(0.40 + 0.02 * i, 2) for i in range(36)]  # 0.40 … 1.10


def transcripts(sample: dict, folder: Path, locomo_sessions, locomo_date) -> dict:
    """Write one Claude Code transcript per session; {(session id, turn index): dia_id}."""
    conv = sample["conversation"]
    sid = sample["sample_id"]
    role = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    mapping = {}
    for n, date, turns in locomo_sessions(conv):
        session = f"{sid}-s{n}"
        start = locomo_date(date)
        path = folder / sid / f"{session}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines, parent = [], None
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
            mapping[(session, i)] = turn["dia_id"]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return mapping


def who_of(sample_id: str) -> Identity:
    return Identity(**identity_fields({}, Path(f"/locomo/{sample_id}")))


def ranked_dia(sel: ar.Selection, mapping: dict) -> list[str]:
    out = []
    for p in sel.picked:
        m = p.record.metadata
        dia = mapping.get((m.get("session"), m.get("turn")))
        if dia:
            out.append(dia)
    return out


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
        self.maps: dict[str, dict] = {}
        self.who: dict[str, Identity] = {}
        t0 = time.perf_counter()
        n = 0
        for sample in data:
            sid = sample["sample_id"]
            self.maps[sid] = transcripts(sample, folder, locomo_sessions, locomo_date)
            self.who[sid] = who_of(sid)
            for path in sorted((folder / sid).glob("*.jsonl")):
                n += self.indexer.index_file(self.who[sid], path, flush=True, final=True).added
        took = time.perf_counter() - t0
        cache = (f", cache hits {embedder.hits} misses {embedder.misses}"
                 if hasattr(embedder, "hits") else "")  # fmt: skip
        print(f"indexed {n} turns from {sum(len(m) for m in self.maps.values())} LoCoMo turns "
              f"through transcripts in {took:.1f}s{cache}", flush=True)  # fmt: skip

    def close(self) -> None:
        self.engine.close()

    def records_of(self, sid: str) -> dict:
        """{dia_id: record} of one conversation."""
        who = self.who[sid]
        f = RecordFilter(buckets=[who.bucket("private")], kinds=[Kind.turn])
        inverse = {v: k for k, v in self.maps[sid].items()}
        out = {}
        for rec in self.svc.store.list(f):
            key = (rec.metadata.get("session"), rec.metadata.get("turn"))
            dia = self.maps[sid].get(key)
            if dia is not None and key == inverse.get(dia):
                out[dia] = rec
        return out


def hidden_changes(recs: dict, hide: set[str]):
    """(ids to delete, records to replace) for a store that never saw the ``hide`` turns: the
    turns whose context (two before, one after) held a hidden turn get it rebuilt without them."""
    by_session: dict[str, list] = {}
    for rec in recs.values():
        by_session.setdefault(rec.metadata["session"], []).append(rec)
    replace = []
    for rows in by_session.values():
        rows.sort(key=lambda r: r.metadata["turn"])
        if not any(r.metadata.get("_dia") in hide for r in rows):
            continue
        kept = [r for r in rows if r.metadata["_dia"] not in hide]
        window = [{"speaker": r.metadata["role"], "text": r.content} for r in kept]
        for j, r in enumerate(kept):
            _, date = turn_date(r.metadata.get("timestamp"))
            ctx = turn_context(window, j, date, CONTEXT_SPEC)
            if ctx != r.context:
                new = r.model_copy(update={"context": ctx})
                new.content_hash = new.current_hash()
                replace.append(new)
    delete = [recs[d].id for d in hide if d in recs]
    return delete, replace


def _strip(rec):
    rec = rec.model_copy(deep=True)
    rec.metadata.pop("_dia", None)
    rec.content_hash = rec.current_hash()
    return rec


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
        recs = store.records_of(sid)
        for dia, rec in recs.items():
            rec.metadata["_dia"] = dia
        other = store.who[sids[(sids.index(sid) + 1) % len(sids)]]
        for q in qs:
            sel = ask(store.svc, store.who[sid], q["text"], SCAN_CONFIG)
            answer_rel.append((sel, q["rel"], store.maps[sid]))
            real = ask(store.svc, store.who[sid], q["text"], default)
            checked["evidence"] += bool(set(ranked_dia(real, store.maps[sid])) & q["rel"])
            unrelated_max.append(max((p.relevance for p in
                                      ask(store.svc, other, q["text"], SCAN_CONFIG).picked),
                                     default=0.0))  # fmt: skip
            delete, replace = hidden_changes(recs, q["rel"])
            gone = [recs[d] for d in q["rel"] if d in recs]
            store.engine.apply(delete=delete, replace=[_strip(r) for r in replace])
            try:
                hsel = ask(store.svc, store.who[sid], q["text"], SCAN_CONFIG)
                hidden_max.append(max((p.relevance for p in hsel.picked), default=0.0))
                checked["silent"] += not ask(store.svc, store.who[sid], q["text"], default).picked
            finally:
                store.engine.apply(add=[_strip(r) for r in gone],
                                   replace=[_strip(recs[r.metadata["_dia"]]) for r in replace])  # fmt: skip
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


def run(args, data, embedder, helpers, summarize, format_table, categories) -> dict:
    """--via-sessions (with --long-prompts / --abstain): prints tables, returns the payload."""
    locomo_sessions, locomo_date, evidence_ids = helpers
    questions = []
    for sample in data:
        known = {t["dia_id"] for _, _, turns in locomo_sessions(sample["conversation"])
                 for t in turns}  # fmt: skip
        for i, qa in enumerate(sample.get("qa", [])):
            rel = evidence_ids(qa.get("evidence", []), known)
            if rel and qa.get("question"):
                questions.append({"qid": f"{sample['sample_id']}#{i}", "sid": sample["sample_id"],
                                  "text": qa["question"], "rel": rel,
                                  "cat": str(qa.get("category"))})  # fmt: skip
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
                    rows.append((q["qid"], q["cat"], query_metrics(ranked_dia(sel, store.maps[q["sid"]]), q["rel"])))  # fmt: skip
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
