import heapq
import sys

GOAL = "123456780"
DELTA = {"U": -3, "D": 3, "L": -1, "R": 1}


def solvable(b):
    tiles = [c for c in b if c != "0"]
    inv = sum(1 for i in range(8) for j in range(i + 1, 8) if tiles[i] > tiles[j])
    return inv % 2 == 0


def h(b):
    return sum(abs(i // 3 - (int(c) - 1) // 3) + abs(i % 3 - (int(c) - 1) % 3) for i, c in enumerate(b) if c != "0")


def solve(start):
    if not solvable(start):
        return None
    frontier = [(h(start), 0, start, "")]
    seen = {start: 0}
    while frontier:
        _, g, b, path = heapq.heappop(frontier)
        if b == GOAL:
            return path
        z = b.index("0")
        for m, d in DELTA.items():
            n = z + d
            if 0 <= n < 9 and not (m in "LR" and n // 3 != z // 3):
                lst = list(b)
                lst[z], lst[n] = lst[n], lst[z]
                nb = "".join(lst)
                if seen.get(nb, 99) > g + 1:
                    seen[nb] = g + 1
                    heapq.heappush(frontier, (g + 1 + h(nb), g + 1, nb, path + m))
    return None


for line in sys.stdin:
    if line.strip():
        r = solve(line.strip())
        print("unsolvable" if r is None else r)
