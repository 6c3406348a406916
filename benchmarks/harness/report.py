"""What every benchmark prints and writes: its metrics table, its ``--json`` file, percentiles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from benchmarks.harness.metrics import METRICS


def format_table(title: str, table: list[tuple[str, dict]]) -> str:
    head = f"{'':<22}" + "".join(f"{m:>11}" for m in METRICS) + f"{'queries':>9}"
    lines = [title, head, "-" * len(head)]
    for name, res in table:
        vals = "".join(f"{res[m]:>11.4f}" for m in METRICS)
        lines.append(f"{name:<22}{vals}{res['queries']:>9}")
    return "\n".join(lines)


def write_json(path: str | Path | None, payload, indent: int = 2, **dumps) -> None:
    """``payload`` as JSON in ``path`` (``--json OUT``; nothing when not given), its folder made."""
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=indent, **dumps) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p)) if xs else float("nan")
