import sys
from functools import reduce


def losing(heaps, misere):
    """True when the player to move in this position loses under perfect play."""
    if misere and all(h <= 1 for h in heaps):
        return sum(heaps) % 2 == 1  # odd number of single heaps: the mover must take the last one
    return reduce(lambda a, b: a ^ b, heaps, 0) == 0


def best_move(mode, heaps):
    misere = mode == "misere"
    for i, h in enumerate(heaps):
        for k in range(1, h + 1):
            if losing(heaps[:i] + [h - k] + heaps[i + 1 :], misere):
                return f"{i} {k}"
    return "lose"


if __name__ == "__main__":
    print(best_move(sys.argv[1], [int(a) for a in sys.argv[2:]]))
