"""The ONNX Runtime embedding backend: same vectors as torch, cached export, clear settings."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from retrieval import onnx_model
from retrieval.embedder import SentenceTransformerEmbedder

TEXTS = [
    "The cat sat on the mat.",
    "NullPointerException thrown in org.jfree.chart.Foo.bar while rendering the legend",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults, "
    "according to a cohort study of twelve thousand participants followed for ten years.",
    "ok",
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
    assert real_embedder.backend_in_use == "onnx"
    torch_emb = SentenceTransformerEmbedder(backend="torch").load()
    assert torch_emb.backend_in_use == "torch"
    a = real_embedder.embed_documents(TEXTS)
    b = torch_emb.embed_documents(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert float((a * b).sum(1).min()) > 0.9999
    q = real_embedder._encode_query(TEXTS[1])
    assert float(q @ torch_emb._encode_query(TEXTS[1])) > 0.9999
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


@pytest.mark.slow
def test_export_is_cached_and_int8_is_close(tmp_path, monkeypatch, real_embedder):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path))
    model, path = real_embedder._model, real_embedder._path or onnx_model_path()
    first = onnx_model.ensure_exported(model, path)
    assert first.is_relative_to(tmp_path) and first.stat().st_size > 1_000_000
    stamp = first.stat().st_mtime_ns
    assert onnx_model.ensure_exported(model, path) == first
    assert first.stat().st_mtime_ns == stamp  # reused, not exported again
    assert not list(first.parent.glob("*.tmp*"))

    int8 = SentenceTransformerEmbedder(backend="onnx", quantize="int8").load()
    assert int8._onnx.path.parent == first.parent and int8._onnx.path.name == "model-int8.onnx"
    a = int8.embed_documents(TEXTS)
    b = real_embedder.embed_documents(TEXTS)
    assert float((a * b).sum(1).min()) > 0.95  # "ok" is the farthest: 0.967


def onnx_model_path() -> str:
    from retrieval.embedder import default_model_path

    return default_model_path()


@pytest.mark.slow
def test_auto_falls_back_to_torch_for_other_pipelines(monkeypatch, caplog):
    monkeypatch.setattr(onnx_model, "supported", lambda model: False)
    with caplog.at_level(logging.WARNING, logger="retrieval.embedder"):
        emb = SentenceTransformerEmbedder(backend="auto").load()
    assert emb.backend_in_use == "torch"
    assert "embedding with torch" in caplog.text
    assert emb.embed_documents(TEXTS[:2]).shape == (2, 384)
    with pytest.raises(ValueError, match="mean Pooling"):
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
