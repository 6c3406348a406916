"""``benchmarks/hook_noise.py`` on tiny fixtures of both layouts (two LoCoMo conversations, a
three-session LongMemEval haystack): one store, questions asked of their own project and of the
other set's, the threshold curve computed offline equal to ``select_for_prompt`` itself."""

from __future__ import annotations

import json
from argparse import Namespace

from benchmarks import hook_noise, relevance
from retrieval.embedding.embedder import HashEmbedder
from server.service.prompting import hook_context as ar
from tests.bench.test_bench_harnesses import write_longmemeval
from tests.bench.test_sessions_bench import DATA


def test_hook_noise_curve_on_tiny_sets(tmp_path, capsys):
    data = tmp_path / "lme"
    data.mkdir()
    write_longmemeval(data)
    helpers = (relevance.locomo_sessions, relevance.locomo_date, relevance.evidence_ids)
    args = Namespace(longmemeval=str(data), limit=0, locomo_limit=0, check=10)
    res = hook_noise.run(args, DATA, HashEmbedder(), helpers)
    out = capsys.readouterr().out
    assert "indexed 6 exchange records" in out and "LongMemEval" in out
    assert res["questions"] == {"locomo": {"own": 4, "off": 4},
                                "longmemeval": {"own": 2, "off": 2}}  # fmt: skip
    # every offline selection is what select_for_prompt returns at that threshold
    assert res["check"]["selections"] == 2 * (4 + 2) * len(hook_noise.CHECK_THRESHOLDS)
    assert res["check"]["differing"] == 0
    rows = res["curve"]
    assert [r["threshold"] for r in rows] == hook_noise.THRESHOLDS
    for name in hook_noise.SETS:
        evidence = [r[name]["evidence"] for r in rows]
        silent = [r[name]["off_topic_silent"] for r in rows]
        assert silent == sorted(silent)  # (evidence need not fall: a dropped item frees room)
        assert evidence[0] >= evidence[-1]
        assert all(r[name]["first3"] <= r[name]["evidence"] for r in rows)
    # the hash embedder's cosines are low, but at 0.02 evidence is injected, and at 1.00 nothing
    assert rows[0]["locomo"]["evidence"] > 0 and rows[0]["longmemeval"]["evidence"] == 1.0
    assert rows[-1]["locomo"]["evidence"] == 0.0
    assert rows[-1]["locomo"]["off_topic_silent"] == 1.0
    sweep = res["budgets"]
    assert [(b["max_items"], b["prompt_tokens"]) for b in sweep] == [
        (i, t) for i in hook_noise.BUDGET_ITEMS for t in hook_noise.BUDGET_TOKENS
    ]
    json.dumps(res)  # the payload is what --json writes


def test_shown_needs_a_run_of_the_evidence_words():
    text = "> Alice said: the launch moved to Friday, May 3rd, after the review."
    assert hook_noise.shown("The launch moved to Friday, May 3rd", text)
    assert hook_noise.shown("moved to friday", text)  # shorter than the run: all of it
    assert not hook_noise.shown("The launch moved to Monday, May 3rd", text)
    assert not hook_noise.shown("", text)


def test_injected_applies_threshold_item_limit_and_budget():
    def cand(rel, words, holds=False):
        rec = ar.Record(project_id="p", agent_id="a", content=" ".join(["word"] * words))
        return (rel, rec, holds)

    a = hook_noise.Asked("q", "q", None, [cand(0.9, 5), cand(0.5, 5, True), cand(0.8, 5)])
    cfg = ar.HookConfig(max_items=6)
    assert [c[0] for c in hook_noise.injected(a, 0.7, cfg)] == [0.9, 0.8]  # the hook's order
    assert [c[0] for c in hook_noise.injected(a, 0.4, cfg)] == [0.9, 0.5, 0.8]
    assert [c[0] for c in hook_noise.injected(a, 0.4, ar.HookConfig(max_items=1))] == [0.9]
    assert hook_noise.injected(a, 0.95, cfg) == []
    big = hook_noise.Asked("q", "q", None, [cand(0.9, 600), cand(0.8, 5, True)])
    # the first item fills the 400-token budget (cut to fit): the second is not injected
    assert len(hook_noise.injected(big, 0.5, cfg)) == 1
    own = [a, big]
    p = hook_noise.point(own, [big], 0.4, cfg)
    assert p == {"off_topic_silent": 0.0, "evidence": 0.5, "first3": 0.5, "evidence_text": 0.0}
    # evidence_text: the evidence's own words must be in what is injected
    a.evidence = ["word word word word word"]
    a.packed.clear()
    assert hook_noise.point([a], [], 0.4, cfg)["evidence_text"] == 1.0
    big.evidence = ["a sentence that no candidate quotes"]
    assert hook_noise.point([big], [], 0.4, cfg)["evidence_text"] == 0.0
    # the ceiling: the budget cuts the second item, the item limit alone does not
    c = hook_noise.ceiling({"locomo": {"own": [big]}, "longmemeval": {"own": [a]}}, cfg)
    assert c["locomo"] == {"hook": 0.0, "items_no_budget": 1.0, "any_candidate": 1.0}
