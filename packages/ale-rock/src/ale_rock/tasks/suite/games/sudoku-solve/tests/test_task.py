from ale_testlib import py, read, run_all, test

HARD = "100007090030020008009600500005300900010080002600004000300000010040000007007000300"
BAD = "550070000600195000098000060800060003400803001700020006060000280000419005000080079"


def grid(text):
    rows = [r.strip() for r in text.strip().splitlines()]
    assert len(rows) == 9 and all(len(r) == 9 and r.isdigit() for r in rows), text[:200]
    return rows


def valid(rows, puzzle):
    for i in range(9):
        assert set(rows[i]) == set("123456789"), f"row {i}"
        assert {rows[r][i] for r in range(9)} == set("123456789"), f"col {i}"
        b = {rows[3 * (i // 3) + r][3 * (i % 3) + c] for r in range(3) for c in range(3)}
        assert b == set("123456789"), f"box {i}"
    flat = "".join(rows)
    assert all(p == "0" or p == f for p, f in zip(puzzle, flat)), "givens changed"


@test
def solution_file_is_valid():
    valid(grid(read("solution.txt")), "".join(read("puzzle.txt").split()))


@test
def solver_on_hard_puzzle():
    p = py("sudoku.py", input="\n".join(HARD[i : i + 9] for i in range(0, 81, 9)) + "\n", timeout=10)
    assert p.returncode == 0, p.stderr[-300:]
    valid(grid(p.stdout), HARD)


@test
def solver_reports_unsolvable():
    p = py("sudoku.py", input="\n".join(BAD[i : i + 9] for i in range(0, 81, 9)) + "\n", timeout=10)
    assert p.stdout.strip() == "unsolvable", p.stdout[:200]


run_all()
