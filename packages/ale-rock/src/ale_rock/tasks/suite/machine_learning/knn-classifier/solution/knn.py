import csv
import json
import math
from collections import Counter


def fit_scaler(rows):
    out = []
    for col in zip(*rows):
        mu = sum(col) / len(col)
        sd = math.sqrt(sum((v - mu) ** 2 for v in col) / len(col)) or 1.0
        out.append((mu, sd))
    return out


def scale(rows, scaler):
    return [[(v - mu) / sd for v, (mu, sd) in zip(r, scaler)] for r in rows]


def predict(train_X, train_y, X, k):
    out = []
    for x in X:
        near = sorted((math.dist(x, t), i) for i, t in enumerate(train_X))[:k]
        votes = Counter(train_y[i] for _, i in near)
        top = max(votes.values())
        tied = {c for c, v in votes.items() if v == top}
        out.append(next(train_y[i] for _, i in near if train_y[i] in tied))
    return out


def cross_val_accuracy(X, y, k, folds=5):
    n, accs = len(X), []
    for f in range(folds):
        lo, hi = f * n // folds, (f + 1) * n // folds
        trX, trY = X[:lo] + X[hi:], y[:lo] + y[hi:]
        sc = fit_scaler(trX)
        pred = predict(scale(trX, sc), trY, scale(X[lo:hi], sc), k)
        accs.append(sum(p == t for p, t in zip(pred, y[lo:hi])) / (hi - lo))
    return sum(accs) / folds


if __name__ == "__main__":
    rows = list(csv.DictReader(open("iris_like.csv")))
    X = [[float(r[f"f{i}"]) for i in range(1, 5)] for r in rows]
    y = [r["species"] for r in rows]
    cv = {k: cross_val_accuracy(X, y, k) for k in (1, 3, 5, 7, 9)}
    best = min(k for k in cv if cv[k] == max(cv.values()))
    json.dump({"k": best, "cv": {str(k): v for k, v in cv.items()}}, open("model.json", "w"), indent=2)
