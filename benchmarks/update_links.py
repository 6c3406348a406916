"""Update links: how often ``remember`` links a memory to an older one, right and wrong.

    python benchmarks/update_links.py ../shared/data [--json OUT]

- **False links**: 200 unrelated pairs of high similarity written from the dev data, each pair
  in a project of its own (team scope), the older written first:
  100 pairs of LoCoMo dev turns by the two speakers of one conversation (``Speaker: text``,
  the most similar cross-speaker pairs of each conversation, 20 per conversation) and 100 pairs
  of first-person user turns of LongMemEval_S written as two people's memories (one agent
  each; the most similar pairs of user turns of at most 60 words that state a preference or
  a fact about the user, from the haystacks of different questions).
- **True links**: the hand-written pairs of ``benchmarks/data/update_pairs.json`` (an older
  memory and a newer one stating the same subject with another value).

Every memory is written through ``MemoryService.remember`` with the real model; a pair is
linked when the newer one's result lists the older in ``supersedes``. The curve beside it
replays the rule (:func:`server.service.supersede.updates`) at other cosine thresholds, and
``same_author_link_rate`` replays it on the LongMemEval pairs as if one agent had written both
(what the rule does without the author to tell two people apart).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.relevance import make_embedder  # noqa: E402
from retrieval.engine import Engine  # noqa: E402
from retrieval.records import Record, Scope  # noqa: E402
from server.service import supersede  # noqa: E402
from server.service.identity import Identity  # noqa: E402
from server.service.memory import MemoryService  # noqa: E402
from server.service.models import MemoryInput  # noqa: E402

PAIRS = ROOT / "benchmarks" / "data" / "update_pairs.json"
ABOUT_ME = re.compile(r"\b(?:I (?:prefer|like|love|enjoy|usually|always|have|own|live|work)|"
                      r"my (?:favorite|favourite))\b")  # fmt: skip
THRESHOLDS = [0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9]


def _top_pairs(emb, left: list[str], right: list[str], n: int, used: set) -> list[tuple]:
    a, b = emb.embed_documents(left), emb.embed_documents(right)
    sims = np.asarray(a) @ np.asarray(b).T
    out = []
    for flat in np.argsort(-sims, axis=None):
        i, j = divmod(int(flat), sims.shape[1])
        if left[i] in used or right[j] in used or left[i] == right[j]:
            continue
        used.update((left[i], right[j]))
        out.append((left[i], right[j], float(sims[i, j])))
        if len(out) == n:
            break
    return out


def locomo_pairs(data: Path, emb, per_conv: int = 20) -> list[dict]:
    out = []
    for conv in json.loads((data / "locomo" / "locomo_dev.json").read_text(encoding="utf-8")):
        c = conv["conversation"]
        turns = [t for k, v in c.items() if re.fullmatch(r"session_\d+", k) for t in v]
        by = {s: [f"{s}: {t['text']}" for t in turns if t["speaker"] == s]
              for s in (c["speaker_a"], c["speaker_b"])}  # fmt: skip
        a, b = by[c["speaker_a"]], by[c["speaker_b"]]
        for x, y, cos in _top_pairs(emb, a, b, per_conv, set()):
            out.append({"old": x, "new": y, "old_agent": "locomo", "new_agent": "locomo",
                        "set": "locomo", "cos": cos})  # fmt: skip
    return out


def longmemeval_pairs(data: Path, emb, n: int = 100) -> list[dict]:
    folder = data / "longmemeval_s"
    qs = [json.loads(line) for line in open(folder / "questions.jsonl", encoding="utf-8")][:60]
    owner = {s: q["question_id"] for q in qs for s in q["haystack_session_ids"]}
    texts: dict[str, list[str]] = {}
    with gzip.open(folder / "sessions.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            if s["session_id"] not in owner:
                continue
            for t in s["turns"]:
                words = t["content"].split()
                if t["role"] == "user" and len(words) <= 60 and ABOUT_ME.search(t["content"]):
                    texts.setdefault(owner[s["session_id"]], []).append(" ".join(words))
    users = sorted(texts)
    half = len(users) // 2
    left = [(u, t) for u in users[:half] for t in texts[u][:10]]
    right = [(u, t) for u in users[half:] for t in texts[u][:10]]
    pairs = _top_pairs(emb, [t for _, t in left], [t for _, t in right], n, set())
    return [{"old": x, "new": y, "old_agent": "user-a", "new_agent": "user-b",
             "set": "longmemeval", "cos": cos} for x, y, cos in pairs]  # fmt: skip


def run_pairs(svc: MemoryService, pairs: list[dict], tag: str) -> list[dict]:
    for i, p in enumerate(pairs):
        project = f"{tag}-{i}"
        old = svc.remember(Identity(project_id=project, agent_id=p["old_agent"]),
                           MemoryInput(content=p["old"], scope="team"))  # fmt: skip
        new = svc.remember(Identity(project_id=project, agent_id=p["new_agent"]),
                           MemoryInput(content=p["new"], scope="team"))  # fmt: skip
        p["linked"] = any(s.memoryId == old.memoryId for s in new.supersedes)
        got = svc.engine.nearest(svc.engine.embed([_rec(p["new"], p["new_agent"])])
                                 ["x"], _filter(new, svc), 2)  # fmt: skip
        p["similarity"] = max((c for r, c in got if r == old.memoryId), default=0.0)
    return pairs


def _rec(text: str, agent: str) -> Record:
    return Record(id="x", project_id="p", agent_id=agent, scope=Scope.team, content=text)


def _filter(result, svc):
    from retrieval.records import Kind, RecordFilter

    rec = svc.store.get([result.memoryId])[result.memoryId]
    return RecordFilter(buckets=[rec.bucket], kinds=[Kind.memory])


def curve(pairs: list[dict]) -> dict[str, float]:
    out = {}
    for th in THRESHOLDS:
        hits = [supersede.updates(_rec(p["new"], p["new_agent"]), _rec(p["old"], p["old_agent"]),
                                  p["similarity"], th) for p in pairs]  # fmt: skip
        out[f"{th:.2f}"] = round(sum(hits) / max(1, len(pairs)), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    emb = make_embedder()
    false = locomo_pairs(Path(args.data), emb) + longmemeval_pairs(Path(args.data), emb)
    true = [{"old": a, "new": b, "old_agent": "agent", "new_agent": "agent", "set": "true"}
            for a, b in json.loads(PAIRS.read_text(encoding="utf-8"))["pairs"]]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pm-links-") as tmp:
        engine = Engine(Path(tmp) / "store", emb)
        try:
            svc = MemoryService(engine)
            run_pairs(svc, false, "false")
            run_pairs(svc, true, "true")
        finally:
            engine.close()
    res = {
        "false_pairs": len(false),
        "false_links": sum(p["linked"] for p in false),
        "false_link_rate": round(sum(p["linked"] for p in false) / len(false), 4),
        "false_pairs_mean_cosine": round(float(np.mean([p["cos"] for p in false])), 4),
        "true_pairs": len(true),
        "true_links": sum(p["linked"] for p in true),
        "true_link_rate": round(sum(p["linked"] for p in true) / len(true), 4),
        "threshold": supersede.DETECT_MIN_COS,
        "false_link_rate_by_threshold": curve(false),
        "true_link_rate_by_threshold": curve(true),
        # the LongMemEval pairs again as one person's memories (one agent): the rule then rests
        # on the similarity and the names alone
        "same_author_link_rate": curve(
            [dict(p, old_agent="one", new_agent="one") for p in false if p["set"] == "longmemeval"]
        ),
        "false_linked": [
            {k: p[k] for k in ("set", "old", "new", "similarity")} for p in false if p["linked"]
        ],  # fmt: skip
        "true_missed": [
            {k: p[k] for k in ("old", "new", "similarity")} for p in true if not p["linked"]
        ],  # fmt: skip
    }
    print(json.dumps({k: v for k, v in res.items() if not k.endswith(("linked", "missed"))},
                     indent=1))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
