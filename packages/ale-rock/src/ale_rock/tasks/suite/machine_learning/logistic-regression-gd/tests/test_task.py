import json
import math
import random

from ale_testlib import load_module, read, run_all, test


def m():
    return load_module("logreg.py", "logreg")


def toy(seed, n=200):
    rng = random.Random(seed)
    X, y = [], []
    for _ in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        X.append([a, b])
        y.append(1 if 2 * a - b + rng.gauss(0, 0.3) > 0 else 0)
    return X, y


@test
def separates_hidden_data():
    X, y = toy(1)
    model = m().fit(X, y, lr=0.5, epochs=300)
    Xt, yt = toy(2)
    acc = sum(int(p) == t for p, t in zip(m().predict(model, Xt), yt)) / len(yt)
    assert acc >= 0.93, acc


@test
def gradient_descent_matches_definition():
    # one epoch from zeros: w = -lr * grad = lr * mean((y - 0.5) * x), b likewise
    X, y = [[1.0, 2.0], [3.0, -1.0], [0.0, 1.0]], [1, 0, 1]
    w, b = m().fit(X, y, lr=0.1, epochs=1)
    want_w = [0.1 * sum((t - 0.5) * x[j] for x, t in zip(X, y)) / 3 for j in range(2)]
    want_b = 0.1 * sum(t - 0.5 for t in y) / 3
    assert all(abs(a - c) < 1e-12 for a, c in zip(w, want_w)) and abs(b - want_b) < 1e-12, (w, b)


@test
def l2_shrinks_weights_and_loss_is_clipped():
    X, y = toy(3, 100)
    w0, _ = m().fit(X, y, lr=0.5, epochs=200)
    w1, _ = m().fit(X, y, lr=0.5, epochs=200, l2=1.0)
    assert math.hypot(*w1) < math.hypot(*w0) * 0.8, (w0, w1)
    loss = m().log_loss(([1000.0], 0.0), [[1.0], [-1.0]], [0, 1])
    assert abs(loss - (-math.log(1e-12))) < 1e-3, loss


@test
def metrics_file_plausible():
    r = json.loads(read("metrics.json"))
    assert 0.78 <= r["test_accuracy"] <= 1.0, r
    assert 0.33 < r["train_loss"] < 0.42, r


run_all()
