"""What the benchmarks share: the labelled sets' readers (``data``), the synthetic store of the
scale runs (``corpus``), the embedding cache (``embed_cache``), the plain baselines
(``baselines``), the ranking metrics (``metrics``, ``time_metrics``), one labelled set asked of
the engine (``ranking``), the printed table and the ``--json`` file (``report``), a PostgreSQL
for a run (``pg``) and the checkouts measured (``trees``: this one, a previous release). It
imports the library and itself, never a benchmark."""
