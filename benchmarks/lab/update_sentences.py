"""Could update links between past sessions be found from their sentences?

    python -m benchmarks run update_sentences ../shared/data/longmemeval_s [--json OUT]

A LongMemEval knowledge-update question's answer sessions state one subject's old value and
its new one ("I currently have three bikes" ... "I'll actually have four bikes"). If the
session indexer linked the newer exchange to the older one, as a ``supersede`` call links
memories (``server/service/updating/supersede.py``), the newest would rank first for every question
about it.
Whole exchanges are too far apart for that (half of the true pairs are not among each other's
six nearest), so this asks the narrower question: do the *sentences* that state the values
find each other?

Per question, every first-person sentence of at least four words of the haystack's user turns
(split where the session indexer splits sentences) is embedded with the real model. The *true
pair* is the closest pair of sentences from the answer turns (``answer_turns``) of two different
answer sessions; every other pair of sentences from two different sessions is a pair a detector
would link wrongly. For each cosine threshold the table gives the share of questions whose true
pair reaches it and the wrong pairs that reach it per haystack, once by cosine alone and once
with the detection rule's spirit at sentence level (the two share an uncommon word, ``wordfreq``
Zipf below :data:`UNCOMMON`, and are not the same text).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.data import load_longmemeval  # noqa: E402
from benchmarks.harness.embed_cache import make_embedder  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from ingest.sessions.exchanges import SENTENCE  # noqa: E402

THRESHOLDS = [0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9]
UNCOMMON = 4.5  # Zipf frequency below which a word names a subject ("bikes", "Hilton")
MIN_WORDS = 4
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me)\b")
WORD = re.compile(r"[a-z][a-z'-]+")


def sentences(q: dict, sessions: dict) -> list[tuple[str, int, str]]:
    """(session id, turn index, sentence) of the first-person sentences of the user turns."""
    out = []
    for sid in q["haystack_session_ids"]:
        for i, turn in enumerate(sessions[sid]):
            if turn["role"] != "user":
                continue
            for s in SENTENCE.split(turn["content"]):
                s = s.strip()
                if len(s.split()) >= MIN_WORDS and FIRST_PERSON.search(s):
                    out.append((sid, i, s))
    return out


def uncommon(text: str) -> frozenset[str]:
    from wordfreq import zipf_frequency

    return frozenset(w for w in WORD.findall(text.lower()) if zipf_frequency(w, "en") < UNCOMMON)


def pairs(q: dict, sents: list, sims: np.ndarray, rule: bool) -> tuple[float | None, np.ndarray]:
    """Of ``sents`` and their cosines one to another (``sims``): (the true pair's cosine: None
    without answer sentences in two sessions, -1 when no pair of them passes the rule; the
    cosines of every other cross-session pair that passes it)."""
    answer = {(s, i) for s, i in q["answer_turns"]}
    sid = np.array([s for s, _, _ in sents])
    is_answer = np.array([(s, i) in answer for s, i, _ in sents])
    keep = np.triu(sid[:, None] != sid[None, :], 1)
    if not (keep & is_answer[:, None] & is_answer[None, :]).any():
        return None, sims[keep]
    if rule:
        words = [uncommon(t) for _, _, t in sents]
        texts = [t.lower() for _, _, t in sents]
        for i, j in zip(*np.nonzero(keep), strict=True):
            if not words[i] & words[j] or texts[i] == texts[j]:
                keep[i, j] = False
    true = keep & is_answer[:, None] & is_answer[None, :]
    return (float(sims[true].max()) if true.any() else -1.0), sims[keep & ~true]


def table(rows: list[tuple[float | None, np.ndarray]]) -> list[dict]:
    out = []
    scored = [(t, o) for t, o in rows if t is not None]
    for th in THRESHOLDS:
        wrong = [int((o >= th).sum()) for _, o in scored]
        out.append({
            "threshold": th,
            "true_linked": round(float(np.mean([t >= th for t, _ in scored])), 3),
            "wrong_per_haystack_median": float(np.median(wrong)),
            "wrong_per_haystack_mean": round(float(np.mean(wrong)), 1),
        })  # fmt: skip
    return out


def run(path: Path) -> dict:
    qs, sessions = load_longmemeval(path, 0, ("knowledge-update",))
    emb = make_embedder()
    plain, ruled, counts = [], [], []
    for q in qs:
        sents = sentences(q, sessions)
        counts.append(len(sents))
        vecs = np.asarray(emb.embed_documents([t for _, _, t in sents]), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        sims = vecs @ vecs.T
        plain.append(pairs(q, sents, sims, rule=False))
        ruled.append(pairs(q, sents, sims, rule=True))
    found = np.array([t for t, _ in plain if t is not None])
    return {
        "questions": len(qs),
        "with_true_pair": int(len(found)),
        "sentences_per_haystack": round(float(np.mean(counts)), 1),
        "true_pair_cosine": {
            q: round(float(np.quantile(found, x)), 3)
            for q, x in (("min", 0), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("max", 1))
        },  # fmt: skip
        "cosine": table(plain),
        "cosine_and_uncommon_word": table(ruled),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", help="the LongMemEval_S folder")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    res = run(Path(args.path))
    print(
        f"{res['with_true_pair']} of {res['questions']} knowledge-update questions hold value "
        f"sentences in two answer sessions; true pairs' cosine {res['true_pair_cosine']}"
    )
    for name in ("cosine", "cosine_and_uncommon_word"):
        print(f"\n{name}\n threshold  true linked  wrong per haystack (median / mean)")
        for r in res[name]:
            print(
                f" {r['threshold']:9.2f}  {r['true_linked']:11.2f}  "
                f"{r['wrong_per_haystack_median']:6.0f} / {r['wrong_per_haystack_mean']}"
            )
    if args.json:
        write_json(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
