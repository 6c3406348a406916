"""Fit the prompt gate (``server/service/prompting/gate.py``) on the questions ``benchmarks/hook_sizes.py``
asked, and report every fit's leave-one-set-out results.

    python benchmarks/hook_sizes.py ... --dump ASKED.pkl
    python -m benchmarks run gate_fit ASKED.pkl [--json OUT]

The dump holds, for every question asked at every project size (its own project and one of the
other set's), the hook's candidates in order with their explanation (cosine, bm25), whether
each holds evidence, and the excerpt the hook would quote. Here every candidate's gate features
are computed (``gate.features``: they read only the prompt and the record), and:

1. the logistic model is fit on the candidates of every set together (labels: holds evidence;
   every off-topic candidate is a negative), L2-regularised, by Newton's method;
2. the threshold is the lowest that keeps off-topic silence at or above the targets of every
   size (the gate's verdict must not depend on the size, so one threshold serves all);
3. leave-one-set-out: the same fit and threshold choice on all sets but one, the metrics on
   that one.

The metrics are the hook's (``benchmarks/hook_noise.py``): the candidates that clear the
threshold, in the hook's order, at most ``max_items``, packed within the budget by the hook's
own packing, with the dumped excerpts.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import hook_noise as hn  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402
from server.service.prompting import gate as gt  # noqa: E402
from server.service.prompting import hook_context as ar  # noqa: E402


class Asked:
    """One dumped question: candidates (record, features, holds, excerpt) in the hook's order."""

    def __init__(self, row: dict, records: dict, feats: np.ndarray) -> None:
        self.set, self.size, self.kind = row["set"], row["size"], row["kind"]
        self.text, self.evidence = row["text"], row["evidence"]
        self.records = [records[c[0]] for c in row["cands"]]
        self.holds = np.array([bool(c[2]) for c in row["cands"]])
        self.excerpts = [c[3] for c in row["cands"]]
        self.bm25 = np.array([c[1].lexical_score or 0.0 for c in row["cands"]])
        self.x = feats
        self.packed: dict = {}


def load(path: str) -> list[Asked]:
    blob = pickle.loads(Path(path).read_bytes())
    records, qvecs = blob["records"], blob["qvecs"]
    out = []
    terms_cache: dict = {}
    for row in blob["rows"]:
        terms = terms_cache.setdefault(row["text"], gt.prompt_terms(row["text"]))
        feats = np.array([gt.features(terms, records[rid], expl.vector_similarity)
                          for rid, expl, _, _ in row["cands"]], dtype=np.float64)  # fmt: skip
        out.append(Asked(row, records, feats.reshape(len(row["cands"]), len(gt.FEATURES))))
    del qvecs
    return out


def fit(asked: list[Asked], l2: float = 1.0, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method over every candidate, the two
    classes weighted to equal total weight (so the probability is centred, not the share of
    evidence among candidates)."""
    X = np.vstack([a.x for a in asked if len(a.x)])
    y = np.concatenate([a.holds & (a.kind == "own") for a in asked if len(a.x)]).astype(float)
    sw = np.where(y > 0, 0.5 / max(1.0, y.sum()), 0.5 / max(1.0, (1 - y).sum())) * len(y)
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    reg = np.full(Xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(Xb @ w, -30, 30)))
        g = Xb.T @ (sw * (p - y)) + reg * w
        h = (Xb * (sw * p * (1 - p))[:, None]).T @ Xb + np.diag(reg)
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def scores(a: Asked, model: gt.GateModel) -> np.ndarray:
    return np.array([model.relevance(float(c), float(v)) for c, v in a.x])


def clearing(s: np.ndarray, tau: float, config: ar.HookConfig) -> list[int]:
    """The candidates the hook keeps, in the search's order: those clearing ``tau``, at most
    ``max_items``."""
    return [i for i in range(len(s)) if s[i] >= tau][: config.max_items]


def injected(a: Asked, s: np.ndarray, tau: float, config: ar.HookConfig) -> list[int]:
    over = clearing(s, tau, config)
    key = tuple(over)
    if key not in a.packed:
        items = [(a.records[i], a.excerpts[i]) for i in over]
        a.packed[key] = ar._pack(items, config.prompt_tokens) if over else (0, "")
    n, _ = a.packed[key]
    return over[:n]


def former(a: Asked) -> np.ndarray:
    """The former relevance: cosine + 0.4 * (1 - e^(-bm25 / 10)), bm25 from the store's FTS5.
    At size 1 its bm25 is 0: a store of one record (or of two holding the same words) gives
    every term an IDF of 0 or below; the benchmark's shared store would not."""
    bm25 = np.zeros_like(a.bm25) if a.size == "1" else a.bm25
    return a.x[:, 0] + 0.4 * (1.0 - np.exp(-np.maximum(bm25, 0.0) / 10.0))


FORMER = (former, 0.68, ar.HookConfig(prompt_tokens=400))  # its threshold and budget


def metrics(asked: list[Asked], model, config: ar.HookConfig) -> dict:
    """{set: {size: {evidence, first3, evidence_text, off_topic_silent, questions}}} of a
    :class:`~server.service.prompting.gate.GateModel`, or of ``FORMER`` (scores, threshold, config)."""
    acc: dict = {}
    if isinstance(model, gt.GateModel):
        score, tau = (lambda a: scores(a, model)), model.threshold
    else:
        score, tau, config = model
    for a in asked:
        s = score(a)
        got = injected(a, s, tau, config)
        row = acc.setdefault(a.set, {}).setdefault(a.size, {"ev": 0, "f3": 0, "txt": 0,
                                                             "own": 0, "silent": 0, "off": 0})  # fmt: skip
        if a.kind == "own":
            held = [bool(a.holds[i]) for i in got]
            row["own"] += 1
            row["ev"] += any(held)
            row["f3"] += any(held[:3])
            text = a.packed[tuple(clearing(s, tau, config))][1]
            row["txt"] += any(hn.shown(e, text) for e in a.evidence) if any(held) else 0
        else:
            row["off"] += 1
            row["silent"] += not got
    out: dict = {}
    for name, sizes in acc.items():
        for size, r in sizes.items():
            out.setdefault(name, {})[size] = {
                "evidence": round(r["ev"] / max(1, r["own"]), 4),
                "first3": round(r["f3"] / max(1, r["own"]), 4),
                "evidence_text": round(r["txt"] / max(1, r["own"]), 4),
                "off_topic_silent": round(r["silent"] / max(1, r["off"]), 4),
                "questions": r["own"]}  # fmt: skip
    return out


SEMANTIC = (0.5, 0.55, 0.6, 9.0)  # 9: no semantic route
TARGETS = {"1": (0.85, 0.75, 0.95), "8": (0.85, 0.75, 0.95), "64": (0.80, 0.75, 0.90),
           "all": (0.70, 0.75, 0.90)}  # fmt: skip


def margin(m: dict) -> float:
    """The smallest distance to a target (negative: a target missed), over the sets measured."""
    out = 9.0
    for name, sizes in m.items():
        for size, r in sizes.items():
            lo, lm, silent = TARGETS.get(size, (0, 0, 0))
            ev = lo if name == "locomo" else lm
            out = min(out, r["evidence"] - ev, r["off_topic_silent"] - silent)
    return out


def choose(asked: list[Asked], coef, bias, config: ar.HookConfig) -> gt.GateModel:
    """The semantic cosine and threshold whose smallest distance to every target (evidence and
    off-topic silence, every set and size measured) is largest."""
    best = None
    for sem in SEMANTIC:
        for tau in np.round(np.arange(0.30, 0.61, 0.01), 2):
            model = gt.GateModel((float(coef[0]), float(coef[1])), float(bias), sem, float(tau))
            m = margin(metrics(asked, model, config))
            if best is None or m > best[0]:
                best = (m, model)
    return best[1]


def model_dict(m: gt.GateModel) -> dict:
    return {"coef": [round(c, 4) for c in m.coef], "bias": round(m.bias, 4),
            "semantic_cosine": m.semantic_cosine, "threshold": m.threshold}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump")
    p.add_argument("--l2", type=float, default=1.0)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    asked = load(args.dump)
    config = ar.HookConfig()
    sets = sorted({a.set for a in asked})
    coef, bias = fit(asked, args.l2)
    model = choose(asked, coef, bias, config)
    print(f"all sets: {model}")
    full = metrics(asked, model, config)
    print(json.dumps(full, indent=1))
    loso = {}
    for held in sets:
        train = [a for a in asked if a.set != held]
        c, b = fit(train, args.l2)
        m = choose(train, c, b, config)
        loso[held] = {"model": model_dict(m),
                      "result": metrics([a for a in asked if a.set == held], m, config)[held]}  # fmt: skip
        print(f"held out {held}: {m}", json.dumps(loso[held]["result"]))
    shipped = metrics(asked, gt.MODEL, config)
    print(f"the shipped model {gt.MODEL}: margin {margin(shipped):.3f}")
    before = metrics(asked, FORMER, config)
    print("the former relevance at 0.68, 400 tokens:", json.dumps(before))
    if args.json:
        full_run = {"features": list(gt.FEATURES), "model": model_dict(model), "result": full,
                    "margin": round(margin(full), 4), "leave_one_set_out": loso,
                    "shipped": {"model": model_dict(gt.MODEL), "result": shipped},
                    "former": before}  # fmt: skip
        write_json(args.json, full_run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
