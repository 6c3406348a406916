"""Time and updates in ranking: time expressions in a query, the time prior, tense, and update links between records.

May import: `retrieval` only (tests/runtime/test_layers.py).
"""
