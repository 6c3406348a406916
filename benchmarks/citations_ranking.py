"""How much lower a stale item should rank: the stale factor measured on this repository's history
with the real model (``benchmarks/citations.py --ranking OUT`` runs it in the same clone).

For every commit pair of the status run (a span), at its old commit every function and method of at least three lines gets a
memory (its qualified name's words and its docstring's first sentence, or its first code lines)
citing its range; these are the distractors too. At the span's new commit, the functions whose cited
lines changed (truth from ``git diff``) and that still exist under the same name are split in
two halves, seeded:

- **twins**: a fresh memory about the same function is written at the new commit (its new
  docstring or code lines, citing its new range). Asked about the function, does the fresh twin
  rank above the stale memory? (The two are often near-duplicates: the lower one is dropped.)
- **alone**: no twin. The stale memory is the only one about the function: does it still reach
  the top 3?

Each question (the function's name words and, seeded half and half, its old or its new
docstring's first sentence) goes through ``recall`` (kinds=memory, limit 10) once per factor in
:data:`FACTORS`; the counts of all spans add up.
"""

from __future__ import annotations

import ast
import random
import re
import time
from pathlib import Path

FACTORS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.5)


def _words(name: str) -> str:
    parts = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.replace(".", " ").replace("_", " "))
    return " ".join(parts.split()).lower()


def describe(text: str) -> dict[str, tuple[int, int, str, str]]:
    """qualified name -> (start, end, description, docstring's first sentence)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    lines = text.split("\n")
    out = {}

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno
                name = f"{prefix}{child.name}"
                doc = (ast.get_docstring(child) or "").strip()
                first = re.split(r"(?<=[.:])\s", " ".join(doc.split()), maxsplit=1)[0][:200]
                body = " ".join(
                    " ".join(ln.split()) for ln in lines[child.body[0].lineno - 1 : end][:4]
                )[:240]
                what = first or body
                if end - start >= 2:
                    out[name] = (start, end, f"{_words(name)}: {what}", first)
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return out


def run_ranking(work: Path, pairs: list[tuple[str, str]], rng: random.Random) -> dict:
    """Every pair of the status run is one span (old -> new commit); the counts add up."""
    from server.service.core.runtime import Runtime

    env = {
        "PATTERN_HOME": str(work / "home-ranking"), "PATTERN_PROJECT_ID": "bench",
        "PATTERN_AGENT_ID": "bench-agent", "PATTERN_DISABLE_CONTENT_SCAN": "true",
    }  # fmt: skip
    totals: dict[float, dict[str, int]] = {f: {} for f in FACTORS}
    spans = []
    for i, (old, new) in enumerate(pairs):
        env["PATTERN_PROJECT_ID"] = f"bench-{i}"  # one project per span: no cross-talk
        rt = Runtime.start(env, cwd=work / "repo", model="now")
        try:
            spans.append(_span(rt, work / "repo", old, new, rng, totals))
        finally:
            rt.close()
        print(f"span {old[:8]} -> {new[:8]}: {spans[-1]}", flush=True)
    rows = []
    for factor, t in totals.items():
        rows.append({
            "factor": factor,
            "fresh_twin_wins": _ratio(t.get("wins", 0), t.get("twins", 0)),
            "fresh_twin_top3": _ratio(t.get("twin_top3", 0), t.get("twins", 0)),
            "stale_alone_top3": _ratio(t.get("top3", 0), t.get("alone", 0)),
            "stale_alone_fell_out_of_top3": _ratio(t.get("fell", 0), t.get("base_top3", 0)),
        })  # fmt: skip
        print(f"factor {factor}: {rows[-1]}", flush=True)
    return {"spans": spans, "rows": rows}


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _span(rt, repo: Path, old: str, new: str, rng: random.Random, totals: dict) -> dict:
    from benchmarks.citations_diff import git, parse_diff, truth
    from retrieval.cite import read_lines
    from server.service.core.models import RecallInput
    from server.service.memories.bulk import remember_bulk
    from server.service.recalling.recall import recall

    who = rt.identity
    git(repo, "checkout", "-q", "-f", old)
    units = {}
    for path in git(repo, "ls-files", "*.py").split():
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        for name, info in describe(text).items():
            units[(path, name)] = info
    diff = parse_diff(git(repo, "diff", "-U0", "--no-renames", "--no-color", old, new))
    keys = sorted(units)
    ids = {}
    for i in range(0, len(keys), 500):
        part = keys[i : i + 500]
        res = remember_bulk(rt.service, who, [
            {"content": units[k][2], "citations": [
                {"path": k[0], "startLine": units[k][0], "endLine": units[k][1]}]}
            for k in part
        ])  # fmt: skip
        ids.update(zip(part, res.memoryIds, strict=True))
    changed = []
    old_text: dict[str, list[str]] = {}
    for k in keys:
        lines = old_text.setdefault(k[0], read_lines((repo / k[0]).read_bytes()) or [])
        s, e = units[k][0], units[k][1]
        if truth(diff.get(k[0]), s, e, lines[s - 1 : e])[0] == "changed":
            changed.append(k)
    git(repo, "checkout", "-q", "-f", new)
    now_units = {}
    for path in {k[0] for k in changed}:
        p = repo / path
        if p.exists():
            for name, info in describe(p.read_text(encoding="utf-8", errors="replace")).items():
                now_units[(path, name)] = info
    changed = [k for k in changed if k in now_units]
    rng.shuffle(changed)
    twins, alone = changed[: len(changed) // 2], changed[len(changed) // 2 :]
    twin_ids = {}
    if twins:
        res = remember_bulk(rt.service, who, [
            {"content": now_units[k][2], "citations": [
                {"path": k[0], "startLine": now_units[k][0], "endLine": now_units[k][1]}]}
            for k in twins
        ])  # fmt: skip
        twin_ids = dict(zip(twins, res.memoryIds, strict=True))
    time.sleep(2.1)
    states = rt.citations.states(who, [ids[k] for k in changed])
    marked = sum(any(c.stale for c in states.get(ids[k], [])) for k in changed)
    # the question names the function and, for half of them (seeded), quotes the old
    # docstring, for the other half the new one: no side is favoured by the wording
    query = {
        k: f"{_words(k[1])} {(units[k] if rng.random() < 0.5 else now_units[k])[3]}".strip()
        for k in changed
    }

    def ask(k) -> list[str]:
        out = recall(rt.service, who, RecallInput(query=query[k], kinds=["memory"], limit=10))
        return [i.id for i in out.items]

    base_top3 = None
    for factor in FACTORS:
        rt.citations.stale_factor = factor
        t = totals[factor]
        for k in twins:
            pos = {rid: i for i, rid in enumerate(ask(k))}
            tw, st = pos.get(twin_ids[k], 99), pos.get(ids[k], 99)
            t["wins"] = t.get("wins", 0) + (tw < st)
            t["twin_top3"] = t.get("twin_top3", 0) + (tw < 3)
        top3 = {k for k in alone if ids[k] in ask(k)[:3]}
        if base_top3 is None:
            base_top3 = top3
        t["twins"] = t.get("twins", 0) + len(twins)
        t["alone"] = t.get("alone", 0) + len(alone)
        t["top3"] = t.get("top3", 0) + len(top3)
        t["base_top3"] = t.get("base_top3", 0) + len(base_top3)
        t["fell"] = t.get("fell", 0) + len(base_top3 - top3)
    return {"old": old[:12], "new": new[:12], "memories": len(keys) + len(twins),
            "changed": len(changed), "twins": len(twins), "alone": len(alone),
            "marked_stale": marked}  # fmt: skip
