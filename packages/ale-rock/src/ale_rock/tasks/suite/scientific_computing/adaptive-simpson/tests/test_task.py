import math

from ale_testlib import load_module, read, run_all, test


def m():
    return load_module("integrate.py", "integrate")


@test
def simpson_exact_for_cubics():
    assert abs(m().simpson(lambda x: x**3 - 2 * x, 0, 2, 2) - 0.0) < 1e-12
    assert abs(m().simpson(lambda x: 3 * x**2, 1, 3, 4) - 26.0) < 1e-12


@test
def simpson_rejects_odd_n_and_handles_reversed():
    try:
        m().simpson(math.sin, 0, 1, 3)
        raise AssertionError("odd n accepted")
    except ValueError:
        pass
    assert abs(m().simpson(math.cos, math.pi / 2, 0, 100) + 1.0) < 1e-7


@test
def adaptive_accuracy():
    assert abs(m().adaptive_simpson(lambda x: 1 / (1 + x * x), 0, 1, 1e-10) - math.pi / 4) < 1e-9
    assert abs(m().adaptive_simpson(lambda x: math.sqrt(x), 0, 4, 1e-10) - 16 / 3) < 1e-7


@test
def results_file():
    vals = [float(x) for x in read("results.txt").split()]
    want = [0.8820813908, 0.7122645239, 2 / 3]
    assert len(vals) == 3 and all(abs(a - b) < 1e-7 for a, b in zip(vals, want)), vals


run_all()
