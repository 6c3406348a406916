"""A lean serving process: the model served without torch, tokenized by the folder's own
``tokenizer.json`` exactly as sentence-transformers does, the export in a child process, and
start-up work that leaves nothing resident it does not need."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval.embedding import onnx_model
from retrieval.embedding.embedder import (
    SentenceTransformerEmbedder,
    default_model_path,
    torch_model_path,
)
from retrieval.embedding.tokenizer import ModelTokenizer, max_seq_length
from retrieval.storage.store import SQLiteStore
from server.service.core.config import Settings
from server.service.core.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]

# mixed scripts, accents, emoji, hidden characters, whitespace-only, empty, over-long
TEXTS = [
    "The cat sat on the mat.",
    "",
    " ",
    "  leading and trailing  ",
    "\t tabs\nnewlines\r\n and  double  spaces",
    "Café naïve résumé Ünïcödé ÅNGSTRÖM",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "emoji 😀👍🏽 zero\u200bwidth bidi\u202etext tag\U000e0041chars",
    "NullPointerException in org.jfree.chart.Foo.bar(Foo.java:42) <tool_call>{}</tool_call>",
    "x " * 400,
    "supercalifragilisticexpialidocious" * 20,
    "ok",
]


def write_folder(folder: Path, files: dict[str, object]) -> Path:
    """``folder`` with ``files`` ({relative path: JSON content})."""
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    return folder


def mean_pooling_folder(folder: Path, pooling: dict | None = None) -> Path:
    """A model folder shaped like all-MiniLM-L6-v2's (its tokenizer and configs, no weights)."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]  # fmt: skip
    pooling = pooling or {"pooling_mode_mean_tokens": True}
    write_folder(folder, {"modules.json": modules, "1_Pooling/config.json": pooling})
    real = Path(default_model_path())
    for name in ("tokenizer.json", "config.json", "sentence_bert_config.json"):
        shutil.copy(real / name, folder / name)
    return folder


def test_max_seq_length_follows_sentence_transformers(tmp_path):
    assert max_seq_length(default_model_path()) == 256  # sentence_bert_config.json
    positions = {"config.json": {"max_position_embeddings": 512}}
    f = write_folder(
        tmp_path / "a", {"sentence_bert_config.json": {"max_seq_length": 1024}, **positions}
    )
    assert max_seq_length(f) == 512  # capped at the position embeddings
    f = write_folder(
        tmp_path / "b", {"tokenizer_config.json": {"model_max_length": 384}, **positions}
    )
    assert max_seq_length(f) == 384  # no sentence-transformers config: the tokenizer's
    f = write_folder(tmp_path / "c", {"config.json": {"max_position_embeddings": 128}})
    assert max_seq_length(f) == 128
    with pytest.raises(ValueError, match="no max_seq_length"):
        max_seq_length(write_folder(tmp_path / "d", {"config.json": {}}))


def test_unsupported_says_why_without_loading_the_model(tmp_path):
    assert onnx_model.unsupported(default_model_path()) is None
    assert "not a local model folder" in onnx_model.unsupported(str(tmp_path / "missing"))
    assert onnx_model.unsupported(str(mean_pooling_folder(tmp_path / "ok"))) is None
    cls = mean_pooling_folder(tmp_path / "cls", {"pooling_mode_cls_token": True})
    assert "mean Pooling" in onnx_model.unsupported(str(cls))
    no_tok = mean_pooling_folder(tmp_path / "notok")
    (no_tok / "tokenizer.json").unlink()
    assert onnx_model.unsupported(str(no_tok)) == "no tokenizer.json"
    dense = mean_pooling_folder(tmp_path / "dense")
    modules = json.loads((dense / "modules.json").read_text())
    modules.append({"path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    assert "Dense" in onnx_model.unsupported(str(dense))
    lower = mean_pooling_folder(tmp_path / "lower")
    (lower / "sentence_bert_config.json").write_text(json.dumps({"do_lower_case": True}))
    assert "do_lower_case" in onnx_model.unsupported(str(lower))


def test_tokenizer_pads_to_the_longest_text_and_truncates_at_the_sequence_length():
    tok = ModelTokenizer(default_model_path())
    out = tok(["short", "a somewhat longer text here", "word " * 600])
    assert set(out) == {"input_ids", "token_type_ids", "attention_mask"}
    assert all(a.dtype == np.int64 and a.shape == (3, 256) for a in out.values())
    assert out["attention_mask"].sum(1).tolist()[0] == 3  # [CLS] short [SEP]
    assert out["input_ids"][0, 3:].tolist() == [0] * 253  # [PAD] after it
    assert out["input_ids"][2, -1] == 102  # truncated text still ends with [SEP]
    assert tok(["a b", "c"])["input_ids"].shape == (2, 4)  # longest of the batch, not 256


@pytest.mark.slow
def test_tokenizer_ids_equal_sentence_transformers(real_embedder):
    st_model = onnx_model.load_sentence_transformer(torch_model_path())
    tok = ModelTokenizer(real_embedder.model_path)
    for i in range(0, len(TEXTS), 5):  # batches: padding to the batch's longest text
        batch = TEXTS[i : i + 5]
        ours, theirs = tok(batch), st_model.preprocess(batch)
        for key, value in ours.items():
            assert value.tolist() == theirs[key].tolist(), (key, batch)
    for text in TEXTS:
        assert (
            tok([text])["input_ids"].tolist() == st_model.preprocess([text])["input_ids"].tolist()
        )


@pytest.mark.slow
def test_concurrent_callers_share_the_tokenizer_and_session_safely(real_embedder):
    serial = real_embedder.embed_documents(TEXTS)
    got: dict[int, np.ndarray] = {}

    def worker(i: int) -> None:
        for _ in range(5):
            got[i] = np.stack([real_embedder._encode_query(t) for t in TEXTS])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for vecs in got.values():
        assert float((vecs * serial).sum(1).min()) > 0.9999


NO_TORCH_PROBE = """
import json, sys
from server.service.core.runtime import Runtime
from retrieval.records import RecordFilter
rt = Runtime.start(background=False)
assert rt.model_error is None, rt.model_error
rt.engine.add([])
hits = rt.engine.search("anything", RecordFilter(buckets=rt.identity.visible_buckets()), k=5)
heavy = [m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules]
print(json.dumps({"backend": rt.engine.embedder.backend_in_use, "heavy": heavy}))
rt.close()
"""


@pytest.mark.slow
def test_the_serving_process_never_imports_torch(tmp_path, real_embedder):
    # the child serves the packaged graph, as real_embedder does
    env = {**os.environ, "PATTERN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
           "PATTERN_EMBEDDER": "sentence-transformers"}  # fmt: skip
    env.pop("PATTERN_EMBED_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH_PROBE], env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"backend": "onnx", "heavy": []}


@pytest.mark.slow
def test_a_failed_export_is_reported_and_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path / "cache"))
    folder = mean_pooling_folder(tmp_path / "no-weights")  # passes the check, cannot load
    with pytest.raises(onnx_model.ExportFailed, match=r"failed \(exit \d+\): .+"):
        onnx_model.ensure_exported(str(folder))
    cached = onnx_model.cached_path(str(folder))
    assert not cached.exists() and not list(cached.parent.glob("*.onnx*"))


def test_the_onnx_backend_reports_a_failed_export(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path / "cache"))

    def child(model_path, quantize, out_dir):
        raise onnx_model.ExportFailed("ONNX export of x failed (exit 1): boom")

    monkeypatch.setattr(onnx_model, "_run_export_child", child)
    folder = str(mean_pooling_folder(tmp_path / "model"))
    with pytest.raises(onnx_model.ExportFailed, match="boom"):
        SentenceTransformerEmbedder(folder, backend="onnx").load()
    with pytest.raises(onnx_model.ExportFailed, match="boom"):  # int8 never falls back either
        SentenceTransformerEmbedder(folder, quantize="int8").load()


def test_the_demo_says_when_the_model_is_being_prepared(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PATTERN_EMBED_BACKEND", raising=False)
    monkeypatch.delenv("PATTERN_EMBED_QUANTIZE", raising=False)
    settings = Settings.from_env({"PATTERN_HOME": str(tmp_path / "home")}, tmp_path)
    assert settings.model_status() == "loading the embedding model …"  # the graph is shipped
    monkeypatch.setenv("PATTERN_EMBED_QUANTIZE", "int8")  # its int8 variant is derived once
    assert settings.model_status() == "preparing the embedding model (one-time int8 quantization) …"
    monkeypatch.delenv("PATTERN_EMBED_QUANTIZE")
    folder = str(mean_pooling_folder(tmp_path / "custom"))  # another model: exported once
    custom = Settings.from_env(
        {"PATTERN_HOME": str(tmp_path / "home"), "PATTERN_EMBEDDING_MODEL": folder}, tmp_path
    )
    assert custom.model_status().startswith("preparing the embedding model")
    graph = onnx_model.cached_path(folder)
    graph.parent.mkdir(parents=True)
    graph.write_bytes(b"stands for a finished export")
    assert custom.model_status() == "loading the embedding model …"
    monkeypatch.setenv("PATTERN_EMBED_QUANTIZE", "int8")  # a second, quantized graph is due
    assert custom.model_status().startswith("preparing")
    monkeypatch.setenv("PATTERN_EMBED_BACKEND", "torch")
    monkeypatch.delenv("PATTERN_EMBED_QUANTIZE")
    assert settings.model_status() == "loading the embedding model …"
    hashed = Settings.from_env({"PATTERN_HOME": "x", "PATTERN_EMBEDDER": "hash"}, tmp_path)
    assert hashed.model_status() == "loading the embedding model …"


def test_a_vector_index_that_cannot_open_is_a_model_error(tmp_path, monkeypatch):
    from retrieval.engine import Engine

    def broken(self, start=True):
        raise RuntimeError("chroma is broken")

    monkeypatch.setattr(Engine, "open_vectors", broken)
    env = {"PATTERN_HOME": str(tmp_path), "PATTERN_EMBEDDER": "hash"}
    rt = Runtime.start(env, tmp_path, background=False)
    try:
        assert rt.model_error == "RuntimeError: chroma is broken"
        assert rt.engine.embedder is None  # searches stay lexical and say so
    finally:
        rt.close()


def _mapped_mb(path: str) -> float:
    """Resident MB of this process's mappings of ``path`` (SQLite's mmap windows)."""
    total, current = 0, ""
    with open("/proc/self/smaps") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0] and not parts[0].endswith(":"):
                current = parts[5] if len(parts) >= 6 else ""
            elif line.startswith("Rss:") and current == path:
                total += int(parts[1])
    return total / 1024


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_integrity_check_leaves_the_file_out_of_the_process_memory(tmp_path, make_record):
    from retrieval.engine import Engine

    eng = Engine(tmp_path / "store")  # lexical only: the file's pages are what counts here
    eng.add([make_record(f"filler {i} " + "page count text " * 1500) for i in range(400)])
    eng.store.checkpoint()
    eng.close()
    path = str(tmp_path / "store" / "pattern.sqlite3")
    size_mb = os.path.getsize(path) / 2**20
    assert size_mb > 8
    store = SQLiteStore(path)
    try:
        before = _mapped_mb(path)
        assert store.integrity_check() == []
        # it read every page; through the writer's mmap window they all stayed resident
        assert _mapped_mb(path) - before < 1.0, (before, _mapped_mb(path), size_mb)
    finally:
        store.close()


@pytest.mark.slow
def test_the_demo_prints_only_its_own_lines(tmp_path, real_embedder):
    """``make run`` on a fresh store: no warning, tracer or progress-bar line from the model
    (the export's own output is checked in test_onnx_backend; here it is cached)."""
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text(
        "# Sample\n\nThe fusion of lexical and vector scores happens in the hybrid ranker.\n\n"
        "Run the tests with make test, which creates the virtualenv first.\n"
    )
    env = {**os.environ, "PATTERN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("PATTERN_EMBED_BACKEND", None)
    env.pop("PATTERN_EMBEDDER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "server.cli", "demo", "--root", str(root), "how do I run tests"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("store: ")
    assert lines[1] == "loading the embedding model …"
    assert lines[2] == "stored 2 new paragraphs from 1 files"
    assert lines[3:5] == ["", "recall: 'how do I run tests'"]
    assert all(line.startswith((" 1.", " 2.")) for line in lines[5:]), lines
