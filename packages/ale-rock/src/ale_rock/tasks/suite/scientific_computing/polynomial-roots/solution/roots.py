import sys


def evaluate(c, x):
    v = 0.0
    for a in c:
        v = v * x + a
    return v


def derivative(c):
    n = len(c) - 1
    return [a * (n - i) for i, a in enumerate(c[:-1])]


def bisect(c, lo, hi):
    flo = evaluate(c, lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        fm = evaluate(c, mid)
        if fm == 0:
            return mid
        if (fm < 0) == (flo < 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return (lo + hi) / 2


def real_roots(c):
    roots = []
    if len(c) > 1 and c[-1] == 0:  # x = 0 is a root: factor it out
        while len(c) > 1 and c[-1] == 0:
            c = c[:-1]
        roots.append(0.0)
    if len(c) == 2:
        roots.append(-c[1] / c[0])
    elif len(c) > 2:
        bound = 1 + max(abs(a / c[0]) for a in c[1:])  # Cauchy bound
        # Between consecutive critical points the polynomial is monotonic: at most one root each.
        crit = [x for x in real_roots(derivative(c)) if -bound < x < bound]
        scale = max(abs(a) for a in c)
        roots += [x for x in crit if abs(evaluate(c, x)) < 1e-9 * scale]  # repeated roots
        pts = [-bound] + crit + [bound]
        for lo, hi in zip(pts, pts[1:]):
            flo, fhi = evaluate(c, lo), evaluate(c, hi)
            if flo * fhi < 0:
                roots.append(bisect(c, lo, hi))
    out = []
    for r in sorted(roots):
        if not out or abs(r - out[-1]) > 1e-7:
            out.append(r)
    return out


def fmt(x):
    s = f"{x:.6f}"
    return "0.000000" if s == "-0.000000" else s


for line in sys.stdin:
    if line.strip():
        rs = real_roots([float(t) for t in line.split()])
        print(" ".join(fmt(r) for r in rs) if rs else "none")
