"""Regular expressions that run in linear time (RE2 with Python's meaning) and the tables derived from them, kept between processes.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
