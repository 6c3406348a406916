"""The ONNX Runtime embedding backend: same vectors as torch, cached export, clear settings."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from retrieval.embedding import onnx_model
from retrieval.embedding.embedder import (
    SentenceTransformerEmbedder,
    default_model_path,
    torch_model_path,
)

TEXTS = [
    "The cat sat on the mat.",
    "NullPointerException thrown in org.jfree.chart.Foo.bar while rendering the legend",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults, "
    "according to a cohort study of twelve thousand participants followed for ten years.",
    "ok",
    "東京は日本の首都です。 Café naïve résumé 😀",
    "  leading and trailing whitespace\t\n",
    "a long text past the model's 256 tokens " * 40,
]


def test_bad_settings_are_rejected_before_loading():
    with pytest.raises(ValueError, match="backend must be one of"):
        SentenceTransformerEmbedder(backend="tensorflow")
    with pytest.raises(ValueError, match="'int8' or unset"):
        SentenceTransformerEmbedder(backend="onnx", quantize="int4")
    with pytest.raises(ValueError, match="needs the onnx backend"):
        SentenceTransformerEmbedder(backend="torch", quantize="int8")


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PATTERN_EMBED_BACKEND", "torch")
    assert SentenceTransformerEmbedder().backend == "torch"
    monkeypatch.setenv("PATTERN_EMBED_BACKEND", "onnx")
    monkeypatch.setenv("PATTERN_EMBED_QUANTIZE", "int8")
    emb = SentenceTransformerEmbedder()
    assert emb.backend == "onnx" and emb.model_id == "all-MiniLM-L6-v2-int8"


def test_cache_key_follows_the_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    a = onnx_model.model_digest(str(tmp_path))
    assert a == onnx_model.model_digest(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert a != onnx_model.model_digest(str(tmp_path))


@pytest.mark.slow
def test_onnx_vectors_equal_torch_vectors(real_embedder):
    """The served vectors (ONNX Runtime fed by the folder's tokenizer.json, no torch) equal the
    sentence-transformers model's on torch: cosine >= 0.999 (the packaged graph stores its
    weights as int8; tests/store/test_model_parity.py), batched and one by one."""
    assert real_embedder.backend_in_use == "onnx" and real_embedder._model is None
    torch_emb = SentenceTransformerEmbedder(backend="torch").load()
    assert torch_emb.backend_in_use == "torch"
    a = real_embedder.embed_documents(TEXTS)
    b = torch_emb.embed_documents(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert float((a * b).sum(1).min()) > 0.999
    q = real_embedder._encode_query(TEXTS[1])
    assert float(q @ torch_emb._encode_query(TEXTS[1])) > 0.999
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


@pytest.mark.slow
def test_export_runs_quietly_in_a_child_is_cached_and_int8_is_close(
    tmp_path, monkeypatch, real_embedder
):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    path = torch_model_path()  # a model folder with weights, as PATTERN_EMBEDDING_MODEL names
    expected = onnx_model.cached_path(path)
    assert expected.is_relative_to(tmp_path) and not expected.exists()
    # the command the server runs as a child: no tracer, deprecation or progress-bar output
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval.embedding.onnx_model", path, "--out-dir", str(expected.parent)],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout.strip() == str(expected)
    assert expected.stat().st_size > 1_000_000
    stamp = expected.stat().st_mtime_ns
    assert onnx_model.ensure_exported(path) == expected
    assert expected.stat().st_mtime_ns == stamp  # reused, not exported again
    assert not list(expected.parent.glob("*.tmp*"))

    int8 = SentenceTransformerEmbedder(path, backend="onnx", quantize="int8").load()
    assert int8._onnx.path == expected.parent / "model-int8.onnx"
    assert expected.stat().st_mtime_ns == stamp  # quantized from the cached float graph
    a = int8.embed_documents(TEXTS)
    b = real_embedder.embed_documents(TEXTS)
    assert float((a * b).sum(1).min()) > 0.95  # "ok" is the farthest: 0.967
    # the packaged model's int8 variant comes from the shipped graph, in-process, no export
    packaged = SentenceTransformerEmbedder(backend="onnx", quantize="int8").load()
    assert packaged._onnx.path == onnx_model.cached_path(default_model_path(), "int8")
    assert not packaged._onnx.path.with_name("model.onnx").exists()
    assert float((packaged.embed_documents(TEXTS) * b).sum(1).min()) > 0.95


@pytest.mark.slow
def test_auto_falls_back_to_torch_for_other_pipelines(monkeypatch, caplog):
    monkeypatch.setattr(onnx_model, "unsupported", lambda path: "a CLS pooling model")
    with caplog.at_level(logging.WARNING, logger="retrieval.embedding.embedder"):
        emb = SentenceTransformerEmbedder(backend="auto").load()
    assert emb.backend_in_use == "torch"
    assert "embedding with torch" in caplog.text
    assert emb.embed_documents(TEXTS[:2]).shape == (2, 384)
    with pytest.raises(ValueError, match="CLS pooling"):
        SentenceTransformerEmbedder(backend="onnx").load()


def test_a_failed_export_leaves_no_file_behind(tmp_path):
    dst = tmp_path / "model.onnx"
    with pytest.raises(RuntimeError, match="export crashed"):
        with onnx_model._written(dst) as tmp:
            tmp.write_bytes(b"half a graph")
            raise RuntimeError("export crashed")
    assert list(tmp_path.iterdir()) == []
    with onnx_model._written(dst) as tmp:
        tmp.write_bytes(b"a graph")
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
