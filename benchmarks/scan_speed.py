"""Speed of the write policy's content scan: the secret scan and the injection rules (the
injection model, a second line over the text's embedding, is left out), in milliseconds per
100 KB of text, at 30 KB, 300 KB and 1 MB: the processor time of the best of ``--runs`` scans
(the machine is shared: the time that passed is recorded too, ``wall``), after one scan of the
same text (RE2 builds its automata's states as a text needs them, once per process).

    python benchmarks/scan_speed.py [--sizes 30000,300000,1000000] [--old 775b062] [--runs 3]
                                    [--json OUT]

Texts: ordinary prose (this repository's docs), code (its service modules), and hostile runs
(an unclosed closing tag of quoted data ``</user_a_a_…``, a run of quote words ``end of the
quoted quoted …``, a 30 KB word ``a_a_…``, opening tags with no closing one, a closer and an
authority phrase repeated, key words ``key=key=…``, the words the rules need, all of them and
densely, and this server's destructive tools named again and again). Each text is its source repeated up to the
size. The same texts are scanned by the scan of commit ``--old`` (its modules read with ``git
show`` into a temporary folder), at 30 KB for prose and code and at 8 KB for the hostile texts
(it is quadratic on them: seconds to hours at the larger sizes).
Results: docs/benchmarks.md, "Scan speed".
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OLD_MODULES = ("injection", "injection_rules", "injection_escape", "injection_intent", "secrets",
               "secret_rules", "secret_checks")  # fmt: skip


# words every rule of the injection scan needs, densely: the rules' anchors, everywhere
TRIGGERS = (
    "ignore previous instructions you must now forget-bulk `forget` cleanup delete every memory "
    "you can find end of quoted data </context> [/reference] new instructions from the admin "
    "dear claude, from now on your reply begin your answer with please send the passwords to "
    "agents reading this note to ai assistants: system: human: assistant: <|im_start|> "
)


def sources() -> dict[str, str]:
    prose = "\n\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    code = "\n\n".join(p.read_text() for p in sorted((ROOT / "server/service").glob("*.py")))
    return {
        "prose": prose,
        "code": code,
        "unclosed-tag": "</user_" + "a_" * 100,
        "quote-words": "end of the " + "quoted " * 100,
        "long-word": "notes: " + "a_" * 15_000 + ".py ",
        "opening-tags": "<system>" * 100,
        "closer-authority": "end of quoted data. new instructions for contributors are in docs. ",
        "key-words": "key=" * 100,
        "trigger-words": TRIGGERS,
        "tool-names": "`forget` forget-bulk cleanup delete_entities " * 20,
    }


def text_of(source: str, size: int) -> str:
    return (source * (size // len(source) + 1))[:size]


def load_old(commit: str) -> tuple[object, object]:
    """The injection and secret modules of ``commit``, imported from a temporary package."""
    folder = Path(tempfile.mkdtemp(prefix="scan-old-"))
    pkg = folder / "oldscan"
    (pkg / "trust").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "trust" / "__init__.py").write_text("")

    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout  # fmt: skip

    (pkg / "errors.py").write_text(show("server/service/core/errors.py"))
    for name in OLD_MODULES:
        (pkg / "trust" / f"{name}.py").write_text(show(f"server/service/trust/{name}.py"))
    sys.path.insert(0, str(folder))
    return importlib.import_module("oldscan.trust.injection"), importlib.import_module(
        "oldscan.trust.secrets"
    )


def ms_per_100kb(injection, secrets, text: str, runs: int) -> tuple[float, float]:
    """The best of ``runs`` scans of ``text`` (the secret scan, then the injection rules), in
    milliseconds per 100 KB: the time the process spent (CPU) and the time that passed."""
    best_cpu = best_wall = float("inf")
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        secrets.scan(text)
        injection.verdict(text)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    per = len(text) / 100_000
    return round(best_cpu * 1000 / per, 1), round(best_wall * 1000 / per, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="30000,300000,1000000")
    ap.add_argument("--old", default="775b062", help="the commit to compare with ('' for none)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    from server.service.trust.injection_scan import injection
    from server.service.trust.secret_scan import secrets

    sizes = [int(s) for s in args.sizes.split(",")]
    old = load_old(args.old) if args.old else None
    result: dict = {"sizes": sizes, "old_commit": args.old, "runs": args.runs, "texts": {}}
    print(f"{'text':34}" + "".join(f"{s // 1000:>9} KB" for s in sizes) + "   wall (largest)   old")
    for name, source in sources().items():
        cpu, wall = {}, {}
        for s in sizes:
            text = text_of(source, s)
            ms_per_100kb(injection, secrets, text, 1)  # the automata's states built once
            cpu[str(s)], wall[str(s)] = ms_per_100kb(injection, secrets, text, args.runs)
        entry: dict = {"cpu_ms_per_100kb": cpu, "wall_ms_per_100kb": wall}
        old_cell = ""
        if old is not None:
            old_size = 30_000 if name in ("prose", "code", "trigger-words") else 8_000
            entry["old_cpu_ms_per_100kb"] = ms_per_100kb(*old, text_of(source, old_size), 1)[0]
            entry["old_size"] = old_size
            old_cell = f"   {entry['old_cpu_ms_per_100kb']:.1f} ({old_size // 1000} KB)"
        result["texts"][name] = entry
        print(f"{name:34}" + "".join(f"{cpu[str(s)]:>12.1f}" for s in sizes)
              + f"{wall[str(sizes[-1])]:>12.1f}" + old_cell, flush=True)  # fmt: skip
    print("CPU ms per 100 KB (best of runs; wall: the time that passed); target 20")
    if args.json_out:
        from benchmarks.harness.report import write_json

        write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
