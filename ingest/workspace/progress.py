"""Progress output for ``pattern-memory ingest``: a bar on a terminal, plain lines otherwise.

On a terminal the bar is redrawn in place (at most 10 times a second)::

    ingest [##########··········]  1520/3135 files  18304 chunks  41.7 chunks/s  eta 6m 12s

When stdout is not a terminal (CI, a pipe, a log file) one line is printed every
``interval`` seconds and at the end, so logs stay short and greppable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ingest.workspace.pipeline import IngestReport, Progress


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds}s"


class ProgressPrinter:
    """``label`` names the run and ``units`` what it counts (``import-from`` prints items read
    and records written with the same bar)."""

    def __init__(
        self, stream: TextIO | None = None, *, tty: bool | None = None, interval: float = 5.0,
        label: str = "ingest", units: tuple[str, str] = ("files", "chunks"),
    ) -> None:  # fmt: skip
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval
        self.label = label
        self.units = units
        self._last = 0.0
        self._width = 0
        self._text = ""

    def line(self, p: Progress) -> str:
        done, made = self.units
        eta = ""
        if 0 < p.files_done < p.files_total and p.elapsed > 1:
            eta = f"  eta {_duration(p.elapsed / p.files_done * (p.files_total - p.files_done))}"
        return (
            f"{p.files_done}/{p.files_total} {done}  {p.chunks} {made}  "
            f"{p.rate:.1f} {made}/s  {p.files_done / p.elapsed if p.elapsed else 0:.1f} {done}/s{eta}"
        )

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        final = p.phase == "done"
        if self.tty:
            if not final and now - self._last < 0.1:
                return
            frac = p.files_done / p.files_total if p.files_total else 1.0
            filled = int(frac * 20)
            text = f"{self.label} [{'#' * filled}{'·' * (20 - filled)}] {self.line(p)}"
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
            self._width = len(text)
        else:
            text = f"{self.label}: {self.line(p)}"
            if (not final and now - self._last < self.interval) or text == self._text:
                return
            self.stream.write(text + "\n")
            self._text = text
        self.stream.flush()
        self._last = now


def summary(report: IngestReport, max_skipped: int = 20) -> str:
    """A human summary of a run (the CLI prints it; ``--json`` prints the report instead)."""
    lines = [
        f"{report.root}: {report.files_seen} files seen, {report.files_indexed} indexed, "
        f"{report.files_unchanged} unchanged, {report.files_removed} removed; "
        f"chunks +{report.chunks_added} -{report.chunks_removed} "
        f"({report.chunks_embedded} embedded) in {report.seconds:.1f}s"
    ]
    if report.interrupted:
        lines.append("interrupted: what was committed is kept; run again to resume")
    if report.skipped:
        lines.append(f"skipped {len(report.skipped)} files:")
        for s in report.skipped[:max_skipped]:
            lines.append(f"  {s.path}: {s.reason}")
        if len(report.skipped) > max_skipped:
            lines.append(f"  … and {len(report.skipped) - max_skipped} more (--json lists all)")
    for e in report.errors:
        lines.append(f"error: {e.path}: {e.reason}")
    return "\n".join(lines)
