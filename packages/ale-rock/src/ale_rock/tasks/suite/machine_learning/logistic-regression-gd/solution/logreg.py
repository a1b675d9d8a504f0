import csv
import json
import math


def _sig(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def predict_proba(model, X):
    w, b = model
    return [_sig(sum(wi * xi for wi, xi in zip(w, x)) + b) for x in X]


def predict(model, X, threshold=0.5):
    return [int(p >= threshold) for p in predict_proba(model, X)]


def log_loss(model, X, y):
    ps = [min(max(p, 1e-12), 1 - 1e-12) for p in predict_proba(model, X)]
    return -sum(t * math.log(p) + (1 - t) * math.log(1 - p) for p, t in zip(ps, y)) / len(y)


def fit(X, y, lr=0.1, epochs=500, l2=0.0):
    d, n = len(X[0]), len(X)
    w, b = [0.0] * d, 0.0
    for _ in range(epochs):
        ps = predict_proba((w, b), X)
        gw = [sum((p - t) * x[j] for p, t, x in zip(ps, y, X)) / n + l2 * w[j] for j in range(d)]
        gb = sum(p - t for p, t in zip(ps, y)) / n
        w = [wi - lr * g for wi, g in zip(w, gw)]
        b -= lr * gb
    return w, b


if __name__ == "__main__":
    rows = list(csv.DictReader(open("loans.csv")))
    X = [[float(r["income"]), float(r["debt"]), float(r["age"])] for r in rows]
    y = [int(r["default"]) for r in rows]
    cols = list(zip(*X))
    stats = [(sum(c) / len(c), math.sqrt(sum((v - sum(c) / len(c)) ** 2 for v in c) / len(c))) for c in cols]
    X = [[(v - mu) / sd for v, (mu, sd) in zip(x, stats)] for x in X]
    model = fit(X[:300], y[:300], l2=0.01)
    acc = sum(p == t for p, t in zip(predict(model, X[300:]), y[300:])) / len(y[300:])
    json.dump({"test_accuracy": acc, "train_loss": log_loss(model, X[:300], y[:300])}, open("metrics.json", "w"))
