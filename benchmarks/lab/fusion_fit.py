"""Compare query views and fusions on the dumps of ``fusion_lab.py``; leave-one-set-out.

python -m benchmarks run fusion_fit /tmp/lab/*.pkl
"""

from __future__ import annotations

import itertools
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness.metrics import query_metrics  # noqa: E402
from benchmarks.harness.report import write_json  # noqa: E402

DEPTH = 100
METRIC = {"scifact": "ndcg@10"}


def load(paths):
    out = {}
    for p in paths:
        with open(p, "rb") as fh:
            d = pickle.load(fh)
        out[d["set"]] = d
    return out


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = np.nanmin(x), np.nanmax(x)
    return np.zeros_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)


def pool(L: np.ndarray, V: np.ndarray, depth: int = DEPTH) -> np.ndarray:
    top_l = np.argsort(-L, kind="stable")[:depth]
    top_l = top_l[L[top_l] > 0]
    top_v = np.argsort(-V, kind="stable")[:depth]
    return np.unique(np.concatenate([top_l, top_v]))


# ------------------------------------------------------------------ query views
def salient_index(q) -> int:
    return int(np.argmax(q["sal"])) if len(q["sal"]) else 0


def vec_view(q, how: str, heads: str = "none") -> np.ndarray:
    W, whole = q["v_win"], q["v_whole"]
    HW, hw = q["h_win"], q["h_whole"]

    def agg(W, whole):
        if len(W) <= 1 and q["words"] <= 48:
            return whole
        sal = np.maximum(q["sal"], 0)
        if how == "whole":
            return whole
        if how == "salient":
            return W[salient_index(q)]
        if how == "winmax":
            return W.max(0)
        if how == "winmean":
            return W.mean(0)
        if how.startswith("salw"):  # salw<p>: weights sal^p
            p = float(how[4:].split("+")[0])
            w = sal**p
            w = w / w.sum() if w.sum() > 0 else np.full(len(W), 1 / len(W))
            v = w @ W
            if "+whole" in how:
                v = 0.5 * v + 0.5 * whole
            return v
        if how == "whole+salient":
            return 0.5 * whole + 0.5 * W[salient_index(q)]
        if how == "whole+winmean":
            return 0.5 * whole + 0.5 * W.mean(0)
        raise ValueError(how)

    v = agg(W, whole)
    if heads == "none":
        return v
    h = agg(HW, hw)
    if heads == "max":
        return np.maximum(v, h)
    if heads == "mean":
        return 0.5 * (v + h)
    if heads == "only":
        return h
    raise ValueError(heads)


def lex_view(q, how: str) -> np.ndarray:
    if q["words"] <= 48 and how in ("salient",):
        return q["lex32"]
    if how == "salient":
        return q["lex_salient"] if q["lex_salient"] is not None else q["lex32"]
    return q[{"32": "lex32", "all": "lex_all", "rare64": "lex_rare64", "qtf": "lex_qtf"}[how]]


# ------------------------------------------------------------------ fusion
def convex(L, V, idx, alpha):
    return alpha * minmax(V[idx]) + (1 - alpha) * minmax(L[idx])


def margin(x: np.ndarray, k: int = 10) -> float:
    """How far the top stands out: (top1 - mean of top k) / (top1 - median of the pool)."""
    s = np.sort(x)[::-1]
    if len(s) < 3 or s[0] - np.median(s) <= 1e-12:
        return 0.0
    return float((s[0] - s[: min(k, len(s))].mean()) / (s[0] - np.median(s)))


def rank_of(q, L, V, fuse) -> list:
    idx = pool(L, V)
    s = fuse(L, V, idx)
    order = idx[np.argsort(-s, kind="stable")[:10]]
    return order


def score_sets(data, order_of, sets=None) -> dict:
    """Each set's metric (:data:`METRIC`) over its queries, ``order_of(q)`` the ranking."""
    out = {}
    for name, d in data.items():
        if sets is not None and name not in sets:
            continue
        m = METRIC.get(name, "recall@10")
        vals = []
        for q in d["queries"]:
            docs = d["docs"][q["docs"]]
            vals.append(query_metrics([docs[i] for i in order_of(q)], q["relevant"])[m])
        out[name] = float(np.mean(vals))
    return out


def evaluate(data, view, fuse, sets=None) -> dict:
    return score_sets(data, lambda q: rank_of(q, *view(q), fuse), sets)


def table(rows: list[tuple[str, dict]]) -> None:
    names = list(rows[0][1])
    print(f"{'':<40}" + "".join(f"{n:>13}" for n in names) + f"{'mean':>9}")
    for label, res in rows:
        print(f"{label:<40}" + "".join(f"{res[n]:>13.4f}" for n in names)
              + f"{np.mean(list(res.values())):>9.4f}")  # fmt: skip


def ramp(x: float, lo: float, hi: float) -> float:
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0)) if hi > lo else float(x >= lo)


def dominance(q, how: str = "gap") -> float:
    """How much the salient window stands out among the windows: 1 - s2/s1 ("gap") or the
    salient window's share of the total salience ("share")."""
    s = np.sort(np.maximum(q["sal"], 0))[::-1]
    if len(s) == 0 or s[0] <= 0:
        return 0.0
    if how == "gap":
        return float(1 - (s[1] / s[0] if len(s) > 1 else 0.0))
    return float(s[0] / s.sum())


def mixed_view(lbase: str, k: float, vbase: str, beta: float, heads: str = "none",
               adapt: str | None = None):  # fmt: skip
    """Salience as a weight: lexical = bm25(base terms) + k * bm25(salient window's terms)
    (bm25 is a sum over query terms, so this is the bm25 of the salient terms repeated k more
    times); vector = (1 - beta) * base view + beta * salient window."""

    def view(q):
        if adapt and isinstance(adapt, tuple):  # a ramp over the gap: (lo, hi)
            d = ramp(dominance(q, "gap"), *adapt) if q["words"] > 48 else 1.0
        else:
            d = dominance(q, adapt) if adapt and q["words"] > 48 else 1.0
        L = lex_view(q, lbase)
        if q["words"] > 48 and k and q["lex_salient"] is not None:
            L = L + d * k * q["lex_salient"]
        V = vec_view(q, vbase, heads)
        if q["words"] > 48 and beta:
            V = (1 - d * beta) * V + d * beta * vec_view(q, "salient", heads)
        return L, V

    return view


def main() -> None:
    """The family grid on every dump given, the leave-one-set-out choice, and the current
    ranker (the salient window alone) for comparison; JSON to ``--json``."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("dumps", nargs="+")
    p.add_argument("--json")
    args = p.parse_args()
    data = load(args.dumps)
    groups = {g: [s for s in ms if s in data] for g, ms in GROUPS.items()}
    groups = {g: ms for g, ms in groups.items() if ms}
    results = {}
    for a, al, k, sig, g in itertools.product((0.5, 0.6), (0.6, 0.7, 0.8), (0.0, 6.0, 10.0),
                                             SIGNALS, (0.0, 1.0)):  # fmt: skip
        lo, hi, signal = SIGNALS[sig]
        beta = 1.0 if k else 0.0
        key = (a, al, k, sig, g)
        results[key] = family_eval(data, a, al, k, beta, lo, hi, gamma=g, signal=signal)
        print(key, {n: round(v, 4) for n, v in results[key].items()}, flush=True)
    cur = lambda q: (lex_view(q, "salient"), vec_view(q, "salient"))  # noqa: E731
    current = evaluate(data, cur, lambda L, V, i: convex(L, V, i, 0.6))
    print("current ranker", {n: round(v, 4) for n, v in current.items()})
    loso = loso_grid(results, groups)
    for held, row in loso.items():
        print(held, row)
    if args.json:
        out = {"settings": "(alpha, long_alpha, salient_terms, signal, gamma)",
               "current": current, "loso": {h: {k: (list(v) if isinstance(v, tuple) else v)
                                               for k, v in r.items()} for h, r in loso.items()},
               "grid": [[list(k), v] for k, v in results.items()]}  # fmt: skip
        write_json(args.json, out, indent=1)


SIGNALS = {"gap": (0.2, 0.5, "gap"), "gap+gain": (0.2, 0.5, ("max", (0.0, 0.1)))}


# ------------------------------------------------------------------ learned fusion
def features(L: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
    lx, v = L[idx], V[idx]
    nl, nv = minmax(lx), minmax(v)
    rl = np.argsort(np.argsort(-lx, kind="stable"), kind="stable")
    rv = np.argsort(np.argsort(-v, kind="stable"), kind="stable")
    ml, mv = margin(lx), margin(v)
    return np.column_stack([
        nl, nv, nl * nv, 1 / (1 + rl) , 1 / (1 + rv),
        nl * ml, nv * mv, nl * mv, nv * ml,
    ])  # fmt: skip


def training_rows(data, view, names):
    X, y, w = [], [], []
    for name in names:
        d = data[name]
        qn = len(d["queries"])
        for q in d["queries"]:
            L, V = view(q)
            idx = pool(L, V)
            docs = d["docs"][q["docs"]]
            lab = np.array([docs[i] in q["relevant"] for i in idx], dtype=float)
            if lab.sum() == 0:
                continue
            X.append(features(L, V, idx))
            y.append(lab)
            # each set weighs the same; within a set each query; positives and negatives balanced
            pos, neg = lab.sum(), len(lab) - lab.sum()
            w.append(np.where(lab > 0, 0.5 / pos, 0.5 / max(neg, 1)) / qn)
    return np.concatenate(X), np.concatenate(y), np.concatenate(w)


def fit_logistic(X, y, w, l2: float = 1e-3, iters: int = 50) -> np.ndarray:
    """Weighted L2-regularised logistic regression by Newton's method (IRLS)."""
    Xb = np.column_stack([X, np.ones(len(X))])
    beta = np.zeros(Xb.shape[1])
    w = w / w.sum()
    for _ in range(iters):
        p = 1 / (1 + np.exp(-Xb @ beta))
        g = Xb.T @ (w * (p - y)) + l2 * beta
        H = (Xb * (w * p * (1 - p))[:, None]).T @ Xb + l2 * np.eye(len(beta))
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def learned(beta):
    return lambda L, V, idx: features(L, V, idx) @ beta[:-1]


def loso(data, view, groups: dict[str, list[str]]):
    """Fit on every group but one, score the one left out."""
    rows = {}
    for held, members in groups.items():
        train = [n for g, ms in groups.items() if g != held for n in ms]
        beta = fit_logistic(*training_rows(data, view, train))
        rows[held] = evaluate(data, view, learned(beta), sets=members)
    return rows


# ------------------------------------------------------------------ per-query weights
def adaptive(alpha: float, gamma: float, how: str = "margin"):
    """Convex fusion whose vector weight moves with how much each side's scores say:
    alpha_q = clip(alpha + gamma * (m_v - m_l), 0.1, 0.9), m = :func:`margin` on the pool."""

    def fuse(L, V, idx):
        if how == "margin":
            ml, mv = margin(L[idx]), margin(V[idx])
        else:  # agreement: the share of each side's top 10 the other side ranks in its top 10
            ml = mv = 0.0
        a = float(np.clip(alpha + gamma * (mv - ml), 0.1, 0.9))
        return a * minmax(V[idx]) + (1 - a) * minmax(L[idx])

    return fuse


# ------------------------------------------------------------------ the chosen family, LOSO
GROUPS = {"jira": ["jira"], "cosqa": ["cosqa"], "scifact": ["scifact"],
          "locomo": ["locomo", "locomo_long"]}  # fmt: skip


def grid(data, alphas=(0.4, 0.5, 0.6, 0.7), ks=(0, 1, 3, 6, 10), betas=(0.0, 0.5, 0.8, 1.0),
         gammas=(0.0, 1.0)) -> dict:  # fmt: skip
    """Every setting of (alpha, salient terms k, salient vector beta, margin gamma) scored on
    every set: {setting: {set: metric}}."""
    out = {}
    for a, k, b, g in itertools.product(alphas, ks, betas, gammas):
        view = mixed_view("rare64", k, "whole", b)
        out[(a, k, b, g)] = evaluate(data, view, adaptive(a, g))
        print((a, k, b, g), {n: round(v, 4) for n, v in out[(a, k, b, g)].items()}, flush=True)
    return out


def group_score(res: dict, groups: dict, names) -> float:
    """Mean over groups (each group: the mean of its sets) of ``names``."""
    return float(np.mean([np.mean([res[s] for s in groups[g]]) for g in names]))


def loso_grid(results: dict, groups: dict = GROUPS) -> dict:
    """For each group: the setting best on the others, its score on the one left out, and the
    left-out group's own best."""
    out = {}
    for held in groups:
        others = [g for g in groups if g != held]
        pick = max(results, key=lambda s: group_score(results[s], groups, others))
        best = max(results, key=lambda s: group_score(results[s], groups, [held]))
        out[held] = {"chosen_on_others": pick,
                     "held_out": round(group_score(results[pick], groups, [held]), 4),
                     "held_out_best": round(group_score(results[best], groups, [held]), 4),
                     "best_setting": best}  # fmt: skip
    pick = max(results, key=lambda s: group_score(results[s], groups, list(groups)))
    out["_all"] = {"chosen": pick, **{g: round(group_score(results[pick], groups, [g]), 4)
                                      for g in groups}}  # fmt: skip
    return out


def vs_gain(q) -> float:
    """How much better the salient window's best record matches than the whole query's."""
    return float(q["v_win"][salient_index(q)].max() - q["v_whole"].max())


def weight_of(q, lo, hi, signal):
    if signal == "gap":
        return ramp(dominance(q, "gap"), lo, hi)
    if signal == "vs":
        return ramp(vs_gain(q), lo, hi)
    g, v = signal  # ("max", (lo2, hi2)) for vs
    return max(ramp(dominance(q, "gap"), lo, hi), ramp(vs_gain(q), *v))


def family_eval(data, a_short, a_long, k, beta, lo, hi, gamma=0.0, lbase="rare64", sets=None,
                signal="gap"):  # fmt: skip
    """The shipped family (:func:`family_view`), with the vector weight of a long query moving
    from ``a_long`` (a report: w = 0) to ``a_short`` (a wrapped question: w = 1); a short query
    uses ``a_short``; gamma: the per-query margin adjustment."""
    view = family_view(k, beta, lo, hi, signal, lbase)

    def order_of(q):
        L, V, w = view(q, with_weight=True)
        a = a_short + (a_long - a_short) * (1 - w) if q["words"] > 48 else a_short
        return rank_of(q, L, V, adaptive(a, gamma))

    return score_sets(data, order_of, sets)


def family_view(k=10.0, beta=1.0, lo=0.2, hi=0.5, signal=("max", (0.0, 0.1)), lbase="rare64"):
    """(L, V) of the shipped family: a long query's salient window weighs w (:func:`weight_of`):
    k * w extra counts of its terms, beta * w of the vector side. ``with_weight``: also w."""

    def view(q, with_weight: bool = False):
        long = q["words"] > 48
        w = weight_of(q, lo, hi, signal) if long else 1.0
        L = lex_view(q, lbase if long else "32")
        V = q["v_whole"]
        if long and q["lex_salient"] is not None:
            L = L + w * k * q["lex_salient"]
            V = (1 - w * beta) * V + w * beta * vec_view(q, "salient")
        return (L, V, w) if with_weight else (L, V)

    return view


if __name__ == "__main__":
    main()
