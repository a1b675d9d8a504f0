import csv
import json
import math

from ale_testlib import read, run_all, test


def data():
    out = []
    for r in csv.DictReader(read("measurements.csv").splitlines()):
        try:
            out.append((float(r["t"]), float(r["y"])))
        except ValueError:
            pass
    return out


def ols(pts):
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    slope = sxy / sxx
    icpt = my - slope * mx
    ss_res = sum((p[1] - slope * p[0] - icpt) ** 2 for p in pts)
    ss_tot = sum((p[1] - my) ** 2 for p in pts)
    return slope, icpt, 1 - ss_res / ss_tot


def rel(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def fit():
    return json.loads(read("fit.json"))


@test
def linear_fit():
    s, i, r2 = ols(data())
    f = fit()["linear"]
    assert rel(f["slope"], s) and rel(f["intercept"], i) and rel(f["r2"], r2), (f, s, i, r2)


@test
def exponential_fit_and_half_life():
    s, i, _ = ols([(t, math.log(y)) for t, y in data() if y > 0])
    f = fit()
    assert rel(f["exponential"]["k"], -s) and rel(f["exponential"]["a"], math.exp(i)), f
    assert rel(f["half_life"], math.log(2) / -s), f


@test
def row_count():
    assert fit()["n"] == 28


run_all()
