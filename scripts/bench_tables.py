"""The result tables of ``docs/benchmarks.md``, generated from ``benchmarks/published/*.json``.

    python scripts/bench_tables.py           # rewrite the tables in docs/benchmarks.md
    python scripts/bench_tables.py --check   # exit 1 when a table differs from its JSON

Each published file is one benchmark run::

    {"benchmark": "relevance.py beir", "command": "python benchmarks/relevance.py beir ...",
     "data": "...", "model": "...", "result": {... what the command wrote with --json ...}}

A table sits in the page between ``<!-- table:NAME -->`` and ``<!-- /table -->``; :data:`TABLES`
says, per NAME, which values of which files fill it: a row is a label and one cell per column,
and a cell is ``(file, "path/inside/result", format)``. A value the run did not record is shown
as ``–``. A new run is a new file here (or a replaced one) and, when it needs a new table, one
entry in :data:`TABLES` and a marker in the page.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "benchmarks" / "published"
DOC = ROOT / "docs" / "benchmarks.md"
BLOCK = re.compile(r"(<!-- table:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)

Cell = tuple[str, str, str]  # (file stem, path inside "result", format)


@dataclass
class Table:
    header: list[str]
    rows: list[tuple[str, list[Cell]]]
    bold: tuple[str, ...] = ()  # labels of the rows shown in bold


def load(stem: str) -> dict:
    return json.loads((PUBLISHED / f"{stem}.json").read_text(encoding="utf-8"))


def value(result: dict, path: str):
    """``path`` ("a/b/0/c") inside ``result``; None when a step is missing."""
    node = result
    for step in path.split("/"):
        if isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            return None
    return node


def fmt(v, spec: str) -> str:
    if v is None:
        return "–"
    if spec == "pct":
        return f"{100 * v:.1f} %"
    if spec == "pct2":
        return f"{100 * v:.2f} %"
    if spec == "bool":
        return "yes" if v else "no"
    if spec == "str":
        return str(v)
    if spec == "range":  # [low, high]
        return "–" if not v else f"{v[0]:.2f}–{v[1]:.2f}"
    return format(v, spec)


def render(table: Table) -> str:
    cache: dict[str, dict] = {}

    def cell(stem: str, path: str, spec: str) -> str:
        if stem not in cache:
            cache[stem] = load(stem)["result"]
        return fmt(value(cache[stem], path), spec)

    lines = ["| " + " | ".join(table.header) + " |",
             "|---|" + "---:|" * (len(table.header) - 1)]  # fmt: skip
    for label, cells in table.rows:
        vals = [cell(*c) for c in cells]
        if label in table.bold:
            label, vals = f"**{label}**", [v if v == "–" else f"**{v}**" for v in vals]
        lines.append("| " + " | ".join([label, *vals]) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- table builders
def grid(stem, rows, cols, first="ranker", bold=()) -> Table:
    """Rows are (label, path prefix), columns (header, key, format): one file."""
    return Table([first, *(h for h, _, _ in cols)],
                 [(label, [(stem, f"{pre}/{key}", spec) for _, key, spec in cols])
                  for label, pre in rows], bold)  # fmt: skip


def across(rows, cols, first="ranker", bold=()) -> Table:
    """Rows are (label, path), columns (header, file, format): the same path in several files."""
    return Table([first, *(h for h, _, _ in cols)],
                 [(label, [(stem, path, spec) for _, stem, spec in cols]) for label, path in rows],
                 bold)  # fmt: skip


def beside_previous(rows, first="measure (target)") -> Table:
    """Rows are (label, file, path, format): the previous release's value (``old/`` of the
    same run) beside this version's."""
    return Table([first, "previous release", "this version"],
                 [(label, [(stem, f"old/{path}", spec), (stem, path, spec)])
                  for label, stem, path, spec in rows])  # fmt: skip


def pairs(rows, first="measure", second="result") -> Table:
    """Rows are (label, file, path, format): one value each."""
    return Table(
        [first, second], [(label, [(stem, path, spec)]) for label, stem, path, spec in rows]
    )


IR = [("recall@5", "recall@5", ".4f"), ("recall@10", "recall@10", ".4f"),
      ("nDCG@10", "ndcg@10", ".4f"), ("MRR@10", "mrr@10", ".4f")]  # fmt: skip
SIDES = [("lexical", "lexical"), ("vector", "vector"), ("hybrid", "hybrid")]
BASELINES = [("bm25_stdlib", "bm25_stdlib"), ("minilm_whole", "minilm_whole"),
             ("blend_50_50", "blend_50_50")]  # fmt: skip
SETS = [("Jira (117 reports)", "relevance-jira", ".3f"), ("CoSQA (500)", "relevance-cosqa", ".3f"),
        ("LoCoMo dev (760)", "relevance-locomo", ".3f"),
        ("SciFact train (809)", "relevance-scifact", ".3f")]  # fmt: skip
LME = [("session R_any@5", "session_recall_any@5", ".3f"),
       ("session R_any@10", "session_recall_any@10", ".3f"),
       ("turn R_any@5", "turn_recall_any@5", ".3f"), ("turn R_any@10", "turn_recall_any@10", ".3f"),
       ("nDCG@10", "ndcg@10", ".3f")]  # fmt: skip
ACC = [("acc@1", "acc@1", ".3f"), ("acc@5", "acc@5", ".3f"), ("acc@10", "acc@10", ".3f"),
       ("test_top1", "test_top1", ".3f")]  # fmt: skip
LAT = [("p50 ms", "p50_ms", ".1f"), ("p95 ms", "p95_ms", ".1f"),
       ("CPU ms", "cpu_ms_per_query", ".1f")]  # fmt: skip
CURVE_POINTS = ["20,000", "100,000", "300,000", "1,000,000"]
CURVE = [("write/s", "write_per_s", ".0f"), ("filtered p50 ms", "recall_filtered_p50_ms", ".1f"),
         ("filtered p95 ms", "recall_filtered_p95_ms", ".1f"), ("unfiltered p50 ms", "recall_p50_ms", ".0f"),
         ("unfiltered p95 ms", "recall_p95_ms", ".0f"), ("RSS MB", "rss_mb", ".0f"), ("PSS MB", "pss_mb", ".0f"),
         ("disk MB", "disk_mb", ".0f"), ("start s", "start_s", ".2f"),
         ("postings built s", "postings_build_s", ".1f"), ("loaded s", "postings_ready_s", ".2f"),
         ("load", "loadavg_queries", ".1f")]  # fmt: skip
GATE_SIZES = ["1", "8", "64", "all"]
GATE_COLS = [(f"{s} {h}", f"{k}/{m}", ".3f") for s, k in (("LoCoMo", "locomo"),
             ("LongMemEval", "longmemeval")) for h, m in (("evidence", "evidence"),
             ("first3", "first3"), ("evidence_text", "evidence_text"),
             ("off-topic silent", "off_topic_silent"))]  # fmt: skip
FORMER_COLS = [(f"{s} {h}", f"{k}/{m}", ".3f") for s, k in (("LoCoMo", "locomo"),
               ("LongMemEval", "longmemeval")) for h, m in (("evidence", "evidence"),
               ("off-topic silent", "off_topic_silent"))]  # fmt: skip
LOSO_COLS = [("evidence", "evidence"), ("silent", "off_topic_silent")]
CURVE_COLS = [(f"{s} {h}", f"{k}/{m}", ".3f") for s, k in (("LoCoMo", "locomo"),
              ("LongMemEval", "longmemeval")) for h, m in (("evidence", "evidence"),
              ("off-topic silent", "off_topic_silent"))]  # fmt: skip
GATE_POINTS = [0.30, 0.36, 0.40, 0.44, 0.48, 0.50, 0.52, 0.56, 0.60, 0.70, 0.80]
SCALE_ROWS = [
    "hybrid, agent filter",
    "hybrid, no filter",
    "lexical only, agent filter",
    "vector only, agent filter",
    "component: embed query",
    "component: lexical top-depth, filter",
    "component: FTS5 SQL top-depth, filter",
    "component: Chroma top-depth, 4 buckets",
]
PAGES = ["search (recall, 20 results)", "memories team (12k visible)",
         "memories team page 2 (keyset)", "memory", "graph", "graph search", "entity panel",
         "lessons", "find similar lesson", "workspace", "sessions", "session", "activity",
         "activity (agent filter)", "review inbox", "health"]  # fmt: skip
POISON = [("benign texts flagged", "flagged_benign", "n_benign"),
          ("of them, the report split", "flagged_benign_report", "n_benign_report"),
          ("held-out chat turns flagged: LongMemEval",
           "chat_held_out/longmemeval/flagged", "chat_held_out/longmemeval/n"),
          ("held-out chat turns flagged: LoCoMo",
           "chat_held_out/locomo/flagged", "chat_held_out/locomo/n"),
          ("held-out chat turns flagged: Claude Code",
           "chat_held_out/claude code/flagged", "chat_held_out/claude code/n"),
          ("held-out exchanges flagged (content)",
           "per_field/exchange content/flagged", "per_field/exchange content/n"),
          ("hard negatives flagged", "hard_negatives_flagged", "n_hard_negatives"),
          ("ours caught", "caught_adversarial", "n_adversarial")] + [
    (f"{label} caught", f"per_public_source/{key}/caught", f"per_public_source/{key}/n")
    for label, key in (("BIPIA", "bipia"), ("jailbreaks", "jailbreaks"),
                       ("Tensor Trust", "tensortrust"), ("Giskard", "giskard"))]  # fmt: skip


READS_START = [  # (label, file, path, format): each beside its old/ value of the same run
    ("whole-project recall p50 at 100k, ms (≤ 30)", "scale-whole-project", "recall_p50_ms", ".1f"),
    ("whole-project recall p95 at 100k, ms (≤ 45)", "scale-whole-project", "recall_p95_ms", ".1f"),
    ("one agent's recall p50 at 100k, ms", "scale-whole-project", "recall_filtered_p50_ms", ".1f"),
    ("one agent's recall p95 at 100k, ms", "scale-whole-project", "recall_filtered_p95_ms", ".1f"),
    ("start → first hybrid recall at 100k (over MCP), s", "scale-whole-project", "start_s", ".2f"),
    ("load average, recall at 100k", "scale-whole-project", "loadavg_queries", ".1f"),
    ("whole-project recall p50 at 1M, ms (≤ 40)", "scale-whole-project-1m", "recall_p50_ms", ".1f"),
    ("whole-project recall p95 at 1M, ms (≤ 60)", "scale-whole-project-1m", "recall_p95_ms", ".1f"),
    ("one agent's recall p50 at 1M, ms", "scale-whole-project-1m", "recall_filtered_p50_ms", ".1f"),
    ("one agent's recall p95 at 1M, ms", "scale-whole-project-1m", "recall_filtered_p95_ms", ".1f"),
    ("load average, recall at 1M", "scale-whole-project-1m", "loadavg_queries", ".1f"),
    ("start → first hybrid recall, 10k store, s (≤ 1.5)", "startup", "model_ready_s", ".3f"),
    ("the daemon's processor time to it, s", "startup", "model_ready_cpu_s", ".2f"),
    ("idle RSS after it, daemon + vector process, MB", "startup", "rss_mb", ".1f"),
    ("load average, starts", "startup", "ready_loadavg", ".1f"),
    ("`UserPromptSubmit` p50, ms (≤ 45)", "hooks", "p50_ms", ".1f"),
    ("`UserPromptSubmit` p95, ms (≤ 90)", "hooks", "p95_ms", ".1f"),
    ("hook process CPU p50, ms", "hooks", "client_cpu_p50_ms", ".1f"),
    ("`python -S -c pass` CPU p50, ms", "hooks", "python_floor_cpu_p50_ms", ".1f"),
    ("daemon round trip p50, ms", "hooks", "daemon_roundtrip_p50_ms", ".1f"),
    ("daemon round trip p95, ms", "hooks", "daemon_roundtrip_p95_ms", ".1f"),
    ("`python -S -c pass` p50, ms (the floor)", "hooks", "python_floor_p50_ms", ".1f"),
    ("load average, hooks", "hooks", "loadavg", ".1f"),
]


BESIDE_PYTHON = [  # (label, path, format): each beside its old/ value of the same run
    ("recall p50, nothing else running, ms", "alone_p50_ms", ".1f"),
    ("recall p95, nothing else running, ms", "alone_p95_ms", ".1f"),
    ("recall p50 beside a thread running Python, ms", "beside_python_p50_ms", ".1f"),
    ("recall p95 beside a thread running Python, ms", "beside_python_p95_ms", ".1f"),
    ("the interpreter's switch interval, ms", "switch_interval_ms", ".2f"),
    ("memories in the store", "memories", "d"),
]
CONCURRENCY = [  # (label, path, format): each beside its old/ value of the same run
    ("`write_ratio`: writes/s over the model's single-text rate (≥ 0.50)", "write_ratio", ".3f"),
    ("writes/s, 8 agents × 200 `remember`", "writes_per_s", ".1f"),
    ("the model alone, single texts/s", "encode_single_per_s", ".1f"),
    ("write p50, ms", "p50_ms", ".1f"),
    ("write p95, ms", "p95_ms", ".1f"),
    ("recall p50 during the writes, ms", "recall_p50_ms", ".1f"),
    ("recall p95 during the writes, ms", "recall_p95_ms", ".1f"),
    (
        "recall p50, same store, nobody writing (each query new once, as in the writes), ms",
        "recall_idle_p50_ms",
        ".1f",
    ),
    (
        "recall p95, same store, nobody writing (each query new once, as in the writes), ms",
        "recall_idle_p95_ms",
        ".1f",
    ),
    ("recall p95 during the writes / idle p95 (≤ 3)", "recall_load_ratio", ".2f"),
    (
        "the same ratio, 90 % bootstrap interval of the run's recalls",
        "recall_load_ratio_90",
        "range",
    ),
    (
        "recall p50, nobody writing, every query's vector cached, ms",
        "recall_idle_cached_p50_ms",
        ".1f",
    ),
    (
        "recall p95, nobody writing, every query's vector cached, ms",
        "recall_idle_cached_p95_ms",
        ".1f",
    ),
    ("memories present (of `expected`)", "present", "d"),
    ("expected", "expected", "d"),
    ("duplicated", "duplicated", "d"),
    ("vectors missing", "vectors_missing", "d"),
    ("outbox rows left", "outbox", "d"),
    ("load average after the agents", "loadavg_after_agents", ".1f"),
    ("processor ms per write: the 8 agents (MCP clients)", "cpu_ms_per_write/agents", ".2f"),
    ("processor ms per write: their 8 bridges", "cpu_ms_per_write/bridges", ".2f"),
    ("processor ms per write: the daemon and its child", "cpu_ms_per_write/daemon", ".2f"),
    ("processor ms of the model alone, per text", "model_cpu_ms_per_text", ".2f"),
    (
        "`write_ratio` the cores allow with a daemon costing only the model",
        "write_ratio_ceiling",
        ".3f",
    ),
]
STAGES = ("policy", "embedding", "scan", "links", "commit", "waiting", "other")


def size_label(size: str) -> str:
    return "whole" if size == "all" else f"{size} record{'s' if size != '1' else ''}"


def gate_curve_rows(stem: str, size: str) -> list[tuple[str, list[Cell]]]:
    curve = load(stem)["result"]["curve"][size]
    at = {round(r["threshold"], 2): i for i, r in enumerate(curve)}
    return [(f"{t:.2f}", [(stem, f"curve/{size}/{at[t]}/{k}", s) for _, k, s in CURVE_COLS])
            for t in GATE_POINTS if t in at]  # fmt: skip


def poisoning() -> Table:
    """Rules alone and rules + model, each a run of ``poisoning.py``."""
    return Table(["texts", "of", "rules alone", "rules + model"],
                 [(label, [("poisoning", total, "d"), ("poisoning-rules", n, "d"),
                           ("poisoning", n, "d")]) for label, n, total in POISON])  # fmt: skip


LME_TYPES = ["knowledge-update", "temporal-reasoning", "multi-session", "single-session-user",
             "single-session-assistant", "single-session-preference"]  # fmt: skip
LME_TIME = [("session R_any@5", "session_recall_any@5", ".3f"), ("nDCG@10", "ndcg@10", ".3f"),
            ("recall_all@10", "recall_all@10", ".3f"), ("newest_first", "newest_first", ".3f")]  # fmt: skip
LOCOMO_CATS = [("1 multi-hop", "1"), ("2 temporal", "2"), ("3 open-domain", "3"),
               ("4 single-hop", "4"), ("5 adversarial", "5")]  # fmt: skip


CANDIDATE_TARGETS = [
    ("candidate recall: the older answer turn listed when the newest is written",
     "candidate_recall@3", ".3f", None),
    ("writes that list any candidate", "writes_with_candidates", "pct", None),
    ("knowledge-update newest_first, a judge accepting exactly the true candidates",
     "newest_first_oracle", ".3f", None),
    ("the same, a judge accepting nothing (an agent ignoring the hint)",
     "newest_first_no_judge", ".3f", "newest_first_as_ranked"),
    ("links made without a call", "false_links_without_call", "d", "false_links_without_call"),
    ("tokens a listing adds to a write's result (median)", "median_tokens_added", ".1f", None),
    ("questions (30 of them with an older answer turn in another session)", "questions", "d",
     "questions"),
]  # fmt: skip


def candidate_targets() -> Table:
    """Each target of the write-time candidates, this version beside the version before them
    (``update-candidates-main``: the same protocol, no judge)."""
    rows = []
    for label, key, spec, main_key in CANDIDATE_TARGETS:
        main = ("update-candidates-main", main_key or "-", spec)  # "-": not measured there
        rows.append((label, [("update-candidates", f"targets/{key}", "str"),
                             ("update-candidates", key, spec), main]))  # fmt: skip
    return Table(["measure", "target", "now", "before (links it made by itself)"], rows)


def candidate_curve(weight: float, floors: list[float]) -> Table:
    """candidate recall and writes listing any, replayed at other floors (one weight)."""
    curve = load("update-candidates")["result"]["fit"]["curve"]
    at = {(round(r["weight"], 2), round(r["floor"], 2)): i for i, r in enumerate(curve)}
    rows = [(f"{fl:.2f}", [("update-candidates", f"fit/curve/{at[(weight, fl)]}/{k}", spec)
                           for k, spec in (("candidate_recall@3", ".3f"),
                                           ("writes_with_candidates", "pct"))])
            for fl in floors if (weight, fl) in at]  # fmt: skip
    return Table(["floor", "candidate recall@3", "writes listing any"], rows, bold=("1.00",))


CANDIDATE_CHECKS = [
    *((f"LongMemEval {t} (first 6): writes listing any", f"other_types/{t}/writes_with_candidates",
       "pct") for t in ("temporal-reasoning", "multi-session", "single-session-user",
                        "single-session-assistant", "single-session-preference")),
    ("LoCoMo dev, every turn: writes listing any", "locomo/writes_with_candidates", "pct"),
    ("hand-written update pairs, a day apart: candidate recall", "review/update_pairs/candidate_recall@3",
     ".3f"),
    ("20 distinct facts in quick succession: writes listing any", "review/facts/with_candidates", "d"),
    ("the README's paragraphs in quick succession: writes listing any",
     "review/readme/with_candidates", "d"),
    ("10 same-subject pairs, quickly: listed", "review/same_subject_pairs/with_candidates", "d"),
    ("10 same-subject pairs, a day apart: listed",
     "review/same_subject_pairs_a_day_apart/with_candidates", "d"),
]  # fmt: skip


def main_vs_time(stem: str, rows: list[tuple[str, str]], cols, first: str) -> Table:
    """Each metric of today's main (``main``) beside the same run's hybrid ranking."""
    return Table([first, *(f"{h} {side}" for h, _, _ in cols for side in ("main", "now"))],
                 [(label, [(stem, f"{r}/{pre}/{key}", spec) for _, key, spec in cols
                           for r in ("main", "hybrid")]) for label, pre in rows])  # fmt: skip


IMPORT_ROWS = [("our own `import`", "import (baseline)")] + [
    (f"`{n}`", n) for n in ("claude-mem", "mcp-memory-service", "mem0", "basic-memory",
                            "memory-jsonl", "claude-code")]  # fmt: skip
IMPORT_COLS = [("items", "items", "d"), ("records written", "records", "d"),
               ("seconds", "seconds", ".1f"), ("items/s", "items_per_s", ".0f"),
               ("records/s", "records_per_s", ".0f"), ("vs `import`", "vs_import", ".2f")]  # fmt: skip


POISON_CURVE = [("held-out chat turns", "chat turns"), ("held-out exchanges", "exchanges"),
                ("Tensor Trust", "tensortrust"), ("Giskard", "giskard"), ("BIPIA", "bipia"),
                ("jailbreaks", "jailbreaks"), ("ours", "ours"), ("public", "public")]  # fmt: skip


def poisoning_curve() -> Table:
    """The rates at other thresholds of the model (``threshold_curve`` of ``poisoning.py``),
    the shipped threshold in bold."""
    result = load("poisoning")["result"]
    shipped = f"{result['model']['threshold']:.3f}"
    rows = [(f"{r['threshold']:.3f}", [("poisoning", f"threshold_curve/{i}/{k}",
                                        "pct2" if "held-out" in h else "pct")
                                       for h, k in POISON_CURVE])
            for i, r in enumerate(result["threshold_curve"]) if r["threshold"] >= 0.5]  # fmt: skip
    return Table(["threshold", *(h for h, _ in POISON_CURVE)], rows, bold=(shipped,))


SCAN_TEXTS = [  # (the key in scan-speed.json, the row's label)
    ("prose", "prose (this repository's docs)"),
    ("code", "code (its service modules)"),
    ("unclosed-tag", "an unclosed tag of data `</user_a_a_…`"),
    ("quote-words", "quote words `end of the quoted quoted …`"),
    ("long-word", "one 30 KB word `a_a_…`"),
    ("opening-tags", "opening tags `<system><system>…`"),
    ("closer-authority", "a closer and an authority, repeated"),
    ("key-words", "key words `key=key=…`"),
    ("trigger-words", "the words every rule needs, densely"),
    ("tool-names", "destructive tools named again and again"),
]


def scan_speed() -> Table:
    """Milliseconds per 100 KB at each size, the time that passed at the largest, and the scan
    before (at its own size)."""
    cols = [("30 KB", "cpu_ms_per_100kb/30000"), ("300 KB", "cpu_ms_per_100kb/300000"),
            ("1 MB", "cpu_ms_per_100kb/1000000"), ("1 MB, time passed", "wall_ms_per_100kb/1000000"),
            ("the scan before", "old_cpu_ms_per_100kb")]  # fmt: skip
    rows = [(label, [*(("scan-speed", f"texts/{key}/{path}", ".1f") for _, path in cols),
                     ("scan-speed", f"texts/{key}/old_size", ",d")])
            for key, label in SCAN_TEXTS]  # fmt: skip
    return Table(["text", *(h for h, _ in cols), "(at bytes)"], rows)


CLUSTER = [("acknowledged writes on node 1", "present_per_node/0", ",d"),
           ("acknowledged writes on node 2", "present_per_node/1", ",d"),
           ("lost acknowledged", "lost_acknowledged", "d"), ("duplicated", "duplicated", "d"),
           ("visible on the other node, p95 ms", "visible_p95_ms", ",.0f"),
           ("writes/s", "writes_per_s", ".1f"),
           ("writes/s, one SQLite daemon", "baseline_sqlite/writes_per_s", ".1f"),
           ("new node: recall_equal", "recall_equal", "bool"),
           ("queries in the same order (of 50)", "recall_same_order", "d"),
           ("queries with equal scores", "recall_same_scores", "d"),
           ("largest score difference", "recall_score_diff_max", "g"),
           ("texts the new node embedded", "new_node_embedded", "d"),
           ("5,183 documents through PostgreSQL, s", "recall_indexed_s", ".1f"),
           ("the same bulk add, SQLite alone, s", "recall_bulk_sqlite_s", ".1f"),
           ("PostgreSQL / SQLite alone", "recall_indexed_ratio", ".2f"),
           ("new node caught up, index answering, s", "new_node_catch_up_s", ".1f"),
           ("load average, start", "loadavg/0", ".1f"),
           ("load average, end", "loadavg_end/0", ".1f")]  # fmt: skip


def cluster_runs() -> Table:
    """One column per run of ``benchmarks/cluster.py`` (``result/runs``)."""
    runs = range(len(load("cluster")["result"]["runs"]))
    return Table(["measure", *(f"run {i + 1}" for i in runs)],
                 [(label, [("cluster", f"runs/{i}/{path}", spec) for i in runs])
                  for label, path, spec in CLUSTER])  # fmt: skip


TABLES: dict[str, Table] = {
    "cluster": cluster_runs(),
    "scan-speed": scan_speed(),
    "time-locomo": main_vs_time(
        "relevance-locomo-time",
        [(label, f"categories/{c}") for label, c in LOCOMO_CATS],
        [
            ("recall@5", "recall@5", ".4f"),
            ("recall@10", "recall@10", ".4f"),
            ("nDCG@10", "ndcg@10", ".4f"),
            ("MRR@10", "mrr@10", ".4f"),
        ],
        "category",
    ),  # fmt: skip
    "time-longmemeval": main_vs_time(
        "relevance-longmemeval-time",
        [(t, f"types/{t}") for t in LME_TYPES],
        LME_TIME,
        "question type (first 40)",
    ),
    "time-longmemeval-kutr": main_vs_time(
        "relevance-longmemeval-kutr",
        [(t, f"types/{t}") for t in LME_TYPES[:2]],
        LME_TIME,
        "question type",
    ),
    "time-phrases": grid(
        "time-phrases",
        [
            ("grammar (retrieval/timeline/timeexpr.py)", "grammar"),
            ("dateparser 1.2.2", "dateparser"),
            ("parsedatetime 2.6", "parsedatetime"),
        ],
        [
            ("accuracy", "accuracy", ".3f"),
            ("windows read right (of 31)", "read_right", "d"),
            ("silent (of 193)", "silent", "d"),
            ("events (of 11)", "events_found", "d"),
            ("p50 ms", "p50_ms", ".3f"),
            ("p95 ms", "p95_ms", ".3f"),
            ("import s", "import_s", ".3f"),
            ("import MB", "import_rss_mb", ".1f"),
        ],
        first="parser",
    ),  # fmt: skip
    "time-fit": grid(
        "time-fit",
        [
            ("both sets", "chosen"),
            ("shipped", "shipped"),
            ("LoCoMo alone", "leave_one_out/longmemeval/setting"),
            ("LongMemEval alone", "leave_one_out/locomo/setting"),
        ],
        [
            ("window", "window_weight", ".2f"),
            ("event", "event_weight", ".2f"),
            ("when", "when_weight", ".2f"),
            ("stated times", "stated", "bool"),
            ("recency", "recent_weight", ".2f"),
            ("margin", "recent_margin", ".2f"),
            ("depth", "recent_depth", "d"),
        ],
        first="chosen on",
    ),
    "update-candidates": candidate_targets(),
    "update-candidates-curve": candidate_curve(2.0, [round(0.8 + 0.05 * i, 2) for i in range(7)]),
    "update-candidates-checks": pairs(
        [
            (label, "update-candidates", f"checks/{key}", spec)
            for label, key, spec in CANDIDATE_CHECKS
        ]
    ),
    "update-candidates-split": grid(
        "update-candidates",
        [
            ("fit on the first half, held-out second", "fit/split_half/fit_on_first_half"),
            ("fit on the second half, held-out first", "fit/split_half/fit_on_second_half"),
            ("fit on all (shipped)", "fit"),
        ],
        [
            ("weight", "chosen/weight", ".1f"),
            ("floor", "chosen/floor", ".2f"),
            ("recall (fit)", "chosen/candidate_recall@3", ".3f"),
            ("writes (fit)", "chosen/writes_with_candidates", "pct"),
            ("recall (held out)", "held_out/candidate_recall@3", ".3f"),
            ("writes (held out)", "held_out/writes_with_candidates", "pct"),
        ],
        first="setting",
    ),
    "update-sentences": Table(
        [
            "cosine at least",
            "true pairs linked",
            "wrong per haystack (median)",
            "with a shared uncommon word: true",
            "wrong (median)",
        ],
        [
            (
                f"{th:.2f}",
                [
                    ("update-sentences", f"{rule}/{i}/{key}", spec)
                    for rule in ("cosine", "cosine_and_uncommon_word")
                    for key, spec in (("true_linked", ".2f"), ("wrong_per_haystack_median", ".0f"))
                ],
            )
            for i, th in enumerate([0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9])
        ],
    ),  # fmt: skip
    "time-sets": main_vs_time(
        "relevance-sets-time",
        [
            ("SciFact train (809)", "scifact"),
            ("Jira (117 reports)", "jira"),
            ("CoSQA (500)", "cosqa"),
        ],
        [("recall@10", "recall@10", ".4f"), ("nDCG@10", "ndcg@10", ".4f")],
        "set",
    ),
    "time-latency": Table(
        ["measure", "main", "now"],
        [
            (label, [("time-latency", f"main/{key}", ".1f"), ("time-latency", f"now/{key}", ".1f")])
            for label, key in (
                ("UserPromptSubmit p50 ms", "hook_p50_ms"),
                ("UserPromptSubmit p95 ms", "hook_p95_ms"),
                ("recall at 20k, filtered p50 ms", "recall_filtered_p50_ms"),
                ("recall at 20k, filtered p95 ms", "recall_filtered_p95_ms"),
                ("load average", "loadavg"),
            )
        ],
    ),  # fmt: skip
    "relevance-sets": across(
        [(label, f"{key}/recall@10") for label, key in [*SIDES, *BASELINES]], SETS, bold=("hybrid",)
    ),
    "relevance-scifact": grid("relevance-scifact-float32", [*SIDES], IR, bold=("hybrid",)),
    "relevance-locomo": grid(
        "relevance-locomo-float32",
        [*SIDES],
        [*IR[:3], ("cat. 5 recall@10", "categories/5/recall@10", ".4f")],
        bold=("hybrid",),
    ),
    "longmemeval": grid(
        "relevance-longmemeval",
        [
            *SIDES,
            ("bm25_stdlib over whole sessions", "bm25_stdlib_sessions"),
            ("bm25_stdlib over single turns", "bm25_stdlib_turns"),
            ("minilm over single turns", "minilm_turns"),
        ],
        LME,
        bold=("hybrid",),
    ),
    "localize": grid(
        "relevance-localize",
        [*SIDES, ("bm25_stdlib", "bm25_stdlib"), ("minilm_whole", "minilm_whole")],
        ACC,
        bold=("hybrid",),
    ),
    "errors": grid(
        "relevance-errors",
        [
            ("find_similar_errors", "hybrid"),
            ("its lexical half", "lexical"),
            ("its vector half", "vector"),
            ("bm25 (engine)", "bm25 (engine)"),
        ],
        IR,
        bold=("find_similar_errors",),
    ),
    "hook-sizes": grid(
        "hook-sizes",
        [(size_label(z), f"sizes/{z}") for z in GATE_SIZES],
        GATE_COLS,
        first="project size",
    ),
    "hook-sizes-former": Table(
        ["project size", *(h for h, _, _ in FORMER_COLS)],
        [
            (
                size_label(z),
                [("gate-fit", f"former/{k.replace('/', f'/{z}/')}", f) for _, k, f in FORMER_COLS],
            )
            for z in GATE_SIZES
        ],
    ),
    "gate-loso": Table(
        ["held out", *(f"{h} {z}" for h, _ in LOSO_COLS for z in GATE_SIZES)],
        [
            (
                label,
                [
                    ("gate-fit", f"leave_one_set_out/{held}/result/{z}/{k}", ".3f")
                    for _, k in LOSO_COLS
                    for z in GATE_SIZES
                ],
            )
            for label, held in (
                ("LoCoMo (fit on LongMemEval)", "locomo"),
                ("LongMemEval (fit on LoCoMo)", "longmemeval"),
            )
        ],
    ),
    "hook-sizes-curve": Table(
        ["threshold", *(h for h, _, _ in CURVE_COLS)],
        gate_curve_rows("hook-sizes", "all"),
        bold=("0.50",),
    ),
    "scale-curve": grid(
        "scale-curve",
        [(n, f"curve/{i}") for i, n in enumerate(CURVE_POINTS)],
        CURVE,
        first="records",
    ),  # fmt: skip
    "hnsw-build": grid(
        "hnsw-build",
        [("ef_construction 200", "rates/200"), ("ef_construction 100", "rates/100")],
        [(f"{20 * i}k-{20 * (i + 1)}k" if i else "0-20k", f"{i}/1", ".0f") for i in range(7)],
        first="inserts/s, vectors already in the collection",
    ),
    "exact-scan": grid(
        "exact-scan",
        [(f"{int(n):,}", f"sizes/{n}") for n in ("50", "500", "2000", "4000", "8000")],
        [
            ("exact p50 ms", "exact/p50_ms", ".2f"),
            ("exact p95 ms", "exact/p95_ms", ".2f"),
            ("index p50 ms", "index/p50_ms", ".2f"),
            ("index p95 ms", "index/p95_ms", ".2f"),
            ("same top 10", "top10_agreement", "pct"),
            ("index process RSS MB", "index/index_rss_mb", ".0f"),
        ],
        first="records (one window each)",
    ),
    "scale-mmap": grid(
        "scale-mmap",
        [
            ("1024 MB", "mmap_mb/1024"),
            ("256 MB (default)", "mmap_mb/256"),
            ("0 (off)", "mmap_mb/0"),
        ],
        [
            ("filtered p50 ms", "recall_filtered_p50_ms", ".1f"),
            ("filtered p95 ms", "recall_filtered_p95_ms", ".1f"),
            ("unfiltered p50 ms", "recall_p50_ms", ".0f"),
            ("unfiltered p95 ms", "recall_p95_ms", ".0f"),
            ("RSS MB", "rss_mb", ".0f"),
            ("of it file pages MB", "rss_file_mb", ".0f"),
            ("PSS MB", "pss_mb", ".0f"),
            ("load", "loadavg_queries", ".1f"),
        ],
        first="`PATTERN_SQLITE_MMAP_MB`",
    ),  # fmt: skip
    "scale-100k": grid(
        "scale-100k", [(r, f"baselines/{r}") for r in SCALE_ROWS], LAT, first="100k memories, k=10"
    ),
    "across": grid(
        "across",
        [
            (f"{mode}, {way}", f"{mode}, {way}")
            for mode in ("hybrid", "vector")
            for way in ("bucket by bucket", "across buckets")
        ],
        [*IR, ("p50 ms", "p50_ms", ".1f"), ("p95 ms", "p95_ms", ".1f")],
        first="search over every bucket",
    ),  # fmt: skip
    "reads-start": beside_previous(READS_START),
    "concurrency": beside_previous([(label, "concurrency", *rest) for label, *rest in CONCURRENCY]),
    "recall-beside-python": beside_previous(
        [(label, "recall-beside-python", *rest) for label, *rest in BESIDE_PYTHON], first="measure"
    ),
    "concurrency-stages": Table(
        ["stage of a write", "wall ms", "processor ms"],
        [
            (
                name,
                [
                    ("concurrency", f"write_stages/wall_ms/{name}", ".2f"),
                    ("concurrency", f"write_stages/cpu_ms/{name}", ".2f"),
                ],
            )
            for name in STAGES
        ]
        + [("total", [("concurrency", "write_stages/total_ms", ".2f"), ("concurrency", "-", "")])],
    ),
    "startup": pairs(
        [
            ("handshake (cold `serve` to `tools/list`)", "startup", "handshake_s", ".3f"),
            ("bare interpreter start", "startup", "python_start_s", ".3f"),
            (
                "first hybrid recall on a 10k store (`model_ready_s`)",
                "startup",
                "model_ready_s",
                ".3f",
            ),
            ("idle RSS, daemon + vector process (MB)", "startup", "rss_mb", ".1f"),
            ("idle PSS (MB)", "startup", "pss_mb", ".1f"),
            ("load average during the ready runs", "startup", "ready_loadavg", ".2f"),
        ]
    ),
    "hooks": pairs(
        [
            ("UserPromptSubmit, process start to exit, p50 ms", "hooks", "p50_ms", ".1f"),
            ("same, p95 ms", "hooks", "p95_ms", ".1f"),
            ("hook process CPU, p50 ms", "hooks", "client_cpu_p50_ms", ".1f"),
            ("`python -S -c pass`, p50 ms (the floor)", "hooks", "python_floor_p50_ms", ".1f"),
            ("daemon round trip, p50 ms", "hooks", "daemon_roundtrip_p50_ms", ".1f"),
            ("daemon round trip, p95 ms", "hooks", "daemon_roundtrip_p95_ms", ".1f"),
            ("load average", "hooks", "loadavg", ".2f"),
        ]
    ),
    "hooks-clients": grid(
        "hooks-clients",
        [
            (f"{c['title']}: {event}", f"clients/{name}/events/{event}")
            for name, c in load("hooks-clients")["result"]["clients"].items()
            for event in c["events"]
        ],
        [
            ("p50 ms", "p50_ms", ".1f"),
            ("p95 ms", "p95_ms", ".1f"),
            ("hook CPU p50 ms", "client_cpu_p50_ms", ".1f"),
            ("injected", "injected", "d"),
            ("within budget", "within_budget", "bool"),
        ],
        first="client: event",
    ),
    "hooks-clients-floors": pairs(
        [
            ("reference call, p50 ms", "hooks-clients", "reference/p50_ms", ".1f"),
            ("reference call, p95 ms", "hooks-clients", "reference/p95_ms", ".1f"),
            ("`python -S -c pass`, p50 ms", "hooks-clients", "python_floor_p50_ms", ".1f"),
            ("the same through `sh -c`, p50 ms", "hooks-clients", "shell_floor_p50_ms", ".1f"),
            ("calls per event and run", "hooks-clients", "per_event", "d"),
            ("runs", "hooks-clients", "runs", "d"),
            ("hook errors", "hooks-clients", "hook_errors", "d"),
            ("load average (median of the runs)", "hooks-clients", "loadavg", ".2f"),
        ]
    ),
    "lessons-auto": pairs(
        [
            ("fix sessions", "lessons-auto", "details/fix_sessions", "d"),
            ("fix sessions with an episode", "lessons-auto", "episodes", "d"),
            (
                "lessons created for episodes (target ≥ 0.95)",
                "lessons-auto",
                "lessons_created",
                ".3f",
            ),
            ("control sessions", "lessons-auto", "details/control_sessions", "d"),
            ("false lessons from them (target 0)", "lessons-auto", "false_lessons", "d"),
            (
                "runner fix sessions (positive controls)",
                "lessons-auto",
                "details/runner_fix_sessions",
                "d",
            ),
            (
                "runner fix sessions with an episode",
                "lessons-auto",
                "details/runner_fix_episodes",
                "d",
            ),
            ("recall@1, learned lessons", "lessons-auto", "recall@1", ".3f"),
            (
                "recall@10, learned lessons (target: within 0.03 of by hand)",
                "lessons-auto",
                "recall@10",
                ".3f",
            ),
            (
                "recall@10, lessons recorded by hand",
                "lessons-auto",
                "hand_recorded_recall@10",
                ".3f",
            ),
            (
                "fix names the patched file, of retrieved (target ≥ 0.95)",
                "lessons-auto",
                "fix_names_patched_file",
                ".3f",
            ),
            ("failure hook injects the bug's lesson", "lessons-auto", "hook_injected", ".3f"),
            (
                "PostToolUseFailure, process start to exit, p50 ms (target ≤ 60)",
                "lessons-auto",
                "details/latency/post_tool_use_failure_p50_ms",
                ".1f",
            ),
            ("same, p95 ms", "lessons-auto", "details/latency/post_tool_use_failure_p95_ms", ".1f"),
            (
                "PostToolUse, process start to exit, p50 ms (target ≤ 60)",
                "lessons-auto",
                "details/latency/post_tool_use_p50_ms",
                ".1f",
            ),
            ("same, p95 ms", "lessons-auto", "details/latency/post_tool_use_p95_ms", ".1f"),
            (
                "PostToolUseFailure, the daemon's round trip alone, p50 ms",
                "lessons-auto",
                "details/latency/daemon_roundtrip_failure_p50_ms",
                ".1f",
            ),
            (
                "query sessions learned on the daemon's worker",
                "lessons-auto",
                "details/latency/sessions_learned",
                "d",
            ),
            ("load average", "lessons-auto", "details/latency/loadavg", ".2f"),
        ]
    ),  # fmt: skip
    "citations": pairs(
        [
            ("cited functions checked", "citations", "n", "d"),
            ("precision of stale", "citations", "precision_stale", ".3f"),
            ("recall of stale", "citations", "recall_stale", ".3f"),
            ("moved code found", "citations", "moved_detected", ".3f"),
            ("check of 10 cited items, p95 ms (warm, wall)", "citations", "check_ms_p95", ".3f"),
        ]
    ),
    "poisoning": poisoning(),
    "poisoning-curve": poisoning_curve(),
    "dashboard": grid(
        "dashboard",
        [(p, f"pages/{p}") for p in PAGES],
        [("p50 ms", "p50_ms", ".1f"), ("p95 ms", "p95_ms", ".1f"), ("max ms", "max_ms", ".1f")],
        first="page",
    ),
    "import-rate": grid(
        "import-rate",
        [(label, f"sources/{n}") for label, n in IMPORT_ROWS],
        IMPORT_COLS,
        first="source (10,000 items)",
    ),  # fmt: skip
    "conformance": grid(
        "conformance",
        [(s, f"scenarios/{s}") for s in load("conformance")["result"]["scenarios"]],
        [("passed", "passed", "d"), ("failed", "failed", "d"), ("warnings", "warnings", "d")],
        first="scenario",
    ),
}


def generate(doc: str) -> str:
    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise SystemExit(
                f"docs/benchmarks.md: no table named {name!r} in scripts/bench_tables.py"
            )
        return m.group(1) + render(TABLES[name]) + m.group(4)

    return BLOCK.sub(one, doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = ap.parse_args(argv)
    doc = DOC.read_text(encoding="utf-8")
    new = generate(doc)
    if args.check:
        if new != doc:
            print(
                "docs/benchmarks.md differs from benchmarks/published/: run scripts/bench_tables.py"
            )
            return 1
        return 0
    if new != doc:
        DOC.write_text(new, encoding="utf-8")
        print("docs/benchmarks.md: tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
