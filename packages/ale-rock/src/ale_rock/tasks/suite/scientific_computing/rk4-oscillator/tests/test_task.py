import csv
import math

from ale_testlib import py, read, run_all, test


def exact(omega, zeta, x0, v0, t):
    wd = omega * math.sqrt(1 - zeta**2)
    a = zeta * omega
    c1, c2 = x0, (v0 + a * x0) / wd
    e = math.exp(-a * t)
    x = e * (c1 * math.cos(wd * t) + c2 * math.sin(wd * t))
    v = e * ((-a) * (c1 * math.cos(wd * t) + c2 * math.sin(wd * t)) + (-c1 * wd * math.sin(wd * t) + c2 * wd * math.cos(wd * t)))
    return x, v


def rows(text):
    r = list(csv.reader(text.strip().splitlines()))
    assert r[0] == ["t", "x", "v"], r[0]
    return [tuple(map(float, x)) for x in r[1:]]


@test
def trajectory_matches_analytic_solution():
    data = rows(read("trajectory.csv"))
    assert len(data) == 1001, len(data)
    for t, x, v in data[::50]:
        ex, ev = exact(2.0, 0.1, 1.0, 0.0, t)
        assert abs(x - ex) < 1e-7 and abs(v - ev) < 1e-7, (t, x, ex)


@test
def rk4_order_on_other_parameters():
    p = py("simulate.py", "3.0", "0.3", "0.0", "2.0", "0.05", "4")
    assert p.returncode == 0, p.stderr[-300:]
    data = rows(p.stdout)
    assert len(data) == 81 and abs(data[-1][0] - 4.0) < 1e-9, (len(data), data[-1])
    t, x, v = data[-1]
    ex, _ = exact(3.0, 0.3, 0.0, 2.0, t)
    # RK4 global error at dt=0.05 is ~1e-6 here; Euler or midpoint would be far worse.
    assert abs(x - ex) < 2e-5, (x, ex)


@test
def energy_ratio():
    got = float(read("energy.txt"))
    x0, v0 = 1.0, 0.0
    x, v = exact(2.0, 0.1, x0, v0, 10.0)
    want = (v * v + 4 * x * x) / (v0 * v0 + 4 * x0 * x0)
    assert abs(got - want) / want < 1e-5, (got, want)


run_all()
