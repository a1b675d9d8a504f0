from collections import deque

from ale_testlib import read, run_all, test

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def grid():
    return [list(r) for r in read("maze.txt").splitlines() if r]


def find(g, ch):
    return next((r, c) for r, row in enumerate(g) for c, x in enumerate(row) if x == ch)


def shortest(g):
    s, key = find(g, "S"), find(g, "K")
    start = (s, False)
    dist = {start: 0}
    q = deque([start])
    while q:
        (pos, has), d = q.popleft(), None
        d = dist[(pos, has)]
        if g[pos[0]][pos[1]] == "E" and has:
            return d
        for dr, dc in MOVES.values():
            r, c = pos[0] + dr, pos[1] + dc
            if g[r][c] != "#":
                st = ((r, c), has or (r, c) == key)
                if st not in dist:
                    dist[st] = d + 1
                    q.append(st)
    raise AssertionError("no path")


def walk(path):
    g = grid()
    pos, key, has = find(g, "S"), find(g, "K"), False
    for m in path:
        assert m in MOVES, f"bad move {m!r}"
        pos = (pos[0] + MOVES[m][0], pos[1] + MOVES[m][1])
        assert g[pos[0]][pos[1]] != "#", f"walks into a wall at {pos}"
        has = has or pos == key
    return g[pos[0]][pos[1]], has


@test
def path_is_legal_and_reaches_exit():
    end, has = walk(read("path.txt").strip())
    assert end == "E", "path does not end on E"


@test
def key_collected_before_exit():
    end, has = walk(read("path.txt").strip())
    assert has, "path never visits K"


@test
def path_is_shortest():
    assert len(read("path.txt").strip()) == shortest(grid()), (len(read("path.txt").strip()), shortest(grid()))


@test
def length_file_matches():
    assert int(read("length.txt").strip()) == len(read("path.txt").strip())


run_all()
