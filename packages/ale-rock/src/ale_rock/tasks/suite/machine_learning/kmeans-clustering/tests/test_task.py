import csv
import json
import random

from ale_testlib import load_module, read, run_all, test


def pts():
    return [(float(r["x"]), float(r["y"])) for r in csv.DictReader(read("points.csv").splitlines())]


def d2(a, b):
    return sum((x - y) ** 2 for x, y in zip(a, b))


def blobs(seed, k, n, dim):
    rng = random.Random(seed)
    centers = [[rng.uniform(-20, 20) for _ in range(dim)] for _ in range(k)]
    return [tuple(c + rng.gauss(0, 1.0) for c in centers[i % k]) for i in range(n)], k


@test
def clusters_file_recovers_blobs():
    r = json.loads(read("clusters.json"))
    cs = [tuple(c) for c in r["centroids"]]
    assert len(cs) == 4 and [c[0] for c in cs] == sorted(c[0] for c in cs), cs
    for true in [(-5, -5), (5, 5), (-5, 6), (6, -4)]:
        assert min(d2(true, c) for c in cs) < 0.5, (true, cs)
    assert sorted(r["sizes"]) == [60, 60, 60, 60], r["sizes"]


@test
def inertia_consistent_with_centroids():
    r = json.loads(read("clusters.json"))
    p = pts()
    inertia = sum(min(d2(x, c) for c in r["centroids"]) for x in p)
    assert abs(inertia - r["inertia"]) < 1e-6 * inertia, (inertia, r["inertia"])


@test
def function_contract_and_determinism():
    m = load_module("kmeans.py", "kmeans")
    data, k = blobs(7, 3, 90, 3)
    c1, l1, i1 = m.kmeans(data, k, seed=1)
    c2, l2, i2 = m.kmeans(data, k, seed=1)
    assert (c1, l1, i1) == (c2, l2, i2), "not deterministic for a seed"
    assert len(c1) == 3 and len(l1) == 90 and set(l1) == {0, 1, 2}
    assert abs(sum(d2(x, c1[lab]) for x, lab in zip(data, l1)) - i1) < 1e-6 * max(i1, 1)


@test
def near_optimal_on_hidden_data():
    m = load_module("kmeans.py", "kmeans")
    data, k = blobs(99, 5, 200, 2)
    _, labels, inertia = m.kmeans(data, k, seed=3)
    # reference: the true generating assignment gives an upper bound close to the optimum
    groups = {}
    for i, x in enumerate(data):
        groups.setdefault(i % k, []).append(x)
    best = 0.0
    for g in groups.values():
        c = tuple(sum(v) / len(g) for v in zip(*g))
        best += sum(d2(x, c) for x in g)
    assert inertia <= best * 1.01, (inertia, best)


run_all()
