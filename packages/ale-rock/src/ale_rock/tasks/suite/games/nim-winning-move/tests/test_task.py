from functools import cache
from itertools import product

from ale_testlib import load_module, py, run_all, test


@cache
def wins(heaps, misere):
    if sum(heaps) == 0:
        return misere  # previous player took the last object
    return any(not wins(tuple(sorted(h)), misere) for h in children(heaps))


def children(heaps):
    for i, h in enumerate(heaps):
        for k in range(1, h + 1):
            yield heaps[:i] + (h - k,) + heaps[i + 1 :]


def expected(mode, heaps):
    misere = mode == "misere"
    for i, h in enumerate(heaps):
        for k in range(1, h + 1):
            nxt = heaps[:i] + (h - k,) + heaps[i + 1 :]
            if not wins(tuple(sorted(nxt)), misere):
                return f"{i} {k}"
    return "lose"


def ask(mode, heaps):
    p = py("nim.py", mode, *map(str, heaps))
    assert p.returncode == 0, p.stderr[-300:]
    return p.stdout.strip()


@test
def normal_classic_positions():
    for heaps in [(3, 4, 5), (1, 2, 3), (7,), (0, 0), (5, 5, 1)]:
        assert ask("normal", heaps) == expected("normal", heaps), heaps


@test
def misere_endgame_positions():
    for heaps in [(1, 1, 1), (1, 1), (2, 1, 1), (3,), (1,), (2, 2)]:
        assert ask("misere", heaps) == expected("misere", heaps), heaps


@test
def exhaustive_small_boards():
    nim = load_module("nim.py")
    for mode in ("normal", "misere"):
        for heaps in product(range(4), repeat=3):
            assert nim.best_move(mode, list(heaps)) == expected(mode, heaps), (mode, heaps)


run_all()
