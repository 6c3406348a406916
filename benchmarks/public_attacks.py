"""Public prompt-injection attack texts, read from a local copy (nothing is downloaded here and
nothing is committed): the injection scan is measured on attacks it was not written against.

    python benchmarks/public_attacks.py --bipia DIR      # counts per category

``DIR`` is a checkout of https://github.com/microsoft/BIPIA (MIT licence), or any directory
holding its ``benchmark/`` folder::

    git clone --depth 1 https://github.com/microsoft/BIPIA /tmp/BIPIA

Read: ``benchmark/{text,code}_attack_{train,test}.json`` -- ``{category: [instruction, …]}``:
75 + 75 text attacks (requests to encode, translate or extend the reply, ads, scams,
misinformation, and plain user-style requests) and 50 + 50 code attacks (an instruction to put a
snippet into the answer, the snippet exfiltrating data, logging keys, deleting files …).
Both splits are attack texts.

    python benchmarks/public_attacks.py --giskard DIR

``DIR`` holds ``prompt_injections.csv`` from https://github.com/Giskard-AI/prompt-injections (MIT):
35 English attacks, 20 jailbreaks (from garak) and 15 goal hijacks (from PromptInject)::

    git clone --depth 1 https://github.com/Giskard-AI/prompt-injections /tmp/giskard
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple

FILES = ("text_attack_train", "text_attack_test", "code_attack_train", "code_attack_test")


class Attack(NamedTuple):
    source: str  # "bipia-text train", "bipia-code test", …
    category: str
    text: str


def bipia(root: Path) -> list[Attack]:
    """Every attack instruction in a BIPIA checkout (``root`` or ``root/benchmark``)."""
    bench = root / "benchmark" if (root / "benchmark").is_dir() else root
    out: list[Attack] = []
    for name in FILES:
        path = bench / f"{name}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not a BIPIA checkout (see this module's docstring)")
        kind, _, split = name.split("_")
        source = f"bipia-{kind} {split}"
        for category, texts in json.loads(path.read_text(encoding="utf-8")).items():
            out += [Attack(source, category, t) for t in texts]
    return out


def giskard(root: Path) -> list[Attack]:
    """Every prompt of Giskard's ``prompt_injections.csv`` (``root`` is the file or its folder)."""
    path = root if root.is_file() else root / "prompt_injections.csv"
    with open(path, encoding="utf-8", newline="") as fh:
        return [Attack("giskard", row["group"], row["prompt"]) for row in csv.DictReader(fh)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bipia", type=Path)
    ap.add_argument("--giskard", type=Path)
    args = ap.parse_args(argv)
    attacks = (bipia(args.bipia) if args.bipia else []) + (
        giskard(args.giskard) if args.giskard else []
    )
    for (source, category), n in sorted(Counter((a.source, a.category) for a in attacks).items()):
        print(f"{source:<12}{category:<58}{n:>4}")
    print(f"{'total':<70}{len(attacks):>4}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
