import sys
from functools import cache

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def winner(b):
    for a, c, d in LINES:
        if b[a] != "." and b[a] == b[c] == b[d]:
            return b[a]
    return None


@cache
def score(b, player):
    """Score for the player to move: >0 win (larger = faster), <0 loss (closer to 0 = slower), 0 draw."""
    other = "O" if player == "X" else "X"
    best = None
    for i, c in enumerate(b):
        if c != ".":
            continue
        nb = b[:i] + player + b[i + 1 :]
        if winner(nb) == player:
            s = 10 + nb.count(".")
        elif "." not in nb:
            s = 0
        else:
            s = -score(nb, other)
        best = s if best is None else max(best, s)
    return best if best is not None else 0


def main():
    b = "".join(sys.stdin.read().split())
    player = "X" if b.count("X") == b.count("O") else "O"
    other = "O" if player == "X" else "X"
    best_i, best_s = None, None
    for i, c in enumerate(b):
        if c != ".":
            continue
        nb = b[:i] + player + b[i + 1 :]
        if winner(nb) == player:
            s = 10 + nb.count(".")
        elif "." not in nb:
            s = 0
        else:
            s = -score(nb, other)
        if best_s is None or s > best_s:
            best_i, best_s = i, s
    print(best_i // 3, best_i % 3)


main()
