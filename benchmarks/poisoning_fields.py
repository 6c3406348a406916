"""False positives of the injection scan per field a record can hold, on real data.

The write policy judges every string of a record (its content, its context, every metadata
string; the graph's names and lesson fields through ``screen_value``), so a benign value of any
of them can mark a record suspicious, and a suspicious record is never injected. Contents are
measured by ``benchmarks/poisoning.py``'s corpora; here each other field, from real sources:

- ``exchange context``, ``exchange metadata`` and ``exchange content``: the records the session
  indexer stores (``server/service/indexing/sessions.py``, the real indexer into a temporary store) from
  LongMemEval_S sessions (the generic JSONL, their real dates), LoCoMo dev conversations
  (Claude Code transcripts with their real dates) and the real Claude Code transcripts under
  ``tests/data/transcripts`` (their context is the exchange's timestamp, with the prompt for a
  later part; the metadata holds session ids, paths, branches, tool names), each also per
  source (``by_source``); ``benchmarks/poisoning.py`` passes the sessions and conversations of
  the report split, which the injection model was neither fit nor tuned on;
- ``chunk context`` (``path: title``), ``title`` and ``file name``: a real repository ingested
  as ``pattern-memory ingest`` chunks it (SymPy at the first SWE-bench Lite instance's commit,
  and this repository's files of the report split), SciFact paper titles (report split) and
  ActiveMQ Jira summaries;
- ``tag``: the ActiveMQ Jira components, types and resolutions;
- ``name``: graph entity and lesson names: CoSQA function names and Defects4J failing tests;
- ``error``: a lesson's error type and message (Defects4J traces' first line).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ingest.workspace.chunkers import chunk_text
from ingest.workspace.pipeline import IngestOptions

Field = dict[str, list[tuple[str, str]]]  # field -> [(id, text)]
FIELDS = ("exchange context", "exchange metadata", "exchange content", "chunk context", "title",
          "file name", "tag", "name", "error")  # fmt: skip
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"
LME_SESSIONS = 300


def _strings(value, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON-like value (keys too), with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}.{k}:key", str(k)
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def exchanges(data: Path, transcripts: Path = TRANSCRIPTS, sessions: list[dict] | None = None,
              conversations: set[str] | None = None) -> Field:  # fmt: skip
    """The session indexer's records from real transcripts: context, metadata strings, content;
    ``sessions``: the LongMemEval_S sessions to index (their ids; default: the first
    :data:`LME_SESSIONS` of the questions' haystacks), ``conversations``: the LoCoMo sample ids
    (default: all)."""
    from benchmarks import longmemeval as lme
    from benchmarks import sessions_bench as sb
    from benchmarks.harness.data import locomo_date, locomo_sessions
    from retrieval.embedding.embedder import HashEmbedder
    from retrieval.engine import Engine
    from retrieval.records import Kind, RecordFilter
    from server.service.core.identity import Identity
    from server.service.indexing.sessions import SessionIndexer
    from server.service.memories.memory import MemoryService

    out: Field = {"exchange context": [], "exchange metadata": [], "exchange content": []}
    with tempfile.TemporaryDirectory(prefix="pm-fields-") as tmp:
        folder = Path(tmp)
        engine = Engine(folder / "store", HashEmbedder())
        try:
            indexer = SessionIndexer(MemoryService(engine))
            whos: list[tuple[str, Identity]] = []  # (source, identity)
            wanted = None if sessions is None else {s["session_id"] for s in sessions}
            qs, turns = _lme_haystack(data / "longmemeval_s", LME_SESSIONS, wanted)
            for q in qs:
                who = lme.who_of(q)
                indexer.index_file(who, lme.write_transcript(q, turns, folder), flush=True,
                                   final=True)  # fmt: skip
                whos.append(("lme", who))
            locomo = json.loads((data / "locomo" / "locomo_dev.json").read_text("utf-8"))
            for sample in locomo:
                if conversations is not None and sample["sample_id"] not in conversations:
                    continue
                sid = sample["sample_id"]
                sb.transcripts(sample, folder / "locomo", locomo_sessions, locomo_date)
                whos.append(("locomo", sb.who_of(sid)))
                for path in sorted((folder / "locomo" / sid).glob("*.jsonl")):
                    indexer.index_file(whos[-1][1], path, flush=True, final=True)
            for path in sorted(transcripts.glob("*.jsonl")) if transcripts.is_dir() else []:
                who = Identity(project_id=f"cc-{path.stem}", agent_id="agent")
                indexer.index_file(who, path, flush=True, final=True)
                whos.append(("cc", who))
            source = {w.bucket("private"): src for src, w in whos}
            for rec in engine.store.list(RecordFilter(buckets=list(source), kinds=[Kind.turn])):
                meta = rec.metadata
                tag = f"{source[rec.bucket]}:{meta.get('session')}:{meta.get('turn')}"
                if rec.context:
                    out["exchange context"].append((tag, rec.context))
                out["exchange content"].append((tag, rec.content))
                meta = {k: v for k, v in meta.items() if k != "suspicious"}  # the policy's
                out["exchange metadata"] += [(f"{tag}{where}", s)
                                             for where, s in _strings(meta) if s]  # fmt: skip
        finally:
            engine.close()
    return out


def _lme_haystack(folder: Path, n_sessions: int, wanted: set[str] | None = None):
    """LongMemEval_S questions whose haystacks hold the first ``n_sessions`` distinct sessions
    (``wanted``: all of these sessions instead), each question's haystack cut to the sessions
    not taken yet (each session indexed once, with its date in that haystack)."""
    from benchmarks.harness.data import load_longmemeval

    qs, sessions = load_longmemeval(folder, 0)
    limit = n_sessions if wanted is None else len(wanted)
    taken: set[str] = set()
    out = []
    for q in qs:
        keep = [(s, d) for s, d in zip(q["haystack_session_ids"], q["haystack_dates"],
                                       strict=True)
                if s not in taken and (wanted is None or s in wanted)]  # fmt: skip
        keep = keep[: max(0, limit - len(taken))]
        if not keep:
            if len(taken) >= limit:
                break
            continue
        taken.update(s for s, _ in keep)
        out.append({**q, "haystack_session_ids": [s for s, _ in keep],
                    "haystack_dates": [d for _, d in keep]})  # fmt: skip
    return out, sessions


def repository_files(data: Path, repo: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of SymPy at the first SWE-bench Lite instance's commit, then ``repo``."""
    folder = data / "swebench_lite_sympy"
    if (folder / "instances.jsonl").is_file():
        first = json.loads((folder / "instances.jsonl").open(encoding="utf-8").readline())
        want = {sha: path for path, sha in first["files"].items()}
        with gzip.open(folder / "blobs.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                blob = json.loads(line)
                if blob["sha"] in want:
                    yield f"sympy/{want[blob['sha']]}", blob["text"]
    from ingest.workspace.walker import Walker, decode_text

    opts = IngestOptions()
    for cand in Walker(repo, max_file_bytes=opts.max_file_bytes).walk().files:
        text = decode_text(cand.source.read_bytes())
        if text is not None:
            yield cand.rel, text


def documents(data: Path, repo: Path, exclude: frozenset[str]) -> Field:
    """Chunk contexts, titles and file names of ingested repositories; SciFact and Jira titles;
    Jira components, types and resolutions as tags; CoSQA and Defects4J names; error lines."""
    from benchmarks.judge import split_of

    out: Field = {k: [] for k in ("chunk context", "title", "file name", "tag", "name", "error")}
    opts = IngestOptions()
    for rel_path, text in repository_files(data, repo):
        if rel_path in exclude:
            continue
        if not rel_path.startswith("sympy/") and split_of(f"repo:{rel_path}:") != "report":
            continue  # this repository's file the injection model was fit or tuned on
        out["file name"].append((rel_path, rel_path))
        for c in chunk_text(rel_path, text, max_chars=opts.max_chars, min_chars=opts.min_chars,
                            overlap=opts.overlap, max_words=opts.max_words):  # fmt: skip
            where = f"{rel_path}:{c.start_line}"
            out["chunk context"].append((where, f"{rel_path}: {c.title}" if c.title else rel_path))
            if c.title:
                out["title"].append((where, c.title))
    for doc in _jsonl(data / "scifact" / "corpus.jsonl"):
        if doc.get("title") and split_of(f"scifact:{doc['_id']}") == "report":
            out["title"].append((f"scifact:{doc['_id']}", doc["title"]))
    tags: set[str] = set()
    for doc in _jsonl(data / "jira_activemq" / "beir" / "corpus.jsonl"):
        out["title"].append((f"jira:{doc['_id']}", doc.get("title") or ""))
        meta = doc.get("metadata") or {}
        tags.update([*meta.get("components", []), meta.get("type") or "",
                     meta.get("resolution") or ""])  # fmt: skip
    out["tag"] = [(f"jira-tag:{t}", t) for t in sorted(tags) if t]
    names: set[str] = set()
    for doc in _jsonl(data / "cosqa" / "beir" / "corpus.jsonl"):
        first = (doc.get("text") or "").split("(", 1)[0].split()
        if len(first) >= 2 and first[0] == "def":
            names.add(first[1])
    for bug in _jsonl(data / "defects4j" / "defects4j_errors_fixes.jsonl"):
        for t in bug.get("trigger_tests", []):
            names.add(t["test"])
            line = (t.get("trace") or "").strip().splitlines()[:1]
            if line:
                out["error"].append((f"d4j:{bug['project']}-{bug['bug_id']}", line[0][:500]))
    out["name"] = [(f"name:{n}", n) for n in sorted(names)]
    return out


def _jsonl(path: Path) -> Iterator[dict]:
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def measure(judge, fields: Field, show: int = 5) -> dict:
    """{field: n, flagged, rate, examples}: each value judged as the write policy judges one
    string of a record (the rules, then the model for what they pass); an exchange's field
    also per source (``by_source``: LongMemEval, LoCoMo, Claude Code)."""
    out = {}
    for name in FIELDS:
        items = list(dict.fromkeys(fields.get(name, [])))
        if name == "exchange content":  # a record's content
            verdicts = judge.many([(text, "") for _, text in items])
        else:  # a field of a record, read as the policy reads a context or a metadata value
            verdicts = judge.many([("", text) for _, text in items])
        flagged = [(tid, text, v[0]) for (tid, text), v in zip(items, verdicts, strict=True)
                   if v[0]]  # fmt: skip
        out[name] = {"n": len(items), "flagged": len(flagged),
                     "rate": round(len(flagged) / max(1, len(items)), 5),
                     "examples": [{"id": t, "text": x[:160], "reason": r}
                                  for t, x, r in flagged[:show]]}  # fmt: skip
        if name.startswith("exchange"):
            n, hit = Counter(t.split(":")[0] for t, _ in items), Counter()
            hit.update(t.split(":")[0] for t, _, _ in flagged)
            out[name]["by_source"] = {src: {"n": n[src], "flagged": hit[src],
                                            "rate": round(hit[src] / n[src], 5)}
                                      for src in sorted(n)}  # fmt: skip
    return out


def print_fields(rows: dict, target: float) -> None:
    print(f"\n{'field':<22}{'values':>9}{'flagged':>9}{'rate':>9}   target ≤ {target:.1%}")
    for name, r in rows.items():
        print(f"{name:<22}{r['n']:>9}{r['flagged']:>9}{r['rate']:>9.2%}")
        for src, b in r.get("by_source", {}).items():
            print(f"  {src:<20}{b['n']:>9}{b['flagged']:>9}{b['rate']:>9.2%}")
        for ex in r["examples"][:3]:
            print(f"    {ex['id']}: {' '.join(ex['text'].split())[:90]!r}")
