"""The benchmarks behind docs/benchmarks.md: one module per question (``registry.py`` says which
answers which; ``python -m benchmarks list|run NAME``), their shared harness in ``harness/``
(data loading, the embedding cache, baselines, metrics, JSON and tables), and in ``lab/`` the
labs and fits that chose a setting.

Imports go one way: ``lab`` -> the benchmarks -> ``harness`` -> the library (``retrieval``,
``ingest``, ``graph``, ``server``); nothing imports ``lab``, and no two modules import each
other."""
