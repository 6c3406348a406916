"""The model's own ``tokenizer.json``, set up the way sentence-transformers runs it.

The serving process tokenizes with the ``tokenizers`` package alone (a Rust extension of a few
MB), so it needs neither torch nor transformers. sentence-transformers' text preprocessing for
a Transformer module is: the fast tokenizer of the model folder, ``padding=True`` (to the
longest text of the batch, on the right, with the pad token), ``truncation="longest_first"``
at the module's ``max_seq_length``, special tokens added, and the ids, type ids and attention
mask handed to the model. ``max_seq_length`` comes from ``sentence_bert_config.json`` (else the
tokenizer's ``model_max_length``), capped at the model's ``max_position_embeddings``, as
sentence-transformers caps it. The ``truncation``/``padding`` stored inside ``tokenizer.json``
(128, fixed) are overridden, as transformers overrides them on every call.

The token ids equal sentence-transformers' (tests/store/test_onnx_backend.py compares them over
mixed-script, accented, emoji, whitespace-only and over-long texts).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

# sentence-transformers tries these names, in this order, for the Transformer module's config
SBERT_CONFIGS = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of the model folder, or ``{}`` when it is absent."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def sbert_config(folder: Path) -> dict[str, Any]:
    """The Transformer module's sentence-transformers config (``{}`` when there is none)."""
    for name in SBERT_CONFIGS:
        cfg = read_json(folder / name)
        if cfg:
            return cfg
    return {}


def max_seq_length(folder: str | os.PathLike[str]) -> int:
    """Tokens the model reads per text, as sentence-transformers computes it."""
    folder = Path(folder)
    seq = sbert_config(folder).get("max_seq_length")
    if seq is None:
        seq = read_json(folder / "tokenizer_config.json").get("model_max_length")
    positions = read_json(folder / "config.json").get("max_position_embeddings")
    if seq is None:
        seq = positions
    if seq is None:
        raise ValueError(f"{folder}: no max_seq_length, model_max_length or position count")
    if positions is not None and positions != -1:
        seq = min(int(seq), int(positions))
    return int(seq)


class ModelTokenizer:
    """Texts -> int64 ``input_ids``, ``token_type_ids``, ``attention_mask`` (batch x tokens).

    Thread-safe: truncation and padding are set once here, and encoding only reads them.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        from tokenizers import Tokenizer

        folder = Path(folder)
        if sbert_config(folder).get("do_lower_case"):
            # sentence-transformers would add a lowercasing step; no packaged model needs it
            raise ValueError(f"{folder}: do_lower_case models are served by the torch backend")
        self.folder = folder
        self.max_length = max_seq_length(folder)
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        stored = json.loads(tok.to_str()).get("padding") or {}
        special = read_json(folder / "special_tokens_map.json")
        pad_token = stored.get("pad_token") or _content(special.get("pad_token")) or "[PAD]"
        pad_id = tok.token_to_id(pad_token)
        if pad_id is None:
            raise ValueError(f"{folder}: pad token {pad_token!r} is not in the vocabulary")
        tok.enable_truncation(self.max_length, strategy="longest_first", direction="right")
        tok.enable_padding(
            direction="right",
            pad_id=pad_id,
            pad_type_id=int(stored.get("pad_type_id", 0)),
            pad_token=pad_token,
        )
        self._tok = tok

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        encs = self._tok.encode_batch_fast(texts, add_special_tokens=True)
        return {
            "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
        }


def _content(token: Any) -> str | None:
    """A special token as ``special_tokens_map.json`` stores it: a string or ``{content: …}``."""
    if isinstance(token, dict):
        return token.get("content")
    return token
