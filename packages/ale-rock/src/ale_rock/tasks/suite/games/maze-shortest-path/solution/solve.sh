python3 - <<'PY'
from collections import deque
g = [r for r in open("maze.txt").read().splitlines() if r]
find = lambda ch: next((r, c) for r, row in enumerate(g) for c, x in enumerate(row) if x == ch)
s, key = find("S"), find("K")
moves = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
start = (s, False)
prev = {start: None}
q = deque([start])
while q:
    st = q.popleft()
    (r, c), has = st
    if g[r][c] == "E" and has:
        break
    for m, (dr, dc) in moves.items():
        nr, nc = r + dr, c + dc
        if g[nr][nc] != "#":
            ns = ((nr, nc), has or (nr, nc) == key)
            if ns not in prev:
                prev[ns] = (st, m)
                q.append(ns)
path = []
while prev[st] is not None:
    st, m = prev[st]
    path.append(m)
p = "".join(reversed(path))
open("path.txt", "w").write(p + "\n")
open("length.txt", "w").write(f"{len(p)}\n")
PY
