import sys


def solve(cells):
    def cands(i):
        r, c = divmod(i, 9)
        used = {cells[r * 9 + k] for k in range(9)} | {cells[k * 9 + c] for k in range(9)}
        br, bc = 3 * (r // 3), 3 * (c // 3)
        used |= {cells[(br + a) * 9 + bc + b] for a in range(3) for b in range(3)}
        return [d for d in range(1, 10) if d not in used]

    empties = [i for i in range(81) if cells[i] == 0]
    if not empties:
        return True
    best = min(empties, key=lambda i: len(cands(i)))
    for d in cands(best):
        cells[best] = d
        if solve(cells):
            return True
    cells[best] = 0
    return False


def consistent(cells):
    for i, v in enumerate(cells):
        if v:
            cells[i] = 0
            r, c = divmod(i, 9)
            br, bc = 3 * (r // 3), 3 * (c // 3)
            peers = {cells[r * 9 + k] for k in range(9)} | {cells[k * 9 + c] for k in range(9)}
            peers |= {cells[(br + a) * 9 + bc + b] for a in range(3) for b in range(3)}
            cells[i] = v
            if v in peers:
                return False
    return True


cells = [int(ch) for ch in "".join(sys.stdin.read().split())]
if consistent(cells) and solve(cells):
    print("\n".join("".join(map(str, cells[r * 9 : r * 9 + 9])) for r in range(9)))
else:
    print("unsolvable")
