"""Embeddings: the embedder protocol, the packaged model run by ONNX Runtime (`retrieval/model/`), its tokenizer.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
