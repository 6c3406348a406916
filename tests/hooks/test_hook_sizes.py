"""``benchmarks/hook_sizes.py`` and ``benchmarks/lab/gate_fit.py`` on tiny fixtures of both layouts:
projects of every size built from a question's evidence and random others, the hook's own
selection asked of each (offline equal to ``select_for_prompt``), and the gate fit on the dump."""

from __future__ import annotations

import json
import random
from argparse import Namespace

from benchmarks import hook_sizes, relevance
from benchmarks.lab import gate_fit
from retrieval.embedding.embedder import HashEmbedder
from retrieval.records import Record
from server.service.prompting import gate
from server.service.prompting import hook_context as ar
from tests.bench.test_bench_harnesses import write_longmemeval
from tests.bench.test_sessions_bench import DATA


def test_a_sized_project_holds_the_evidence_and_random_others():
    units = [Record(project_id="p", agent_id="a", content=f"unit {i}") for i in range(20)]
    evidence = [units[3], units[11]]
    got = hook_sizes.sized(units, evidence, 8, random.Random(0))
    assert len(got) == 8 and {r.id for r in evidence} <= {r.id for r in got}
    assert [r.id for r in got] == [r.id for r in units if r in got]  # in stored order
    assert hook_sizes.sized(units, evidence, 1, random.Random(0)) == evidence  # at least these
    again = hook_sizes.sized(units, evidence, 8, random.Random(0))
    assert [r.id for r in again] == [r.id for r in got]  # seeded


def test_every_size_through_the_hooks_selection_and_the_fit(tmp_path, capsys):
    data = tmp_path / "lme"
    data.mkdir()
    write_longmemeval(data)
    helpers = (relevance.locomo_sessions, relevance.locomo_date, relevance.evidence_ids)
    dump = tmp_path / "asked.pkl"
    args = Namespace(longmemeval=str(data), limit=0, locomo_limit=0, sizes="1,2,all", seed=0,
                     check=10, dump=str(dump))  # fmt: skip
    res = hook_sizes.run(args, DATA, HashEmbedder(), helpers)
    out = capsys.readouterr().out
    assert "asked locomo at size 2" in out and "dumped" in out
    assert set(res["sizes"]) == {"1", "2", "all"}
    for row in res["sizes"].values():
        assert row["locomo"]["questions"] == 4 and row["longmemeval"]["questions"] == 2
        for name in hook_sizes.SETS:
            r = row[name]
            assert 0 <= r["first3"] <= r["evidence"] <= 1 and 0 <= r["off_topic_silent"] <= 1
    # every offline selection is what select_for_prompt returns with the default configuration
    assert res["check"]["selections"] > 0 and res["check"]["differing"] == 0
    assert res["threshold"] == ar.HookConfig().threshold
    for size, rows in res["curve"].items():
        silent = [r["locomo"]["off_topic_silent"] for r in rows]
        assert silent == sorted(silent), size
    json.dumps(res)
    # the dump feeds the fit: features from the pair alone, a model, its metrics per size
    asked = gate_fit.load(str(dump))
    assert {a.size for a in asked} == {"1", "2", "all"} and all(a.x.shape[1] == 2 for a in asked)
    coef, bias = gate_fit.fit(asked)
    model = gate_fit.choose(asked, coef, bias, ar.HookConfig())
    assert isinstance(model, gate.GateModel) and 0.3 <= model.threshold <= 0.6
    m = gate_fit.metrics(asked, model, ar.HookConfig())
    assert set(m) == {"locomo", "longmemeval"} and set(m["locomo"]) == {"1", "2", "all"}
