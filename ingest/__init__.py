"""What comes in from outside the store: workspace files (`workspace/`), agent transcripts (`sessions/`), episodes of work that teach a lesson (`learning/`), other memory servers' data (`importers/`).

May import: `ingest`, `retrieval` (tests/runtime/test_layers.py).
"""
