"""Which benchmark answers which question: every benchmark behind ``docs/benchmarks.md``, its
command and the runs of it published in ``benchmarks/published/``, then the labs (``lab/``) that
chose a setting. ``python -m benchmarks list`` prints this table, ``python -m benchmarks run NAME
[ARGS...]`` runs one (as ``python benchmarks/NAME.py ARGS...`` does)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "published"


@dataclass(frozen=True)
class Benchmark:
    name: str  # the module's name: benchmarks/NAME.py (a lab: benchmarks/lab/NAME.py)
    question: str
    args: str  # what a run takes, after ``run NAME``
    published: tuple[str, ...] = ()  # the files of benchmarks/published/ its runs wrote
    section: str = ""  # where docs/benchmarks.md shows it
    lab: bool = False

    @property
    def module(self) -> str:
        return f"benchmarks.lab.{self.name}" if self.lab else f"benchmarks.{self.name}"

    @property
    def path(self) -> Path:
        return (HERE / "lab" if self.lab else HERE) / f"{self.name}.py"

    @property
    def command(self) -> str:
        return f"python -m benchmarks run {self.name} {self.args}".rstrip()


BENCHMARKS = (
    Benchmark(
        "relevance",
        "Does recall rank the labelled answer first, beside a plain BM25 and the bare model? "
        "(BEIR sets, LoCoMo, LongMemEval_S, the file an issue needs, similar errors)",
        "beir|locomo|longmemeval|localize|errors DATA --ranker all --json OUT",
        (
            "relevance-scifact",
            "relevance-scifact-float32",
            "relevance-jira",
            "relevance-cosqa",
            "relevance-locomo",
            "relevance-locomo-float32",
            "relevance-locomo-time",
            "relevance-longmemeval",
            "relevance-longmemeval-time",
            "relevance-longmemeval-kutr",
            "relevance-sets-time",
            "relevance-localize",
            "relevance-errors",
        ),
        "Relevance",
    ),
    Benchmark(
        "scale",
        "How fast are writes and recalls, and how much memory and disk, from 20k to 1M records?",
        "--curve 20000,100000,300000,1000000 --store DIR --json OUT",
        (
            "scale-curve",
            "scale-mmap",
            "scale-100k",
            "scale-whole-project",
            "scale-whole-project-1m",
        ),  # fmt: skip
        "Scale curve: 20k to 1M records",
    ),
    Benchmark(
        "across",
        "Does the collection across buckets rank a search over every bucket as the buckets' "
        "own collections do, and how much faster?",
        "--data DATA/scifact --json OUT",
        ("across",),
        "The collection across buckets",
    ),
    Benchmark(
        "hnsw_build",
        "How fast does the vector index take inserts as it grows?",
        "--size 140000 --ef 200,100 --json OUT",
        ("hnsw-build",),
        "Scale curve: 20k to 1M records",
    ),
    Benchmark(
        "exact_scan",
        "Is a small store's exact scan as fast as the vector index, and does it rank alike?",
        "--sizes 50,500,2000,4000,8000 --json OUT",
        ("exact-scan",),
        "Exact scan of a small store",
    ),
    Benchmark(
        "memory_parts",
        "What does each part of a served store cost in memory, per 100k records?",
        "STORE_DIR --json OUT",
        (),
        "Scale curve: 20k to 1M records",
    ),
    Benchmark(
        "time_phrases",
        "Are the time words of questions read right, and how fast, beside dateparser?",
        "../shared/data --json OUT",
        ("time-phrases",),
        "Time and updates",
    ),
    Benchmark(
        "update_candidates",
        "Does a write list the older memory it updates, without links nobody asked for?",
        "../shared/data/longmemeval_s --locomo ../shared/data/locomo/locomo_dev.json --json OUT",
        ("update-candidates", "update-candidates-main"),
        "Time and updates",
    ),
    Benchmark(
        "citations",
        "Do citation statuses match `git diff`, what does a check cost, how low should a stale "
        "item rank?",
        "--json OUT --details DETAILS --ranking RANKING",
        ("citations",),
        "Citations",
    ),
    Benchmark(
        "startup",
        "How fast does the server answer its first call, and how much memory does it hold idle?",
        "--runs 5 --json OUT",
        ("startup",),
        "Start-up and memory of the served process",
    ),
    Benchmark(
        "concurrency",
        "Do concurrent agents' writes all land, how fast beside the model alone, does recall wait "
        "while they write, and do same-record edits merge?",
        "--agents 8 --writes 200 --old-root PREVIOUS --json OUT",
        ("concurrency",),
        "Concurrent writers",
    ),
    Benchmark(
        "recall_beside_python",
        "How long does recall take while another thread of the server runs Python?",
        "--old-root PREVIOUS --json OUT",
        ("recall-beside-python",),
        "Recall beside Python",
    ),
    Benchmark(
        "hooks",
        "How long does each client's hook take from process start to exit?",
        "--client all --per-event 40 --runs 3 --json OUT",
        ("hooks", "hooks-clients", "time-latency"),
        "Hooks",
    ),
    Benchmark(
        "hook_noise",
        "What does the prompt hook inject at each threshold, on topic and off topic?",
        "--locomo FILE.json --longmemeval DIR --json OUT",
        (),
        "Hooks",
    ),
    Benchmark(
        "hook_sizes",
        "Does the prompt gate stay quiet off topic and find the evidence at every store size?",
        "--locomo FILE.json --longmemeval DIR --dump ASKED.pkl --json OUT",
        ("hook-sizes",),
        "The prompt gate: every store size",
    ),
    Benchmark(
        "lessons_auto",
        "Are lessons learned from real bug-fixing sessions, found again, and never made up?",
        "../shared/data/defects4j/defects4j_errors_fixes.jsonl --latency 200 --json OUT",
        ("lessons-auto",),
        "Lessons learned from sessions",
    ),
    Benchmark(
        "poisoning",
        "Does the injection scan catch attacks without flagging benign text?",
        "--bipia DIR --giskard DIR --tensortrust DIR --jailbreaks DIR --data ../shared/data "
        "--json OUT",
        ("poisoning", "poisoning-rules"),
        "Poisoning",
    ),
    Benchmark(
        "public_attacks",
        "What do the public attack sets hold, as the scan reads them?",
        "--bipia DIR --giskard DIR",
        (),
        "Poisoning",
    ),
    Benchmark(
        "scan_speed",
        "How fast is the write policy's content scan, beside an older version?",
        "--old 775b062 --json OUT",
        ("scan-speed",),
        "Scan speed",
    ),
    Benchmark(
        "cluster",
        "Do many daemons on one PostgreSQL keep every write when a node is killed?",
        "--nodes 2 --agents 8 --writes 200 --kill --json OUT",
        ("cluster",),
        "Many daemons, one PostgreSQL",
    ),
    Benchmark(
        "dashboard",
        "How long does the server take for each dashboard page at 100k memories?",
        "--memories 100000 --store DIR --json OUT",
        ("dashboard",),
        "Dashboard",
    ),
    Benchmark(
        "conformance",
        "Does the server pass the MCP conformance scenarios?",
        "--json OUT",
        ("conformance",),
        "MCP conformance",
    ),
    Benchmark(
        "import_rate",
        "How fast are other memory servers' exports imported, beside our own import?",
        "--json OUT",
        ("import-rate",),
        "Import from another memory server",
    ),
    Benchmark(
        "ingest",
        "How fast is a folder ingested, beside the model's raw encode rate, and its rerun?",
        "PATH --json OUT",
        (),
        "docs/ingest.md, Throughput",
    ),
    # ------------------------------------------------------------------ labs: they chose a setting
    Benchmark(
        "fusion_lab",
        "Which query views and fusion signals: every dev set's signals, dumped once",
        "dump jira|cosqa|scifact|locomo|locomo_long --out DIR/SET.pkl",
        (),
        "Long queries, code and chat histories",
        lab=True,
    ),
    Benchmark(
        "fusion_fit",
        "Which fusion: fitted and compared on the dumps of fusion_lab, leave one set out",
        "DIR/*.pkl --json OUT",
        (),
        "Long queries, code and chat histories",
        lab=True,
    ),
    Benchmark(
        "tune_fusion",
        "Which FusionConfig defaults: offline sweeps over dumped candidate lists",
        "dump beir|locomo DATA --out FILE.pkl; sweep FILE.pkl",
        (),
        "Relevance",
        lab=True,
    ),
    Benchmark(
        "time_lab",
        "Which weights for the time prior and the update order, on every dev set together",
        "dump locomo|longmemeval DATA --out DIR/SET.pkl; fit DIR/*.pkl --json OUT",
        ("time-fit",),
        "Time and updates",
        lab=True,
    ),
    Benchmark(
        "update_sentences",
        "Could update links between past sessions be found from their sentences?",
        "../shared/data/longmemeval_s --json OUT",
        ("update-sentences",),
        "Time and updates",
        lab=True,
    ),
    Benchmark(
        "gate_fit",
        "Which prompt-gate model and threshold, fitted on what hook_sizes asked",
        "ASKED.pkl --json OUT",
        ("gate-fit",),
        "The prompt gate: every store size",
        lab=True,
    ),
    Benchmark(
        "chunking",
        "Which chunk size and overlap find the right file of a repository",
        "PATH --json OUT",
        (),
        "docs/ingest.md, chunking",
        lab=True,
    ),
)

BY_NAME = {b.name: b for b in BENCHMARKS}


def find(name: str) -> Benchmark:
    """The benchmark called ``name`` (``-`` and ``_`` alike, ``.py`` ignored)."""
    key = name.removesuffix(".py").replace("-", "_")
    if key not in BY_NAME:
        raise KeyError(f"no benchmark {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[key]


def published_by() -> dict[str, Benchmark]:
    """{published file stem: the benchmark whose run wrote it}."""
    return {stem: b for b in BENCHMARKS for stem in b.published}
