import math


def simpson(f, a, b, n):
    if n < 2 or n % 2:
        raise ValueError("n must be even and >= 2")
    h = (b - a) / n
    s = f(a) + f(b)
    s += 4 * sum(f(a + i * h) for i in range(1, n, 2))
    s += 2 * sum(f(a + i * h) for i in range(2, n, 2))
    return s * h / 3


def _rec(f, a, b, fa, fm, fb, whole, tol, depth):
    m = (a + b) / 2
    lm, rm = (a + m) / 2, (m + b) / 2
    flm, frm = f(lm), f(rm)
    left = (m - a) / 6 * (fa + 4 * flm + fm)
    right = (b - m) / 6 * (fm + 4 * frm + fb)
    if depth <= 0 or abs(left + right - whole) <= 15 * tol:
        return left + right + (left + right - whole) / 15
    return _rec(f, a, m, fa, flm, fm, left, tol / 2, depth - 1) + _rec(f, m, b, fm, frm, fb, right, tol / 2, depth - 1)


def adaptive_simpson(f, a, b, tol=1e-9):
    fa, fb, fm = f(a), f(b), f((a + b) / 2)
    whole = (b - a) / 6 * (fa + 4 * fm + fb)
    return _rec(f, a, b, fa, fm, fb, whole, tol, 50)


if __name__ == "__main__":
    vals = [
        adaptive_simpson(lambda x: math.exp(-x * x), 0, 2, 1e-12),
        adaptive_simpson(lambda x: math.sin(x) / x, 1, 10, 1e-12),
        adaptive_simpson(math.sqrt, 0, 1, 1e-12),
    ]
    with open("results.txt", "w") as fh:
        fh.write("".join(f"{v:.10f}\n" for v in vals))
