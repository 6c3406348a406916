"""The sentence-transformers model run by ONNX Runtime: same vectors, less CPU per text.

A mean-pooling model (Transformer -> mean Pooling -> optional Normalize, as all-MiniLM-L6-v2) is
exported once, from the local weights, to an ONNX graph in the cache folder
(``PATTERN_CACHE_DIR``, default the user cache folder); nothing is downloaded. ONNX Runtime
then runs it with one intra-op thread per call, so concurrent calls from worker threads run in
parallel (the GIL is released inside ``run``).

Measured on the 2-core benchmark machine (24-word SciFact sentences, one thread, see
docs/benchmarks.md "Session 3"): a query takes 8-9 ms instead of torch's 14 ms, and small
batches embed ~110 texts/s instead of ~95; the vectors equal torch's (cosine 1.0000).
``quantize="int8"`` adds per-channel dynamic int8 weights for the MatMuls: ~2x faster again, at
cosine ~0.993 to the float model, so it is a different model id and opt-in.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EXPORT_FORMAT = 1  # bump when the exported graph changes; old cache entries are ignored
OPSET = 17


def cache_dir() -> Path:
    """``PATTERN_CACHE_DIR`` or the user cache folder (``~/.cache/pattern-memory`` on Linux)."""
    root = os.environ.get("PATTERN_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("pattern-memory")
    return Path(root).expanduser() / "onnx"


def supported(st_model: Any) -> bool:
    """True for Transformer -> mean Pooling (-> Normalize): the graph :func:`export` writes."""
    names = [type(m).__name__ for m in st_model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    cfg = st_model[1].get_config_dict()
    mean = cfg.get("pooling_mode") == "mean" or (
        cfg.get("pooling_mode_mean_tokens") and not cfg.get("pooling_mode_cls_token")
    )
    return bool(mean) and cfg.get("include_prompt", True)


def model_digest(model_path: str) -> str:
    """Cache folder key: the model folder's path, its files' sizes and mtimes, the export format."""
    h = hashlib.sha256(f"{EXPORT_FORMAT}|{os.path.realpath(model_path)}".encode())
    for name in sorted(os.listdir(model_path)):
        p = os.path.join(model_path, name)
        if os.path.isfile(p):
            st = os.stat(p)
            h.update(f"|{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def input_names(st_model: Any) -> list[str]:
    features = st_model.preprocess(["a"])
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]


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

    with _written(dst) as tmp:
        quantize_dynamic(
            str(src),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


def ensure_exported(st_model: Any, model_path: str, quantize: str | None = None) -> Path:
    """The cached ONNX file for this model, exported (and quantized) on first use."""
    folder = cache_dir() / model_digest(model_path)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / ("model-int8.onnx" if quantize == "int8" else "model.onnx")
    if final.exists():
        return final
    log.info("exporting %s to ONNX (%s, once) into %s", model_path, quantize or "float", folder)
    if quantize == "int8":
        float_path = ensure_exported(st_model, model_path, None)
        quantize_int8(float_path, final)
    else:
        export(st_model, final)
    return final


class OnnxEncoder:
    """Runs the exported graph on tokenised features; thread-safe, one session per thread count."""

    def __init__(self, path: Path, input_names: list[str]) -> None:
        self.path = path
        self.input_names = input_names
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

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

    def __call__(self, features: dict[str, Any], threads: int = 1) -> np.ndarray:
        feed = {k: np.asarray(features[k], dtype=np.int64) for k in self.input_names}
        out = self.session(threads).run(None, feed)[0]
        return np.ascontiguousarray(out, dtype=np.float32)
