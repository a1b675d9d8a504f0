"""Binary search helpers for sorted lists."""


def lower_bound(xs, x):
    lo, hi = 0, len(xs) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < x:
            lo = mid
        else:
            hi = mid - 1
    return lo


def upper_bound(xs, x):
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def count(xs, x):
    return upper_bound(xs, x) - lower_bound(xs, x)
