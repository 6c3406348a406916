"""The labelled sets the benchmarks read, as their files hold them: BEIR folders, LoCoMo
conversations and LongMemEval_S haystacks (``../shared/data``, never committed).

- BEIR layout: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``,
  ``qrels/<split>.tsv``;
- LoCoMo (``locomo10.json`` format): one conversation per sample, its sessions
  ``session_N`` with ``session_N_date_time``, questions with evidence turn ids (``D3:7``);
- LongMemEval_S: ``questions.jsonl`` and ``sessions.jsonl.gz`` (abstention questions, ids
  ending ``_abs``, are left out).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path


# ---------------------------------------------------------------------------- BEIR
def load_beir(folder: Path, split: str | None):
    corpus = [json.loads(line) for line in open(folder / "corpus.jsonl", encoding="utf-8")]
    queries = {}
    for line in open(folder / "queries.jsonl", encoding="utf-8"):
        q = json.loads(line)
        queries[str(q["_id"])] = q["text"]
    if split is None:
        split = "test" if (folder / "qrels" / "test.tsv").exists() else "train"
    qrels: dict[str, set[str]] = defaultdict(set)
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for row in reader:
            if len(row) >= 3 and float(row[2]) > 0:
                qrels[str(row[0])].add(str(row[1]))
    return corpus, queries, dict(qrels), split


# ---------------------------------------------------------------------------- LoCoMo
LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_DIA = re.compile(r"D\d+:\d+")


def locomo_date(text: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> datetime (None when unparseable)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except (ValueError, AttributeError):
        return None


def locomo_sessions(conv: dict) -> list[tuple[int, str, list[dict]]]:
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m.group(1)), conv.get(f"{key}_date_time", ""), turns))
    return sorted(out)


def locomo_now(sample: dict) -> datetime | None:
    """When a conversation's questions are asked: its last session's date."""
    sessions = locomo_sessions(sample["conversation"])
    return locomo_date(sessions[-1][1]) if sessions else None


def evidence_ids(evidence: Iterable[str], known: set[str]) -> set[str]:
    """Evidence turn ids, with malformed entries ("D8:6; D9:17") split and unknown ids dropped."""
    out = set()
    for ev in evidence or []:
        for part in _DIA.findall(str(ev)):
            if part in known:
                out.add(part)
    return out


# ---------------------------------------------------------------------------- LongMemEval
def load_longmemeval(
    folder: Path, limit: int = 0, types: Sequence[str] = ()
) -> tuple[list[dict], dict[str, list[dict]]]:
    qs = [json.loads(line) for line in open(folder / "questions.jsonl", encoding="utf-8")]
    qs = [q for q in qs if not q["question_id"].endswith("_abs") and q["answer_session_ids"]]
    if types:
        qs = [q for q in qs if q["question_type"] in types]
    if limit:
        qs = qs[:limit]
    need = {s for q in qs for s in q["haystack_session_ids"]}
    sessions = {}
    with gzip.open(folder / "sessions.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            s = json.loads(line)
            if s["session_id"] in need:
                sessions[s["session_id"]] = s["turns"]
    return qs, sessions


def session_date(text: str) -> datetime:
    """'2023/05/20 (Sat) 07:47' -> datetime (UTC)."""
    day, _, clock = text.partition(") ")
    return datetime.strptime(f"{day.split(' (')[0]} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)
