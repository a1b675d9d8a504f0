import json
import random

from ale_testlib import load_module, read, run_all, test


def residual(A, x, b):
    return max(abs(sum(a * xi for a, xi in zip(row, x)) - bi) for row, bi in zip(A, b))


@test
def given_system_solved():
    s = json.loads(read("system.json"))
    x = json.loads(read("x.json"))
    assert len(x) == 4 and residual(s["A"], x, s["b"]) < 1e-9, x


@test
def needs_pivoting():
    m = load_module("linsolve.py", "linsolve")
    A = [[1e-20, 1.0], [1.0, 1.0]]
    x = m.solve(A, [1.0, 2.0])
    assert abs(x[0] - 1.0) < 1e-9 and abs(x[1] - 1.0) < 1e-9, x


@test
def random_well_conditioned_systems():
    m = load_module("linsolve.py", "linsolve")
    rng = random.Random(42)
    for n in (1, 3, 8, 20):
        A = [[rng.uniform(-1, 1) + (n if i == j else 0) for j in range(n)] for i in range(n)]
        b = [rng.uniform(-5, 5) for _ in range(n)]
        assert residual(A, m.solve([r[:] for r in A], b[:]), b) < 1e-9, n


@test
def singular_raises_and_det():
    m = load_module("linsolve.py", "linsolve")
    try:
        m.solve([[1, 2], [2, 4]], [3, 6])
        raise AssertionError("no ValueError for a singular matrix")
    except ValueError as e:
        assert "singular" in str(e)
    assert abs(m.det([[0, 1], [1, 0]]) + 1) < 1e-12
    assert abs(m.det([[2, 0, 0], [0, 3, 0], [1, 1, 4]]) - 24) < 1e-9
    assert abs(m.det([[1, 2], [2, 4]])) < 1e-12


@test
def inputs_not_modified():
    m = load_module("linsolve.py", "linsolve")
    A, b = [[2.0, 1.0], [1.0, 3.0]], [3.0, 5.0]
    m.solve(A, b)
    assert A == [[2.0, 1.0], [1.0, 3.0]] and b == [3.0, 5.0]


run_all()
