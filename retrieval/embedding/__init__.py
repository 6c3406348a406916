"""Embeddings: the embedder protocol, the packaged model run by ONNX Runtime (`retrieval/model/`), its tokenizer.

Imports: `retrieval` (errors) and this folder.
"""
