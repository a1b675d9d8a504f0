import csv
import json
import random


def _d2(a, b):
    return sum((x - y) ** 2 for x, y in zip(a, b))


def _init(points, k, rng):
    cents = [points[rng.randrange(len(points))]]
    while len(cents) < k:
        w = [min(_d2(p, c) for c in cents) for p in points]
        total = sum(w)
        if total == 0:
            cents.append(points[rng.randrange(len(points))])
            continue
        r, acc = rng.random() * total, 0.0
        for p, wi in zip(points, w):
            acc += wi
            if acc >= r:
                cents.append(p)
                break
    return [tuple(c) for c in cents]


def _lloyd(points, cents, iters):
    labels = []
    for _ in range(iters):
        labels = [min(range(len(cents)), key=lambda j: _d2(p, cents[j])) for p in points]
        new = []
        for j in range(len(cents)):
            members = [p for p, lab in zip(points, labels) if lab == j]
            new.append(tuple(sum(v) / len(members) for v in zip(*members)) if members else cents[j])
        if new == cents:
            break
        cents = new
    labels = [min(range(len(cents)), key=lambda j: _d2(p, cents[j])) for p in points]
    inertia = sum(_d2(p, cents[lab]) for p, lab in zip(points, labels))
    return cents, labels, inertia


def kmeans(points, k, seed=0, iters=100, restarts=10):
    rng = random.Random(seed)
    points = [tuple(p) for p in points]
    best = None
    for _ in range(restarts):
        res = _lloyd(points, _init(points, k, rng), iters)
        if best is None or res[2] < best[2]:
            best = res
    return best


if __name__ == "__main__":
    pts = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(open("points.csv"))]
    cents, labels, inertia = kmeans(pts, 4)
    order = sorted(range(4), key=lambda j: cents[j][0])
    json.dump({"centroids": [list(cents[j]) for j in order], "inertia": inertia,
               "sizes": [labels.count(j) for j in order]}, open("clusters.json", "w"), indent=2)
