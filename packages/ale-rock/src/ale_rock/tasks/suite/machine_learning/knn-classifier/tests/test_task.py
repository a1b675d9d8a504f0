import csv
import json
import math
import random
from collections import Counter

from ale_testlib import load_module, read, run_all, test


def data():
    rows = list(csv.DictReader(read("iris_like.csv").splitlines()))
    return [[float(r[f"f{i}"]) for i in range(1, 5)] for r in rows], [r["species"] for r in rows]


def ref_predict(tx, ty, X, k):
    out = []
    for x in X:
        d = sorted((math.dist(x, t), i) for i, t in enumerate(tx))[:k]
        votes = Counter(ty[i] for _, i in d)
        top = max(votes.values())
        tied = {c for c, v in votes.items() if v == top}
        out.append(next(ty[i] for _, i in d if ty[i] in tied))
    return out


def ref_cv(X, y, k, folds=5):
    n, accs = len(X), []
    for f in range(folds):
        lo, hi = f * n // folds, (f + 1) * n // folds
        trX, trY = X[:lo] + X[hi:], y[:lo] + y[hi:]
        cols = list(zip(*trX))
        sc = []
        for c in cols:
            mu = sum(c) / len(c)
            sd = math.sqrt(sum((v - mu) ** 2 for v in c) / len(c)) or 1.0
            sc.append((mu, sd))
        s = lambda rows: [[(v - mu) / sd for v, (mu, sd) in zip(r, sc)] for r in rows]  # noqa: E731
        pred = ref_predict(s(trX), trY, s(X[lo:hi]), k)
        accs.append(sum(p == t for p, t in zip(pred, y[lo:hi])) / (hi - lo))
    return sum(accs) / folds


@test
def model_json_matches_reference_cv():
    X, y = data()
    got = json.loads(read("model.json"))
    want = {k: ref_cv(X, y, k) for k in (1, 3, 5, 7, 9)}
    for k, a in want.items():
        assert abs(got["cv"][str(k)] - a) < 1e-9, (k, got["cv"][str(k)], a)
    best = max(want.values())
    assert got["k"] == min(k for k, a in want.items() if a == best), got["k"]


@test
def scaling_matters():
    m = load_module("knn.py", "knn")
    X, y = data()
    sc = m.fit_scaler(X[:100])
    pred = m.predict(m.scale(X[:100], sc), y[:100], m.scale(X[100:], sc), 5)
    acc = sum(p == t for p, t in zip(pred, y[100:])) / 50
    assert acc >= 0.85, acc


@test
def tie_break_and_constant_feature():
    m = load_module("knn.py", "knn")
    assert m.predict([[0.0], [1.0], [3.0], [4.0]], ["a", "b", "b", "a"], [[0.9]], 2) == ["b"]
    sc = m.fit_scaler([[1.0, 5.0], [3.0, 5.0]])
    assert [tuple(s) for s in sc] == [(2.0, 1.0), (5.0, 1.0)], sc


@test
def predictions_match_reference_on_random_data():
    m = load_module("knn.py", "knn")
    rng = random.Random(8)
    tx = [[rng.random(), rng.random()] for _ in range(40)]
    ty = [rng.choice("xyz") for _ in tx]
    X = [[rng.random(), rng.random()] for _ in range(30)]
    for k in (1, 4, 7):
        assert list(m.predict(tx, ty, X, k)) == ref_predict(tx, ty, X, k), k


run_all()
