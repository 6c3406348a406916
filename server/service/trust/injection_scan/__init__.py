"""The instruction-injection detector: rule tables, the text they read, mentions, the linear-time rule search and a linear model over the text's embedding (`injection_model.npz`).

Imports: `retrieval.regexes`, `retrieval.embedding`, `retrieval` and this folder.
"""
