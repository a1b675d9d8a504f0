import bisect
import multiprocessing as mp
import random
import sys

from ale_testlib import run_all, test

CODE = open("search.py").read() if __import__("os").path.exists("search.py") else ""


def _worker(q, fn, arglist):
    ns = {}
    exec(CODE, ns)
    q.put([ns[fn](*args) for args in arglist])


def call_all(fn, arglist, timeout=1.0):
    """Run in a child process so a hanging implementation fails the test instead of the run."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_worker, args=(q, fn, arglist))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        raise AssertionError(f"{fn} hangs on one of {len(arglist)} inputs")
    assert not q.empty(), f"{fn} crashed"
    return q.get()


def call(fn, *args):
    return call_all(fn, [args])[0]


@test
def lower_bound_edges():
    xs = [1, 3, 3, 3, 7]
    cases = [(0, 0), (1, 0), (2, 1), (3, 1), (7, 4), (8, 5)]
    got = call_all("lower_bound", [(xs, x) for x, _ in cases])
    assert got == [w for _, w in cases], (got, cases)
    assert call("lower_bound", [], 5) == 0


@test
def upper_bound_edges():
    xs = [1, 3, 3, 3, 7]
    cases = [(0, 0), (1, 1), (3, 4), (7, 5), (9, 5)]
    got = call_all("upper_bound", [(xs, x) for x, _ in cases])
    assert got == [w for _, w in cases], (got, cases)


@test
def counts_match_bisect_on_random_lists():
    rng = random.Random(1234)
    cases = []
    for _ in range(5):
        xs = sorted(rng.randint(0, 30) for _ in range(rng.randint(0, 60)))
        cases += [(xs, x) for x in range(-1, 33, 4)]
    got = call_all("count", cases)
    for (xs, x), g in zip(cases, got):
        assert g == bisect.bisect_right(xs, x) - bisect.bisect_left(xs, x), (xs, x, g)


@test
def logarithmic_on_large_list():
    ns = {}
    exec(CODE, ns)
    assert "bisect" not in CODE, "uses bisect"
    xs = list(range(0, 400_000, 2))
    calls = [0]

    class Counting(list):
        def __getitem__(self, i):
            calls[0] += 1
            return list.__getitem__(self, i)

    big = Counting(xs)
    assert call("count", big, 77_778) == 1
    calls[0] = 0
    ns["count"](big, 77_778)
    assert calls[0] <= 100, f"{calls[0]} element reads for one count on 2e5 items"


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    run_all()
