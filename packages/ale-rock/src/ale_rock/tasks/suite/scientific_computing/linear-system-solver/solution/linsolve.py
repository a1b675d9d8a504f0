import json


def _eliminate(A, b):
    n = len(A)
    M = [list(map(float, row)) + [float(bi)] for row, bi in zip(A, b)]
    scale = max((abs(v) for row in A for v in row), default=0.0)
    sign = 1.0
    for k in range(n):
        p = max(range(k, n), key=lambda i: abs(M[i][k]))
        if abs(M[p][k]) <= 1e-12 * scale or scale == 0:
            return M, 0.0
        if p != k:
            M[k], M[p] = M[p], M[k]
            sign = -sign
        for i in range(k + 1, n):
            f = M[i][k] / M[k][k]
            for j in range(k, n + 1):
                M[i][j] -= f * M[k][j]
    return M, sign


def det(A):
    M, sign = _eliminate(A, [0] * len(A))
    if sign == 0.0:
        return 0.0
    d = sign
    for i in range(len(A)):
        d *= M[i][i]
    return d


def solve(A, b):
    M, sign = _eliminate(A, b)
    if sign == 0.0:
        raise ValueError("singular")
    n = len(A)
    x = [0.0] * n
    for i in range(n - 1, -1, -1):
        x[i] = (M[i][n] - sum(M[i][j] * x[j] for j in range(i + 1, n))) / M[i][i]
    return x


if __name__ == "__main__":
    s = json.load(open("system.json"))
    json.dump(solve(s["A"], s["b"]), open("x.json", "w"))
