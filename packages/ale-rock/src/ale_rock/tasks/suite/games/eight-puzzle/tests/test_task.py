from ale_testlib import py, read, run_all, test

GOAL = "123456780"
DELTA = {"U": -3, "D": 3, "L": -1, "R": 1}


def apply(board, moves):
    b = list(board)
    for m in moves:
        z = b.index("0")
        assert m in DELTA, f"bad move {m!r}"
        n = z + DELTA[m]
        assert 0 <= n < 9 and not (m in "LR" and n // 3 != z // 3), f"illegal move {m} on {''.join(b)}"
        b[z], b[n] = b[n], b[z]
    return "".join(b)


# Optimal lengths, precomputed by a breadth-first search over all 181,440 reachable boards;
# None marks a board of the other parity (unsolvable).
OPT = {
    "270643851": 24, "718563240": 22, "148702536": 20, "430517862": 18, "123456870": None,
    "123456708": 1, "123456780": 0, "120453786": 2, "413726580": 8, "812043765": None,
}
HIDDEN = ["270643851", "718563240", "148702536", "430517862", "123456870"]


def check(boards, lines):
    assert len(lines) == len(boards), (len(lines), len(boards))
    for b, line in zip(boards, lines):
        line = line.strip()
        if OPT[b] is None:
            assert line == "unsolvable", (b, line)
            continue
        assert apply(b, line) == GOAL, (b, line)
        assert len(line) == OPT[b], (b, len(line), OPT[b])


@test
def moves_file_for_samples():
    boards = read("boards.txt").split()
    check(boards, read("moves.txt").split("\n")[: len(boards)])


@test
def hardest_hidden_boards():
    p = py("puzzle.py", input="\n".join(HIDDEN) + "\n", timeout=20)
    assert p.returncode == 0, p.stderr[-300:]
    check(HIDDEN, p.stdout.split("\n")[: len(HIDDEN)])


@test
def unsolvable_detected():
    p = py("puzzle.py", input="213456780\n", timeout=20)
    assert p.stdout.strip() == "unsolvable", p.stdout[:100]


run_all()
