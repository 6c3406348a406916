"""The sentence-transformers model run by ONNX Runtime: same vectors, less CPU, no torch.

The default model, all-MiniLM-L6-v2, ships with the package as a ready ONNX graph
(:data:`PACKAGED_MODEL`: ``model.onnx``, its ``tokenizer.json`` and configuration, built by
``scripts/export_model.py`` from the published weights): serving it needs only ``onnxruntime``
and ``tokenizers`` (:mod:`retrieval.embedding.tokenizer`), and nothing is exported at run time.

Any other mean-pooling model folder (Transformer -> mean Pooling -> optional Normalize, given
as ``PATTERN_EMBEDDING_MODEL``) is exported once, from its local weights, to an ONNX graph in
the cache folder (``PATTERN_CACHE_DIR``, default the user cache folder); nothing is downloaded.
That export needs torch and sentence-transformers (the optional ``[torch]`` extra), so it runs
in a child process (``python -m retrieval.embedding.onnx_model FOLDER --out-dir DIR``): the serving
process never imports torch, and its memory holds one copy of the weights. The child checks its
graph against sentence-transformers' own ``encode`` before the file lands in the cache (cosine
>= :data:`CHECK_COSINE`), and prints nothing unless it fails.

ONNX Runtime runs the graph with one intra-op thread per call, so concurrent calls from worker
threads run in parallel (the GIL is released inside ``run``). Measured on the 2-core benchmark
machine (24-word SciFact sentences, one thread, see docs/benchmarks.md, "Scale"): a query
takes 8-9 ms instead of torch's 14 ms, and small batches embed ~110 texts/s instead of ~95.
``quantize="int8"`` adds per-channel dynamic int8 weights for the MatMuls: ~2x faster again, at
cosine ~0.993 to the float model, so it is a different model id and opt-in (for the packaged
model it is derived from the shipped graph, without torch).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embedding.tokenizer import ModelTokenizer, read_json, sbert_config
from retrieval.storage import locks

log = logging.getLogger(__name__)

# the packaged all-MiniLM-L6-v2: a ready graph, its tokenizer and configuration (package data)
PACKAGED_MODEL = Path(__file__).resolve().parents[1] / "model" / "all-MiniLM-L6-v2"
TORCH_EXTRA = "pip install 'pattern-memory[torch]'"

EXPORT_FORMAT = 1  # bump when the exported graph changes; old cache entries are ignored
OPSET = 17
EXPORT_TIMEOUT_S = 1800.0
EXPORT_LOCK = ".export.lock"  # in the cache folder: one export per folder at a time
CHECK_COSINE = 0.9999  # the float graph against sentence-transformers' encode, at export time
CHECK_TEXTS = [
    "The cat sat on the mat.",
    "NullPointerException thrown in org.jfree.chart.Foo.bar while rendering the legend",
    "東京は日本の首都です。 Café naïve 😀",
    "ok",
    "word " * 400,  # truncated at max_seq_length
]


class ExportFailed(RuntimeError):
    """The export child failed; the message ends with the last lines it printed."""


class MissingExtra(RuntimeError):
    """A feature needs the optional ``[torch]`` extra, which is not installed."""


def require_torch_extra(what: str) -> None:
    """Raise :class:`MissingExtra` (one line, naming the extra) unless torch and
    sentence-transformers are importable; imports neither."""
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("torch", "sentence_transformers")):
        raise MissingExtra(f"{what} needs the optional [torch] extra: {TORCH_EXTRA}")


def is_packaged(model_path: str | os.PathLike[str]) -> bool:
    """True for the packaged model folder, whose graph is shipped rather than exported."""
    return os.path.realpath(model_path) == str(PACKAGED_MODEL)


def cache_dir() -> Path:
    """``PATTERN_CACHE_DIR`` or the user cache folder (``~/.cache/pattern-memory`` on Linux)."""
    root = os.environ.get("PATTERN_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("pattern-memory")
    return Path(root).expanduser() / "onnx"


def unsupported(folder: str | os.PathLike[str]) -> str | None:
    """Why the model folder cannot be served by ONNX Runtime, or None when it can: its modules
    must be Transformer -> mean Pooling (-> Normalize), the graph :func:`export` writes, with a
    ``tokenizer.json``. Read from the folder's files, without loading the model."""
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder} is not a local model folder"
    modules = read_json(folder / "modules.json")
    if not isinstance(modules, list):
        return "no modules.json"
    names = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return f"modules {names}: only Transformer -> mean Pooling models are exported"
    if modules[0].get("path"):
        return "the Transformer module is not at the folder's root"
    cfg = read_json(folder / modules[1].get("path", "") / "config.json")
    mean = cfg.get("pooling_mode") == "mean" or (
        cfg.get("pooling_mode_mean_tokens")
        and not any(cfg.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens"))
        and not cfg.get("pooling_mode_mean_sqrt_len_tokens")
    )
    if not mean or not cfg.get("include_prompt", True):
        return "only Transformer -> mean Pooling models are exported"
    if not (folder / "tokenizer.json").is_file():
        return "no tokenizer.json"
    if sbert_config(folder).get("do_lower_case"):
        return "do_lower_case models are served by the torch backend"
    return None


def model_digest(model_path: str) -> str:
    """Cache folder key: the model folder's path, its files' sizes and mtimes, the export format."""
    h = hashlib.sha256(f"{EXPORT_FORMAT}|{os.path.realpath(model_path)}".encode())
    for name in sorted(os.listdir(model_path)):
        p = os.path.join(model_path, name)
        if os.path.isfile(p):
            st = os.stat(p)
            h.update(f"|{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def graph_name(quantize: str | None) -> str:
    return "model-int8.onnx" if quantize == "int8" else "model.onnx"


def cached_path(model_path: str, quantize: str | None = None) -> Path:
    """Where the export of ``model_path`` lives in the cache (whether or not it exists yet)."""
    return cache_dir() / model_digest(model_path) / graph_name(quantize)


def graph_path(model_path: str, quantize: str | None = None) -> Path:
    """The graph that serves ``model_path``: the shipped file for the packaged model (float),
    else its cache entry (whether or not it exists yet)."""
    if quantize is None and is_packaged(model_path):
        return PACKAGED_MODEL / graph_name(None)
    return cached_path(model_path, quantize)


@contextmanager
def _written(dst: Path) -> Iterator[Path]:
    """A temporary path that becomes ``dst`` only when the block succeeds (removed otherwise),
    so a failed or interrupted export never leaves a file the cache would take as done."""
    tmp = dst.with_suffix(f".tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_exported(model_path: str, quantize: str | None = None) -> Path:
    """The ONNX file that serves this model: the shipped graph for the packaged model (its int8
    variant derived from it into the cache, in this process, without torch), else the cached
    export, made (and quantized) by a child process on first use; this process never imports
    torch."""
    final = graph_path(model_path, quantize)
    if final.exists():
        return final
    packaged = is_packaged(model_path)
    if not packaged:
        require_torch_extra(f"exporting {model_path} to ONNX")
    final.parent.mkdir(parents=True, exist_ok=True)
    with locks.exclusive(final.parent / EXPORT_LOCK):  # one export per folder (others wait)
        if not final.exists():
            log.info("preparing %s for ONNX (%s, once) in %s", model_path, quantize, final.parent)
            if packaged:
                quantize_packaged(final)
            else:
                _run_export_child(model_path, quantize, final.parent)
    if not final.exists():
        raise ExportFailed(f"the export child wrote no {final.name} into {final.parent}")
    return final


def _run_export_child(model_path: str, quantize: str | None, out_dir: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])  # this checkout, ahead of any install
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "retrieval.embedding.onnx_model",
        model_path,
        "--out-dir",
        str(out_dir),
    ]
    if quantize:
        cmd += ["--quantize", quantize]
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise ExportFailed(f"ONNX export of {model_path} failed (exit {proc.returncode}): {tail}")


# ---------------------------------------------------------------- the export child (torch)


def _quiet() -> None:
    """No tracer, deprecation or progress-bar output from the export."""
    import warnings

    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TQDM_DISABLE": "1",
    }.items():
        os.environ.setdefault(key, value)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)


def load_sentence_transformer(model_path: str, threads: int | None = None) -> Any:
    """The sentence-transformers model, offline and quiet (no progress bars)."""
    require_torch_extra("sentence-transformers models on torch")
    _quiet()
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(model_path, device="cpu")
    model.eval()
    return model


def input_names(st_model: Any) -> list[str]:
    features = st_model.preprocess(["a"])
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]


def export(st_model: Any, dst: Path) -> None:
    """Write the float graph (token ids -> normalised mean-pooled vector) to ``dst``."""
    import torch

    names = input_names(st_model)
    hf = st_model[0].auto_model

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            kw = dict(zip(names, inputs, strict=True))
            hidden = self.hf(**kw).last_hidden_state
            mask = kw["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    example = st_model.preprocess(["an example sentence"])
    axes = {k: {0: "batch", 1: "tokens"} for k in names} | {"embedding": {0: "batch"}}
    with _written(dst) as tmp, torch.inference_mode(False), torch.no_grad():
        torch.onnx.export(
            MeanPooled().eval(),
            tuple(example[k] for k in names),
            str(tmp),
            input_names=names,
            output_names=["embedding"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def quantize_int8(src: Path, dst: Path) -> None:
    """Per-channel dynamic int8 weights for the MatMuls (embeddings and norms stay float)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # the quantizer's advice to pre-process goes to logging.warning(), which would also set up
    # a stderr handler on the root logger: a handler for the call, and a filter for that line
    root = logging.getLogger()
    stand_in = logging.NullHandler() if not root.handlers else None
    advice = logging.Filter("-")  # drops what is logged on the root logger itself, nothing else
    if stand_in:
        root.addHandler(stand_in)
    root.addFilter(advice)
    try:
        with _written(dst) as tmp:
            quantize_dynamic(
                str(src),
                str(tmp),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    finally:
        root.removeFilter(advice)
        if stand_in:
            root.removeHandler(stand_in)


def quantize_packaged(dst: Path) -> None:
    """The int8 variant of the packaged graph: its weights restored to float32 (ONNX Runtime's
    constant folding, written out), then :func:`quantize_int8`."""
    import onnxruntime as ort

    float_path = dst.with_name(f"model-float.tmp{os.getpid()}.onnx")
    try:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(float_path)
        ort.InferenceSession(
            str(PACKAGED_MODEL / graph_name(None)), opts, providers=["CPUExecutionProvider"]
        )
        quantize_int8(float_path, dst)
    finally:
        float_path.unlink(missing_ok=True)


def check_export(st_model: Any, model_path: str, graph: Path) -> float:
    """The lowest cosine between the graph (fed by :class:`ModelTokenizer`, as the server
    feeds it) and sentence-transformers' ``encode`` over :data:`CHECK_TEXTS`."""
    ours = OnnxEncoder(graph, ModelTokenizer(model_path))(CHECK_TEXTS)
    theirs = st_model.encode(CHECK_TEXTS, normalize_embeddings=True, show_progress_bar=False)
    return float((ours * np.asarray(theirs, dtype=np.float32)).sum(1).min())


def export_folder(model_path: str, out_dir: Path, quantize: str | None = None) -> Path:
    """Export (and check, and quantize) ``model_path`` into ``out_dir``, in this process."""
    reason = unsupported(model_path)
    if reason:
        raise ValueError(reason)
    out_dir.mkdir(parents=True, exist_ok=True)
    float_path = out_dir / graph_name(None)
    if not float_path.exists():
        st_model = load_sentence_transformer(model_path)
        export(st_model, float_path)
        cos = check_export(st_model, model_path, float_path)
        if cos < CHECK_COSINE:
            float_path.unlink()
            raise ValueError(f"the exported graph differs from the model: cosine {cos:.6f}")
    if quantize != "int8":
        return float_path
    final = out_dir / graph_name(quantize)
    if not final.exists():
        quantize_int8(float_path, final)
    return final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m retrieval.embedding.onnx_model",
        description="Export a sentence-transformers model folder to ONNX (needs torch).",
    )
    ap.add_argument("model", help="the local model folder")
    ap.add_argument(
        "--out-dir", help="folder for model.onnx (default: the cache entry the server reads)"
    )
    ap.add_argument("--quantize", choices=["int8"], help="also write model-int8.onnx")
    args = ap.parse_args(argv)
    _quiet()
    out = Path(args.out_dir) if args.out_dir else cached_path(args.model).parent
    try:
        print(export_folder(args.model, out, args.quantize))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------- serving


def _trim_heap() -> None:
    """Hand freed heap back to the OS (glibc keeps it); a no-op without ``malloc_trim``."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


class OnnxEncoder:
    """Texts -> normalised vectors through the exported graph; thread-safe, one session per
    thread count. The session for ``threads`` is built (and run once) at construction, so the
    first query pays neither."""

    def __init__(self, path: Path, tokenizer: ModelTokenizer, threads: int = 1) -> None:
        self.path = Path(path)
        self.tokenizer = tokenizer
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()
        sess = self.session(threads)
        self.input_names = [i.name for i in sess.get_inputs()]
        missing = set(self.input_names) - {"input_ids", "attention_mask", "token_type_ids"}
        if missing:
            raise ValueError(f"{self.path}: the graph wants inputs {sorted(missing)}")
        self.dimension = int(self(["warm up"], threads).shape[1])
        _trim_heap()  # the parsed graph is freed by now: ~30 MB glibc would otherwise keep

    def session(self, threads: int) -> Any:
        with self._lock:
            sess = self._sessions.get(threads)
            if sess is None:
                import onnxruntime as ort

                opts = ort.SessionOptions()
                opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                sess = ort.InferenceSession(
                    str(self.path), opts, providers=["CPUExecutionProvider"]
                )
                self._sessions[threads] = sess
            return sess

    def __call__(self, texts: list[str], threads: int = 1) -> np.ndarray:
        features = self.tokenizer(texts)
        feed = {k: features[k] for k in self.input_names}
        out = self.session(threads).run(None, feed)[0]
        return np.ascontiguousarray(out, dtype=np.float32)


if __name__ == "__main__":
    sys.exit(main())
