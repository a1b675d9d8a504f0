"""Small statistics helpers."""


def moving_average(xs, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    out = []
    for i in range(len(xs) - k):
        window = xs[i : i + k]
        out.append(sum(window) / k)
    return out


def percentile(xs, p):
    s = sorted(xs)
    rank = len(s) * p / 100
    lo = int(rank)
    hi = min(lo + 1, len(s) - 1)
    frac = rank - lo
    return s[lo] + (s[hi] - s[lo]) * frac
