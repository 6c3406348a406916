"""The benchmarks behind docs/benchmarks.md, by question.

python -m benchmarks list              # each benchmark: its question, command, published runs
python -m benchmarks run NAME [ARGS]   # one of them, ARGS passed through (NAME --help)
"""

from __future__ import annotations

import runpy
import sys

from benchmarks.registry import BENCHMARKS, Benchmark, find

USAGE = __doc__.split("\n\n", 1)[1]


def describe(b: Benchmark) -> str:
    lines = [f"{b.name}", f"    {b.question}", f"    {b.command}"]
    if b.published:
        lines.append("    published: " + ", ".join(f"{s}.json" for s in b.published))
    if b.section:
        lines.append(f"    docs: {b.section}")
    return "\n".join(lines)


def list_all() -> str:
    out = ["benchmarks (docs/benchmarks.md):", ""]
    out += [describe(b) + "\n" for b in BENCHMARKS if not b.lab]
    out += ["labs (benchmarks/lab/README.md: the setting each chose):", ""]
    out += [describe(b) + "\n" for b in BENCHMARKS if b.lab]
    return "\n".join(out).rstrip()


def run(bench: Benchmark, args: list[str]) -> None:
    """Runs the benchmark's module as a script, ``args`` its command line."""
    sys.argv = [str(bench.path), *args]
    runpy.run_module(bench.module, run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "list" and len(argv) == 1:
        print(list_all())
        return 0
    if argv[0] == "run" and len(argv) >= 2:
        try:
            bench = find(argv[1])
        except KeyError as e:
            print(e.args[0], file=sys.stderr)
            return 2
        run(bench, argv[2:])
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
